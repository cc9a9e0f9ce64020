"""The statements collector: time per call of the benchmark's top statements, and which are in flight.

A TPS dip that comes from one statement (an UPDATE waiting on a lock, a SELECT whose plan lost its
index) shows in no server-wide counter; pgbench's ``-r`` averages each statement over the whole run.
This collector reads the server's statements, in every database (a PL/Proxy front's calls, its shards'
statements spread over several databases of an instance: a statement is summed over them by ``queryid``),
connected to the benchmark's database (the exporter's libpq environment: PGHOST,
PGPORT, PGDATABASE, PGUSER, the password in PGPASSFILE, a 0600 file; never argv):

- ``pg_stat_statements`` (calls and execution time, by ``queryid``): recorded when a statement
  finishes, so a statement stuck for the whole dip shows only after it;
- ``pg_stat_activity`` (active sessions by ``query_id`` and wait event): the statements in flight,
  what shows while the dip is under way.

and remote-writes, at each sample's time, for the TOP statements by execution time and the TOP by
calls since the previous sample (a statement stays written TRACK_S after it was last among them, at most
MAX_TRACKED at once, the one longest out of the top making room for a new one: a bounded set of
queryids; the first reading only sets the starting point):

- ``pg_statement_calls_total{queryid, statement}``, ``pg_statement_exec_seconds_total{...}``;
- ``pg_statement_active_sessions{queryid, statement, wait_event_type, wait_event}`` (the ACTIVE_ROWS
  largest groups; ``CPU`` for a session that waits on nothing) and ``pg_statement_active_seconds_max``
  (how long the longest of them had been at it: a wait for a table lock is taken while the statement
  is parsed, before execution, and pg_stat_statements' time never holds it).

``statement`` is pg_stat_statements' text (constants already ``$n``), any literal left replaced by
``?``, whitespace collapsed, cut at TEXT_CHARS. It samples every EVERY_S seconds, every FAST_S while
a followed run's progress line is possibly low (the exporter's ``on_possibly_low``: as the dips
collector decides to look) and FAST_HOLD_S after: pg_stat_statements records the slow calls when
they end, after the dip; every IDLE_EVERY_S while no followed run is live (``ExporterOptions.run_live``).
A daemon that follows no runs (an agent's log follower) judges by the server instead, from the readings
it takes anyway: the full pace while other sessions are in flight or the statements are called more
than BUSY_CALLS_PER_S times a second (a monitoring scrape is about 10), and BUSY_HOLD_S after; every
IDLE_EVERY_S otherwise. Queries run in a thread of their own: a server that does not answer never
holds up the progress lines. A connection that fails is logged once and tried again RETRY_S later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchwatch.collector import ExporterOptions, MetricsDoc, Outbox, register_collector
from benchwatch.model.samples import STALE_NAN, Sample, sample
from benchwatch.util import sqltext
from benchwatch.util.sqltext import TEXT_CHARS

log = logging.getLogger("benchwatch.exporter")

METRICS_DOC_SECTION = """
## Statements (benchwatch exporter, `statements` collector)

The benchmark database's top statements, read from `pg_stat_statements` (time per call: the rate of
`pg_statement_exec_seconds_total` over the rate of `pg_statement_calls_total`) and `pg_stat_activity`
(the statements in flight and what they wait on) every 5 s while a run is live (every 30 s between
runs; in an agent's follower, which sees no runs: every 5 s while other sessions are in flight or
statements are called more than 50 times a second, and a minute after, else every 30 s), every second while a run's TPS line is possibly low and 10 s after, remote-written at each sample's time: `benchwatch explain`'s `statement`
cause ([explain.md](explain.md)). Only the 8 statements run most often and the 8 that took most time since the previous sample
(each kept 60 s after, at most 16 at once). They carry the exporter's `target` and `host` labels,
`queryid` and `statement` (its normalized text: constants as `$n` or `?`, cut at 100 characters).
PostgreSQL 14 or later, `pg_stat_statements` preloaded and created in the database (the embedded
server does both); the connection comes from the exporter's PG* environment and pgpass file.

