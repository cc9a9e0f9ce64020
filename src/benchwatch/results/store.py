"""The results database (PostgreSQL, psycopg 3): runs written when they end, read back by any host that points
at it. The schema is ``schema.sql`` beside this file; docs/results.md describes it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from benchwatch.results import record as rec
from benchwatch.results.dsn import check, connect_options

SCHEMA_VERSION = 2  # 2: sweep_verdicts, sweep_reports, sweeps, history_change_points (a version 1 database gets them in place)
CONNECT_TIMEOUT_S = 5

_RUN_COLUMNS = ("run_id", "host", "started_at", "ended_at", "state", "tool", "engine", "exit_code", "workload",
                "pooled_workload", "workload_key", "figures", "meta", "summary", "settings", "stability", "profile")
_TIMES = ("started_at", "ended_at")
# The columns of the version 2 tables as their writers give them (every one but the key may be None).
VERDICT_COLUMNS = ("variant", "cell", "metric", "clients", "scale", "verdict", "ratio", "ratio_ci_low", "ratio_ci_high",
                   "p_value", "p_adjusted", "n_baseline", "n_variant", "min_effect_pct", "test", "why")
CHANGE_POINT_COLUMNS = ("run_id", "workload_name", "started_at", "verdict", "step_pct", "step_ci_low", "step_ci_high",
                        "confidence", "p_value", "mean_before", "mean_after", "accepted", "changed", "changed_text")
_JSONB = ("workload_key", "figures", "meta", "summary", "settings", "stability", "profile")


def schema_sql() -> str:
    return resources.files("benchwatch.results").joinpath("schema.sql").read_text(encoding="utf-8")


def _upsert_sql() -> str:
    values = ", ".join("to_timestamp(%(" + c + ")s)" if c in _TIMES else f"%({c})s::jsonb" if c in _JSONB
                       else f"%({c})s" for c in _RUN_COLUMNS)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _RUN_COLUMNS if c != "run_id")
    return (f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}) VALUES ({values}) "
            f"ON CONFLICT (run_id) DO UPDATE SET {updates}, written_at = now()")


UPSERT_RUN = _upsert_sql()


@dataclass(frozen=True)
class StoredRun:
    """What history lists of a run in the database, without its files."""

    run_id: str
    host: str
    started_at: float | None
    state: str | None
    workload: str | None
    pooled_workload: str | None
    key: dict[str, str]
    figures: dict[str, Any]


class Store:
    """One connection to the results database, opened on first use. Every write is one transaction."""

    def __init__(self, dsn: str):
        self.dsn = check(dsn)
        self._conn: Any = None
        self._schema_checked = False

    def connect(self):
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.dsn, connect_timeout=CONNECT_TIMEOUT_S, application_name="benchwatch",
                                         **connect_options(self.dsn))
            self._schema_checked = False
        if not self._schema_checked:
            self.ensure_schema()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ensure_schema(self) -> None:
        """Creates what is missing (every statement may run again); refuses a database of a newer schema."""
        conn = self._conn
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('benchwatch results schema'))")
            conn.execute(schema_sql())
            newest = conn.execute("SELECT max(version) FROM benchwatch_schema").fetchone()[0]
        if newest is not None and newest > SCHEMA_VERSION:
            raise RuntimeError(f"the results database has schema version {newest}, newer than this benchwatch's "
                               f"{SCHEMA_VERSION}: upgrade benchwatch")
        self._schema_checked = True

    # -- writing -----------------------------------------------------------------------

    def write_record(self, record: rec.RunRecord) -> None:
        """The run's row and files, replacing what the database had of it (idempotent: written again, the same)."""
        conn = self.connect()
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(UPSERT_RUN, record.row())
            cur.execute("DELETE FROM run_files WHERE run_id = %s", (record.run_id,))
            with cur.copy("COPY run_files (run_id, name, kind, encoding, size, data) FROM STDIN") as copy:
                for f in record.files:
                    copy.write_row((record.run_id, f.name, f.kind, f.encoding, f.size, f.data))

    def write_run(self, run_dir: str, host: str, index_entry: Mapping[str, Any] | None = None,
                  pooled_workload: str | None = None) -> rec.RunRecord:
        """Reads the run directory and writes its record (see :func:`benchwatch.results.record.read_run`)."""
        record = rec.read_run(run_dir, host, index_entry, pooled_workload)
        self.write_record(record)
        return record

    def write_history_state(self, host: str, kind: str, content: Any) -> None:
        """One of history's state files of a host (accepted, names, annotations), as it is now."""
        conn = self.connect()
        with conn.transaction():
            conn.execute("INSERT INTO history_state (host, kind, content) VALUES (%s, %s, %s::jsonb) "
                         "ON CONFLICT (host, kind) DO UPDATE SET content = EXCLUDED.content, written_at = now()",
                         (host, kind, json.dumps(content)))

    def write_verdicts(self, host: str, sweep: str, baseline: str, rows: Sequence[Mapping[str, Any]],
                       report: Mapping[str, Any] | None = None) -> None:
        """A report's verdicts of ``sweep`` against ``baseline`` on ``host`` (rows of :data:`VERDICT_COLUMNS`),
        replacing the ones an earlier report wrote: the table holds the latest report, as the dashboard shows;
        with ``report`` (the report's whole model), that too, in sweep_reports, in the same transaction."""
        conn = self.connect()
        columns = ("host", "sweep", "baseline", *VERDICT_COLUMNS)
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("DELETE FROM sweep_verdicts WHERE host = %s AND sweep = %s AND baseline = %s",
                        (host, sweep, baseline))
            cur.executemany(f"INSERT INTO sweep_verdicts ({', '.join(columns)}) "
                            f"VALUES ({', '.join(['%s'] * len(columns))})",
                            [(host, sweep, baseline, *(r.get(c) for c in VERDICT_COLUMNS)) for r in rows])
            if report is not None:
                runs = report.get("runs")
                if not isinstance(runs, dict):
                    runs = {}
                cur.execute("INSERT INTO sweep_reports (host, sweep, baseline, runs_planned, runs_done, report) "
                            "VALUES (%s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT (host, sweep, baseline) DO UPDATE SET "
                            "runs_planned = EXCLUDED.runs_planned, runs_done = EXCLUDED.runs_done, "
                            "report = EXCLUDED.report, reported_at = now()",
                            (host, sweep, baseline, runs.get("planned"), runs.get("done"), rec.jsonb_text(report)))

    def write_sweep(self, row: Mapping[str, Any]) -> bool:
        """A sweep's row (:data:`benchwatch.results.sweeps.COLUMNS`), replacing the one its host wrote before,
        unless that one is newer (more of the same sweep's events: a pending row written late). Whether it was
        written."""
        from benchwatch.results.sweeps import COLUMNS, JSONB

        conn = self.connect()
        values = ", ".join("to_timestamp(%(" + c + ")s)" if c == "created_at" else f"%({c})s::jsonb" if c in JSONB
                           else f"%({c})s" for c in COLUMNS)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS if c not in ("host", "sweep"))
        params = {c: rec.jsonb_text(row.get(c)) if c in JSONB else row.get(c) for c in COLUMNS}
        with conn.transaction():
            cur = conn.execute(
                f"INSERT INTO sweeps ({', '.join(COLUMNS)}) VALUES ({values}) ON CONFLICT (host, sweep) DO UPDATE "
                f"SET {updates}, written_at = now() WHERE sweeps.created_at IS DISTINCT FROM EXCLUDED.created_at "
                "OR jsonb_array_length(sweeps.events) <= jsonb_array_length(EXCLUDED.events)", params)
            return cur.rowcount == 1

    def sweep_hosts(self, sweep: str) -> list[tuple[str, str, float | None]]:
        """The hosts that have a sweep of this name: (host, state, when it was last written), by host."""
        conn = self.connect()
        rows = conn.execute("SELECT host, state, extract(epoch FROM written_at)::float8 FROM sweeps WHERE sweep = %s "
                            "ORDER BY host", (sweep,)).fetchall()
        conn.commit()
        return [(r[0], r[1], r[2]) for r in rows]

    def read_sweep(self, host: str, sweep: str) -> dict[str, Any] | None:
        """The row of ``host``'s sweep, its jsonb columns parsed, created_at in epoch seconds; None."""
        from benchwatch.results.sweeps import COLUMNS, JSONB

        conn = self.connect()
        select = ", ".join("extract(epoch FROM created_at)::float8" if c == "created_at" else f"{c}::text" if c in JSONB
                           else c for c in COLUMNS)
        row = conn.execute(f"SELECT {select} FROM sweeps WHERE host = %s AND sweep = %s", (host, sweep)).fetchone()
        conn.commit()
        if row is None:
            return None
        return {c: (json.loads(v) if c in JSONB and v is not None else v) for c, v in zip(COLUMNS, row)}

    def write_change_points(self, host: str, workload: str, metric: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """History's change points of ``workload`` in ``metric`` as found on ``host`` (rows of
        :data:`CHANGE_POINT_COLUMNS`; ``started_at`` in epoch seconds, ``changed`` JSON-able), replacing the
        earlier ones: as runs come an estimate moves, and the table holds the latest answer."""
        conn = self.connect()
        columns = ("host", "workload", "metric", *CHANGE_POINT_COLUMNS)
        values = ", ".join("to_timestamp(%s)" if c == "started_at" else "%s::jsonb" if c == "changed" else "%s"
                           for c in columns)
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("DELETE FROM history_change_points WHERE host = %s AND workload = %s AND metric = %s",
                        (host, workload, metric))
            cur.executemany(f"INSERT INTO history_change_points ({', '.join(columns)}) VALUES ({values})",
                            [(host, workload, metric, *(json.dumps(r.get(c)) if c == "changed" else r.get(c)
                                                        for c in CHANGE_POINT_COLUMNS)) for r in rows])

    # -- reading -----------------------------------------------------------------------

    def history_states(self) -> list[tuple[str, str, Any]]:
        """Every host's history state as the database has it: (host, kind, content), by host and kind."""
        conn = self.connect()
        rows = conn.execute("SELECT host, kind, content::text FROM history_state ORDER BY host, kind").fetchall()
        conn.commit()
        return [(r[0], r[1], json.loads(r[2])) for r in rows]

    def runs(self, host: str | None = None) -> list[StoredRun]:
        """Every run (of ``host``, or of all hosts), oldest first, with the figures history reads."""
        conn = self.connect()
        sql = ("SELECT run_id, host, extract(epoch FROM started_at)::float8, state, workload, pooled_workload, "
               "workload_key::text, figures::text FROM runs")
        params: tuple = ()
        if host is not None:
            sql += " WHERE host = %s"
            params = (host,)
        rows = conn.execute(sql + " ORDER BY started_at NULLS LAST, run_id", params).fetchall()
        conn.commit()
        loads = json.loads
        keys: dict[str, dict[str, str]] = {}  # the runs of a workload share their key: each text parsed once
        out = []
        for r in rows:
            key = keys.get(r[6]) if r[6] else {}
            if key is None:
                key = keys[r[6]] = loads(r[6])
            out.append(StoredRun(r[0], r[1], r[2], r[3], r[4], r[5], key, loads(r[7]) if r[7] else {}))
        return out

    def meta(self, run_id: str) -> dict[str, Any]:
        """A run's meta.json as the database has it; {} when it has no such run."""
        conn = self.connect()
        row = conn.execute("SELECT meta::text FROM runs WHERE run_id = %s", (run_id,)).fetchone()
        conn.commit()
        return json.loads(row[0]) if row else {}

    def stability(self, run_id: str) -> dict[str, Any] | None:
        """A run's stability profile as the database has it (summary.json's "stability"); None without one."""
        conn = self.connect()
        row = conn.execute("SELECT stability::text FROM runs WHERE run_id = %s", (run_id,)).fetchone()
        conn.commit()
        found = json.loads(row[0]) if row and row[0] else None
        return found if isinstance(found, dict) else None

    def run_ids(self) -> set[str]:
        conn = self.connect()
        ids = {r[0] for r in conn.execute("SELECT run_id FROM runs").fetchall()}
        conn.commit()
        return ids

    def files(self, run_id: str) -> list[rec.RunFile]:
        conn = self.connect()
        rows = conn.execute("SELECT name, kind, encoding, size, data FROM run_files WHERE run_id = %s ORDER BY name",
                            (run_id,)).fetchall()
        conn.commit()
        return [rec.RunFile(r[0], r[1], r[2], r[3], bytes(r[4])) for r in rows]

    def materialize(self, run_id: str, runs_dir: str):
        """The run as ``<runs_dir>/<run_id>/`` (left as it is when already there), for the readers of run
        directories (report, compare, snapshot, explain); None when the database has no such run."""
        files = self.files(run_id)
        if not files:
            return None
        return rec.materialize(files, runs_dir, run_id)


def write_to(dsn: str | None, write: Callable[[Store], None]) -> str | None:
    """Runs ``write`` on the results database at ``dsn`` (nothing when there is none); why it could not, else None.
    For the commands that write what they computed (report's verdicts, history's change points): a database
    that is down costs the rows of this answer, which the next answer writes again, never the command's own."""
    if not dsn:
        return None
    try:
        with Store(dsn) as store:
            write(store)
    except Exception as e:  # psycopg.OperationalError (down), RuntimeError (a newer schema): said by the caller
        from benchwatch.results.dsn import public

        return f"the results database ({public(dsn)}): {type(e).__name__}: {str(e).strip()[:300]}"
    return None


def fetch_run(dsn: str | None, run_id: str, into: str):
    """A run another host made, from the results database, as a run directory under ``into`` (a cache beside the
    runs directory, which the exporter does not follow), for report, compare, snapshot and explain; None when
    there is no database, it is down, or it has no such run."""
    if not dsn or not run_id:
        return None
    try:
        with Store(dsn) as store:
            return store.materialize(run_id, into)
    except Exception:  # psycopg.OperationalError (down), ValueError (a damaged record): as if it had none
        return None