| metric | type | meaning |
| --- | --- | --- |
"""

METRICS: dict[str, tuple[str, str]] = {
    "pg_statement_calls_total": (
        "counter", "Calls of one of the server's top statements, all databases (pg_stat_statements, by queryid; "
                   "statement: its normalized text, cut at 100 characters), sampled every 5 s, every second while a "
                   "run's TPS line is possibly low."),
    "pg_statement_exec_seconds_total": (
        "counter", "Execution time of the same statements (pg_stat_statements' total_exec_time), in seconds; "
                   "divided by the calls' rate: time per call."),
    "pg_statement_active_sessions": (
        "gauge", "Active sessions running a statement (pg_stat_activity by query_id) by what they wait on "
                 "(wait_event_type, wait_event; CPU for none), the 8 largest groups, when sampled."),
    "pg_statement_active_seconds_max": (
        "gauge", "How long the longest of those sessions had been running the statement when sampled (now - "
                 "query_start), in seconds: a wait for a table lock comes before execution and is not in "
                 "pg_stat_statements' time."),
}

EVERY_S = 5.0        # a quiet run: the baseline per call, at a few ms of the server's CPU per sample
IDLE_EVERY_S = 30.0  # no followed run is live (ExporterOptions.run_live): nothing to explain, starting points only
FAST_S = 1.0         # while a progress line is possibly low
FAST_HOLD_S = 10.0   # ... and this long after: the slow calls are recorded when they end
# A daemon that follows no runs: the server counts as busy (full pace) while a reading finds other sessions
# in flight or more statement calls a second than this since the previous reading (postgres_exporter's
# scrape makes about 10 at 1 s), and BUSY_HOLD_S after the last such reading (and after the daemon starts).
BUSY_CALLS_PER_S = 50.0
BUSY_HOLD_S = 60.0
TOP = 8              # statements written per sample by time, and as many by calls (pgbench's tpcb-like has 7)
TRACK_S = 60.0       # a statement stays written this long after it left the top, so its counters go on
MAX_TRACKED = 16     # at most this many queryids written at once (the series budget)
ACTIVE_ROWS = 8      # in-flight groups written per sample
RETRY_S = 10.0
EXTENSION_LOOK_S = 30.0  # pg_stat_statements not created: look for it again this often
UNSUPPORTED_RETRY_S = 600.0  # a server too old for query_id may be upgraded, not within seconds
# Our own queries carry this comment, by which their pg_stat_statements rows are left out.
MARK = "/* benchwatch statements */"

STATEMENTS_SQL = MARK + """
SELECT s.queryid::text, sum(s.calls)::float8, sum(s.total_exec_time)::float8
FROM {schema}.pg_stat_statements(false) s
WHERE s.toplevel
GROUP BY 1"""
TEXTS_SQL = MARK + """
SELECT s.queryid::text, min(s.query) FROM {schema}.pg_stat_statements(true) s
WHERE s.queryid::text = ANY(%s) GROUP BY 1"""
ACTIVE_SQL = MARK + r"""
SELECT coalesce(a.query_id::text, ''), coalesce(a.wait_event_type, 'CPU'), coalesce(a.wait_event, 'CPU'),
       count(*)::float8, coalesce(max(extract(epoch FROM clock_timestamp() - a.query_start)), 0)::float8,
       min(left(a.query, 1000))
FROM pg_catalog.pg_stat_activity a
WHERE a.state = 'active' AND a.pid <> pg_catalog.pg_backend_pid()
  AND a.backend_type = 'client backend'
GROUP BY a.query_id, 2, 3,
         -- No query_id yet (a session waiting for a table lock while its statement is parsed): by its text.
         CASE WHEN a.query_id IS NULL THEN regexp_replace(regexp_replace(left(a.query, 1000), '''[^'']*''', '?', 'g'),
                                                          '\m-?[0-9]+(\.[0-9]+)?\M', '?', 'g') END
ORDER BY 4 DESC, 1 LIMIT %s"""

def normalize(text: str) -> str:
    """A statement's text fit for a label: literals as ``?`` (pg_stat_statements leaves some in utility
    statements), one space between words, at most TEXT_CHARS characters."""
    return sqltext.normalize(text, TEXT_CHARS)


StatementRow = tuple[str, float, float]               # queryid, calls, total execution time in ms
ActiveRow = tuple[str, str, str, float, float, str]   # queryid, wait_event_type, wait_event, sessions, longest s, query


@dataclass
class Tracker:
    """Turns successive readings into samples: which statements are written (top by time since the last
    reading, sticky for TRACK_S, at most MAX_TRACKED), their texts, and the in-flight groups."""

    labels: Mapping[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)       # queryid -> normalized text
    ignored: set[str] = field(default_factory=set)            # our own queries
    last: dict[str, tuple[float, float]] = field(default_factory=dict)  # queryid -> (calls, ms) last read
    tracked: dict[str, float] = field(default_factory=dict)   # queryid -> when last among the top
    active: set[tuple[tuple[str, str], ...]] = field(default_factory=set)  # in-flight label sets last written
    started: bool = False  # a first reading (the starting point) was taken
    read_at: float | None = None  # when the last reading was taken
    calls_per_s: float = 0.0  # statement calls a second between the last two readings (ours left out)
    in_flight: bool = False  # the last reading found other sessions running a statement
    keys: dict[str, str] = field(default_factory=dict)  # text -> sqltext.key(text)

    def choose(self, rows: Sequence[StatementRow], now: float) -> list[str]:
        """The queryids to write now; those without a known text yet are for ``need_texts``. The first
        reading only sets the starting point: what ran before (a pgbench -i, yesterday's benchmark) is
        not what runs now."""
        first, self.started = not self.started, True
        since, self.read_at = (now - self.read_at if self.read_at is not None else 0.0), now
        spent, called = [], []
        for qid, calls, ms in rows:
            before = self.last.get(qid)
            # Since the last reading (a new statement, or a reset of the statistics: all of it).
            calls0, ms0 = before if before is not None and ms >= before[1] and calls >= before[0] else (0.0, 0.0)
            if ms - ms0 > 0 and qid not in self.ignored:
                spent.append((ms - ms0, qid))
                called.append((calls - calls0, qid))
        self.last = {qid: (calls, ms) for qid, calls, ms in rows}
        self.calls_per_s = sum(n for n, _ in called) / since if not first and since > 0 else 0.0
        if first:
            return []
        # The statements that took most time, and those run most often: a benchmark's cheap statements (an
        # UPDATE at 0.02 ms, hundreds a second) stay written beside monitoring queries that take longer
        # once a second, so their usual time per call is known when one of them waits.
        by_time = [qid for _, qid in sorted(spent, reverse=True)[:TOP]]
        top = by_time + [qid for _, qid in sorted(called, reverse=True)[:TOP] if qid not in by_time]
        for qid, seen in list(self.tracked.items()):
            if now - seen > TRACK_S or qid not in self.last or qid in self.ignored:
                del self.tracked[qid]
        for qid in top:
            if qid not in self.tracked and len(self.tracked) >= MAX_TRACKED:
                # Full: the statement longest out of the top makes room (a hot one always gets in).
                stale = min((q for q in self.tracked if q not in top), key=lambda q: self.tracked[q], default=None)
                if stale is None:
                    continue
                del self.tracked[stale]
            self.tracked[qid] = now
        return list(self.tracked)

    def _key(self, text: str) -> str:
        """sqltext.key, kept per text: the same few texts are matched every sample (regular expressions)."""
        got = self.keys.get(text)
        if got is None:
            if len(self.keys) >= 4 * MAX_TRACKED + 64:
                self.keys.clear()
            got = self.keys[text] = sqltext.key(text)
        return got

    def need_texts(self) -> list[str]:
        return [qid for qid in self.tracked if qid not in self.texts]

    def learn_texts(self, rows: Iterable[tuple[str, str]]) -> None:
        for qid, query in rows:
            if MARK in (query or ""):
                self.ignored.add(qid)
                self.tracked.pop(qid, None)
            else:
                self.texts[qid] = normalize(query or "")

    def samples(self, written_before: Iterable[str], rows: Sequence[StatementRow],
                active: Sequence[ActiveRow], now: float) -> list[Sample]:
        """The samples of one reading at ``now``: counters of the tracked statements, staleness markers for
        those no longer tracked (``written_before``), the in-flight groups (and markers for gone ones)."""
        ts = round(now * 1000)
        out: list[Sample] = []
        by_id = {qid: (calls, ms) for qid, calls, ms in rows}
        for qid in self.tracked:
            if qid not in self.texts or qid not in by_id:
                continue
            calls, ms = by_id[qid]
            labels = {**self.labels, "queryid": qid, "statement": self.texts[qid]}
            out.append(sample("pg_statement_calls_total", labels, calls, ts))
            out.append(sample("pg_statement_exec_seconds_total", labels, ms / 1000.0, ts))
        for qid in written_before:
            if qid not in self.tracked and qid in self.texts:
                labels = {**self.labels, "queryid": qid, "statement": self.texts[qid]}
                out += [sample(name, labels, STALE_NAN, ts)
                        for name in ("pg_statement_calls_total", "pg_statement_exec_seconds_total")]
        now_active: set[tuple[tuple[str, str], ...]] = set()
        groups: dict[tuple[tuple[str, str], ...], list[float]] = {}
        # The same text may have several queryids (the same statement in another database, or run by another
        # role): a tracked one, whose counters are written, is the one to give a waiting session to.
        by_key = {self._key(text): qid for qid, text in self.texts.items()}
        by_key.update({self._key(self.texts[q]): q for q in self.tracked if q in self.texts})
        for qid, wtype, wevent, sessions, longest, query in active:
            if not qid:
                # A statement waiting for a table lock has no query_id before it is parsed: the tracked
                # statement of the same text (pg_stat_statements' $n against the literals sent).
                qid = by_key.get(self._key(query or ""), "")
            if qid in self.ignored or MARK in (query or ""):
                continue
            text = self.texts.get(qid) or normalize(query or "")
            key = sample("pg_statement_active_sessions", {**self.labels, "queryid": qid, "statement": text,
                                                             "wait_event_type": wtype, "wait_event": wevent}, 0.0, ts).labels
            got = groups.setdefault(key, [0.0, 0.0])
            got[0] += float(sessions)
            got[1] = max(got[1], round(float(longest), 3))
        for key, (sessions, longest) in groups.items():
            now_active.add(key)
            out += [Sample("pg_statement_active_sessions", key, sessions, ts),
                    Sample("pg_statement_active_seconds_max", key, longest, ts)]
        out += [Sample(name, key, STALE_NAN, ts) for key in self.active - now_active
                for name in ("pg_statement_active_sessions", "pg_statement_active_seconds_max")]
        self.active = now_active
        self.in_flight = bool(now_active)
        return out


class Schedule:
    """When the next sample is due: every EVERY_S, every FAST_S while a followed run's newest TPS line is
    possibly low and FAST_HOLD_S after. ``hurry`` is called for each such line (the exporter's
    ``on_possibly_low``, from the dips collector's judgement)."""

    def __init__(self, clock: Callable[[], float] = time.time, wake: Callable[[], None] | None = None,
                 run_live: Callable[[], bool] | None = None):
        self.clock = clock
        self.wake = wake  # called when the pace turns fast, so the wait for a slow step ends
        self.run_live = run_live
        self.fast_until = 0.0
        # Where no run is followed (run_live None): until when the server counts as busy; a daemon that
        # starts knows nothing of it yet (an agent started for a benchmark about to begin).
        self.busy_until = clock() + BUSY_HOLD_S
        self.last_sample = -float("inf")  # clock() of the last sample taken
        self.lock = threading.Lock()

    def hurry(self) -> None:
        with self.lock:
            was_fast = self.clock() < self.fast_until
            self.fast_until = self.clock() + FAST_HOLD_S
            if not was_fast and self.wake is not None:
                self.wake()

    def step(self) -> float:
        """Seconds until the next sample after one taken now."""
        return FAST_S if self.clock() < self.fast_until else EVERY_S

    def busy(self) -> None:
        """A reading found the server at work (where no run is followed): the full pace BUSY_HOLD_S more."""
        self.busy_until = self.clock() + BUSY_HOLD_S

    def due(self) -> bool:
        """Whether a sample is due now: always while a followed run is live (where the daemon follows none:
        while the server is busy), else IDLE_EVERY_S after the last (the loop still wakes every FAST_S to
        see a run start)."""
        live = self.run_live() if self.run_live is not None else self.clock() < self.busy_until
        if live or self.clock() < self.fast_until:
            return True
        return self.clock() - self.last_sample >= IDLE_EVERY_S - FAST_S / 2

    def taken(self) -> None:
        self.last_sample = self.clock()


class Unsupported(Exception):
    """The server cannot give what the collector reads: asked again only every UNSUPPORTED_RETRY_S."""


class Reader:
    """The server side: one autocommit connection (libpq keywords, the password from the passfile), kept."""

    def __init__(self, params: Mapping[str, str], clock: Callable[[], float] = time.monotonic):
        self.params = dict(params)
        self.conn: Any = None
        self.schema: str | None = None  # pg_stat_statements' schema; None: not there (in flight only)
        self.clock = clock
        self.looked = 0.0  # when pg_extension was last read

    def _find_extension(self, conn: Any) -> str | None:
        """pg_stat_statements' schema, quoted, or None when it is not created in this database."""
        from psycopg import sql

        self.looked = self.clock()
        row = conn.execute(MARK + " SELECT extnamespace::regnamespace::text FROM pg_catalog.pg_extension "
                           "WHERE extname = 'pg_stat_statements'").fetchone()
        return sql.Identifier(row[0]).as_string(conn) if row else None

    def open(self) -> None:
        from benchwatch.engines.postgresql import connect

        conn = connect.connect(self.params)
        try:
            conn.execute(MARK + " SET statement_timeout = '2s'")
            got = conn.execute(MARK + " SELECT current_setting('server_version_num')::int").fetchone()
            version = got[0] if got else 0
            if version < 140000:
                raise Unsupported(f"PostgreSQL 14 or later needed (pg_stat_activity.query_id); server {version}")
            self.schema = self._find_extension(conn)
            if self.schema is None:
                log.warning("statements collector: pg_stat_statements is not created in this database; "
                            "sampling statements in flight only, and looking for it every %.0f s", EXTENSION_LOOK_S)
        except Exception:
            conn.close()
            raise
        self.conn = conn

    def statements(self) -> list[StatementRow]:
        if self.schema is None and self.clock() - self.looked >= EXTENSION_LOOK_S:
            # Its owner may create it while we watch (CREATE EXTENSION needs no restart once preloaded).
            self.schema = self._find_extension(self.conn)
            if self.schema is not None:
                log.info("statements collector: pg_stat_statements found, reading time per call")
        if self.schema is None:
            return []
        return [(q, c, t) for q, c, t in self.conn.execute(STATEMENTS_SQL.format(schema=self.schema)).fetchall()]

    def texts(self, queryids: list[str]) -> list[tuple[str, str]]:
        if self.schema is None or not queryids:
            return []
        return list(self.conn.execute(TEXTS_SQL.format(schema=self.schema), (queryids,)).fetchall())

    def active(self) -> list[ActiveRow]:
        return [(q, wt, we, n, longest, text)
                for q, wt, we, n, longest, text in self.conn.execute(ACTIVE_SQL, (ACTIVE_ROWS,)).fetchall()]

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # already broken
                pass
        self.conn = None


class StatementsCollector:
    def __init__(self, sink: Callable[[list[Sample]], None], reader: Any, clock: Callable[[], float] = time.time,
                 labels: Mapping[str, str] | None = None,
                 on_possibly_low: Callable[[Callable[[], None]], None] | None = None,
                 run_live: Callable[[], bool] | None = None):
        self.sink = sink
        self.reader = reader
        self.clock = clock
        self.tracker = Tracker(labels=dict(labels or {}))
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.schedule = Schedule(clock, wake=self._wake.set, run_live=run_live)
        self.thread_cpu_seconds = 0.0  # the sampling thread's CPU (the exporter's per-collector self-metric)
        if on_possibly_low is not None:
            on_possibly_low(self.schedule.hurry)
        self.outbox: Outbox[Sample] = Outbox()
        self.thread: threading.Thread | None = None
        self.failing = False

    def sample_once(self) -> list[Sample]:
        """One reading: connects if need be; returns its samples (raises on a server error)."""
        if self.reader.conn is None:
            self.reader.open()
        rows = self.reader.statements()
        now = self.clock()
        before = list(self.tracker.tracked)
        self.tracker.choose(rows, now)
        missing = self.tracker.need_texts()
        if missing:
            self.tracker.learn_texts(self.reader.texts(missing))
        active = self.reader.active()
        got = self.tracker.samples(before, rows, active, now)
        if self.tracker.in_flight or self.tracker.calls_per_s > BUSY_CALLS_PER_S:
            self.schedule.busy()
        return got

    def tick(self) -> float:
        """One reading into the outbox; returns the seconds until the next. A failure is logged once
        (until a reading succeeds again) and retried RETRY_S later, with a new connection."""
        if not self.schedule.due():
            # Between runs: look again within a second (a clock comparison), so a run that starts is read
            # from its first seconds; a wait of EVERY_S left a 10 s run one reading, and no time per call.
            return FAST_S
        self.schedule.taken()
        try:
            got = self.sample_once()
        except Exception as e:  # a server away, a restart, a permission: never the exporter's end
            delay = UNSUPPORTED_RETRY_S if isinstance(e, Unsupported) else RETRY_S
            if not self.failing:
                log.warning("statements collector: %s; trying again every %.0f s",
                            str(e).strip() or type(e).__name__, delay)
            self.failing = True
            self.reader.close()
            return delay
        if self.failing:
            log.info("statements collector: reading the server again")
        self.failing = False
        if got:
            self.outbox.put(got)
        return self.schedule.step()

    def _loop(self) -> None:
        while not self._stop.is_set():
            cpu0 = time.thread_time()
            delay = self.tick()
            self.thread_cpu_seconds += time.thread_time() - cpu0
            self._wake.wait(delay)  # set early when a possibly low line asks for the fast pace
            self._wake.clear()

    def poll(self) -> int:
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, daemon=True, name="statements")
            self.thread.start()
        return self.outbox.send(self.sink)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def collect(self) -> Iterable:
        return ()  # remote-written at each sample's time, like the processes collector


def connection_params(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The database the stack gave the daemon in libpq's variables (its ``client_env``: PGHOST, PGPORT,
    PGDATABASE, PGUSER, PGPASSFILE; never a password in argv), or None when it gave none."""
    from benchwatch.engines.postgresql.connect import params_from_env

    params = params_from_env(environ)
    params.pop("password", None)  # a PGPASSWORD inherited from someone's shell stays libpq's own business
    return params if {"host", "port", "service"} & set(params) else None


@register_collector("statements", "time per call of the server's top statements and those in flight "
                                  "(pg_stat_statements, pg_stat_activity; PostgreSQL 14+)")
def _build(options: ExporterOptions) -> StatementsCollector | None:
    params = connection_params(options.environ)
    if not params:
        return None
    return StatementsCollector(options.sink, Reader(params), clock=options.clock,
                               labels=options.database_labels, on_possibly_low=options.on_possibly_low,
                               run_live=options.run_live)


def metrics_doc() -> MetricsDoc:
    return MetricsDoc([(METRICS_DOC_SECTION, METRICS)])
