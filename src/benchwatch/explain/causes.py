"""Candidate causes of a dip, from the run's raw series, each scored and with its evidence.

score = weight x overlap x strength, each of overlap and strength in 0..1:

- overlap: the seconds the signal was active within the dip and the LEAD_S
  seconds before it, over the dip's length (capped at 1);
- strength: how far the signal left its own baseline (the run's median), or a
  fixed figure for a state that has no baseline (a checkpoint, a stall);
- weight: lower for signals that are usually a symptom of something more
  specific (disk busy, full-page images after a checkpoint).

Every candidate is held against its own rate over the rest of the run: a state
that is on as often outside the dip as in it (autovacuum always running), or an
event that happens in most windows that long (checkpoints every 10 s), explains
nothing and loses its score; a rare one keeps it (``lift`` and ``chance``).

Candidates below MIN_SCORE are left out; a dip whose best candidate is
below it has "no cause found". docs/explain.md lists every signal.

Which signals are weighed is the run's: the engine-neutral ones (NEUTRAL) and
those its engine brings (``Engine.explain_signals``), less those its server
cannot give (``Engine.absent_signals``): a PostgreSQL run is not blamed on an
InnoDB region of another target, nor a MySQL run on a PostgreSQL checkpoint.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from benchwatch import engines, loadgens
from benchwatch.model.run import STALL_FACTOR  # as the run model: no line for 1.5 intervals is a stall
from benchwatch.model.samples import is_stale_marker
from benchwatch.query.frames import boolean_regions, prefer_pushed
from benchwatch.query.series import Series
from benchwatch.record.host import NOT_DISKS
from benchwatch.util import sqltext

LEAD_S = 3.0          # a cause may start this long before the TPS falls
AFTERMATH_S = 5.0     # a checkpoint still costs this long after it ends (full-page images)
MIN_SCORE = 0.2
# How far above its run median a disk measure must rise (as well as doubling) to count:
# %util as a share, await in seconds, writes in bytes per second.
DISK_FLOORS = {"util": 0.2, "await": 0.001, "written": 8 * 2**20}
# await counts only in seconds the disk was at least this busy (%util / 100).
AWAIT_MIN_UTIL = 0.05
# cpu_contention: other processes (or new ones alone) must use this many CPUs more than usual;
# a rise of half the machine's CPUs is full strength.
OTHER_CPU_FLOOR = 0.3
# ... and it hurt the run only if the database and the load generator got less CPU than usual
# (below this share of their median); otherwise (a VACUUM FULL working beside a CPU hog) it weighs half.
SQUEEZED = 0.9
# Pressure stall information: the share of the second some task waited, above its usual by this much.
PRESSURE_FLOOR = 0.1
IO_PRESSURE_FLOOR = 0.2
# database_cpu_bound: the database's processes must use this many CPUs more than usual and at least this
# share of the host's CPUs (the machine's main user: the load generator on the same host needs its share,
# so 'all of them' is out of reach), while the CPUs are full: tasks waited for one (PSI at PRESSURE_FLOOR),
# or, without PSI, every process together used this share of them.
DATABASE_CPU_FLOOR = 0.3
DATABASE_CPU_SHARE = 0.5
FULL = 0.9
BUSIEST = 5  # processes named in cpu_contention's evidence (a few busy loops are each a small share)
# statement: time per call must rise to this many times its usual, and by this much (seconds) at least.
STATEMENT_RISE = 3.0
STATEMENT_FLOOR_S = 0.001
# A statement that took this share of the top statements' time in the dip (or more) weighs fully.
STATEMENT_FULL_SHARE = 0.5
# A statement in flight this long (seconds) when sampled is worth naming in the evidence.
IN_FLIGHT_SHOWN_S = 0.5

WEIGHTS = {
    "client_stall": 1.0, "clients_aborted": 1.0, "target_down": 1.0, "lock": 1.0, "checkpoint": 1.0,
    "autovacuum": 0.6, "disk": 0.8, "wal_fpi": 0.5, "innodb_flushing": 1.0,
    # Tasks waiting on I/O is what a busy disk does to them: the disk (or the checkpoint) is the more
    # specific answer when its own measures moved.
    "cpu_contention": 1.0, "io_pressure": 0.5,
    # The server spending its CPUs is the symptom, not why: a checkpoint, a lock or a slow statement in the
    # same dip is the answer to lead with (and ranks above it, see candidates); alone, a rise of a fifth of
    # the CPUs makes MIN_SCORE (0.5 x 0.4).
    "database_cpu_bound": 0.5,
    # The server log's events (PostgreSQL: pg_server_log_events_total), at the log's own times.
    "deadlock": 1.0, "lock_timeout": 1.0, "connection_terminated": 1.0, "out_of_memory": 1.0, "write_error": 1.0,
    # One statement's time per call rose (the exporter's statements collector: pg_stat_statements, pg_stat_activity).
    "statement": 1.0,
}
# What each event says, for the evidence.
LOG_EVENTS = {
    "deadlock": "deadlock(s) detected by the server (each after deadlock_timeout of waiting)",
    "lock_timeout": "statement(s) cancelled on lock_timeout",
    "connection_terminated": "session(s) terminated by an administrator command",
    "out_of_memory": "out-of-memory error(s) in the server log",
    "write_error": "\"could not write\" error(s) in the server log",
}
# A deadlock is found deadlock_timeout (default 1 s) after its transactions began to wait.
EVENT_LEAD_S = 1.0

# The signals of every run, whatever its engine: the client's and the host's (listed after the engine's).
NEUTRAL = ("client_stall", "clients_aborted", "disk")
HOST = ("cpu_contention", "database_cpu_bound", "io_pressure")

# Series the neutral signals read (raw, as stored), for fetching from Prometheus and saving with a run;
# each engine's are its Engine.explain_selectors.
NEUTRAL_SELECTORS = (
    "node_disk_io_time_seconds_total", "node_disk_read_time_seconds_total", "node_disk_write_time_seconds_total",
    "node_disk_reads_completed_total", "node_disk_writes_completed_total", "node_disk_written_bytes_total",
    "node_pressure_cpu_waiting_seconds_total", "node_pressure_io_waiting_seconds_total",
    "benchmark_host_cpu_seconds_total", "benchmark_host_top_process_cpu_ratio", "benchmark_host_cpus",
)


def selectors() -> list[str]:
    """Series every signal reads: the neutral ones' and every engine's (the run's engine is not known
    before its meta.json is read, and the fetch is one query either way)."""
    out = list(NEUTRAL_SELECTORS)
    for engine in engines.load_engines().values():
        out += [s for s in engine.explain_selectors if s not in out]
    return out


def run_selectors(run_id: str) -> list[str]:
    """Everything explaining a run reads: its own benchmark_* series and the signals."""
    return [loadgens.run_selector(run_id), *selectors()]


@dataclass
class Candidate:
    cause: str
    score: float
    overlap: float
    strength: float
    evidence: str
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"cause": self.cause, "score": round(self.score, 3), "overlap": round(self.overlap, 3),
                "strength": round(self.strength, 3), "evidence": self.evidence, "details": self.details}


Timeline = list[tuple[float, float]]  # (Unix seconds, value), time order


def _clean(s: Series) -> Timeline:
    return [(ts / 1000, v) for ts, v in s.samples if not is_stale_marker(v) and v == v]


def _named(series: list[Series], name: str) -> list[Series]:
    return [s for s in prefer_pushed(series) if s.name == name]


def rates(s: Series) -> Timeline:
    """Per-second rate between consecutive samples of a counter (a reset restarts it), at the later sample."""
    out: Timeline = []
    pts = _clean(s)
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if t1 > t0:
            out.append((t1, (v1 - v0 if v1 >= v0 else v1) / (t1 - t0)))
    return out


def _sum_by_time(timelines: Iterable[Timeline]) -> Timeline:
    acc: dict[float, float] = {}
    for tl in timelines:
        for t, v in tl:
            key = round(t)  # scrapes of one job land within the same second
            acc[key] = acc.get(key, 0.0) + v
    return sorted(acc.items())


def _active_seconds(tl: Timeline, active, lo: float, hi: float, step: float = 1.0) -> float:
    """Seconds within [lo, hi] where the timeline is active; each sample stands for the second before it."""
    total = 0.0
    for t, v in tl:
        if active(v):
            a, b = max(lo, t - step), min(hi, t)
            total += max(0.0, b - a)
    return total


def _window_values(tl: Timeline, lo: float, hi: float) -> list[float]:
    return [v for t, v in tl if lo <= t <= hi + 1.0]


def lift(overlap: float, usual: float) -> float:
    """How much more the signal was on in the dip's window than usual (both shares of time, 0..1):
    1 for a state never seen elsewhere, 0 for one on at least as often outside the dip."""
    if usual >= 1.0:
        return 0.0
    return max(0.0, overlap - usual) / (1.0 - usual)


def chance(events: int, rest_s: float, width_s: float) -> float:
    """The chance that a window of ``width_s`` seconds holds at least one of events that happen
    ``events`` times in ``rest_s`` seconds elsewhere (as if at random: Poisson)."""
    if events <= 0 or rest_s <= 0:
        return 0.0
    return 1.0 - math.exp(-events / rest_s * width_s)


@dataclass
class Context:
    """What the signals need to know about the run."""
    run_id: str
    interval_s: float
    run_start: float
    run_end: float
    clients: int | None = None
    # The run's tool holds progress lines back while its first thread's clients are all blocked (pgbench
    # before 10): a silence is then weaker evidence that the client itself stalled.
    progress_held_back: bool = False
    # The signals weighed for this run (None: every one) and the series saying whether its server's
    # exporter reaches it (target_down; none: the signal reads nothing).
    weighed: frozenset[str] | None = None
    up_metrics: tuple[str, ...] = ()
    # The series the run's engine's signals read (its Engine.explain_selectors; None: engine not known,
    # every engine's): a signal two engines share (lock) reads only the run's engine's series.
    engine_series: frozenset[str] | None = None


class Signals:
    """Every signal of a run, computed once from its series; ``candidates(dip)`` scores them for a dip."""

    def __init__(self, series: list[Series], ctx: Context):
        self.ctx = ctx
        in_run = (ctx.run_start - 60, ctx.run_end + 5)
        series = [s for s in series if s.samples and s.samples[-1][0] / 1000 >= in_run[0]]
        self.checkpoints = self._checkpoints(series)
        self.locks = self._waits(series)
        # (statement, wait_event, blocker, blocker_pid) -> sessions waiting in it (postgres_exporter's lock-waits query)
        self.waiting_statements = {(s.labels.get("statement", "?"), s.labels.get("wait_event", "?"),
                                    s.labels.get("blocker", ""), s.labels.get("blocker_pid", "")): _clean(s)
                                   for s in _named(series, "pg_stat_activity_lock_waits_sessions")
                                   if self.ctx.engine_series is None
                                   or "pg_stat_activity_lock_waits_sessions" in self.ctx.engine_series}
        self.statements, self.in_flight = self._statements(series)
        # Autovacuum: the server log's runs (table, kind, exact span), and postgres_exporter's worker count
        # where no logged run accounts for it (a run stored before, a log not followed, a run still going).
        self.autovacuum_runs = self._autovacuum_runs(series)
        self.autovacuum = _uncovered(_sum_by_time(_clean(s) for s in _named(series, "pg_autovacuum_workers")),
                                     [(r["start"], r["end"]) for r in self.autovacuum_runs])
        self.fpi = _sum_by_time(rates(s) for s in _named(series, "pg_stat_wal_wal_fpi"))
        self.disks = self._disks(series)
        # (target, the up series) -> its samples
        self.down = {((s.labels.get("target") or s.labels.get("instance") or up), up): _clean(s)
                     for up in ctx.up_metrics for s in _named(series, up)}
        self.gaps = self._line_gaps(series)
        self.aborts = self._aborts(series)
        self.innodb = {(s.labels.get("target") or s.labels.get("instance") or "mysql"): _clean(s)
                       for s in _named(series, "instance:mysql_innodb_flushing_pressure:bool")}
        # Per host: pressure stall information (share of each second some task waited) and the
        # processes collector's CPU by group (CPUs used), its busiest other processes and CPU count.
        self.cpu_pressure = self._by_host(series, "node_pressure_cpu_waiting_seconds_total")
        self.io_pressure = self._by_host(series, "node_pressure_io_waiting_seconds_total")
        self.cpu_groups: dict[str, dict[str, Timeline]] = {}
        for s in _named(series, "benchmark_host_cpu_seconds_total"):
            self.cpu_groups.setdefault(_host(s), {})[s.labels.get("group", "?")] = rates(s)
        self.top_processes: dict[str, list[tuple[float, str, str, float]]] = {}
        for s in _named(series, "benchmark_host_top_process_cpu_ratio"):
            name = f"{s.labels.get('comm', '?')} (pid {s.labels.get('pid', '?')})"
            group = s.labels.get("group", "other")
            self.top_processes.setdefault(_host(s), []).extend((t, name, group, v) for t, v in _clean(s))
        self.cpus = {_host(s): v for s in _named(series, "benchmark_host_cpus") for _, v in _clean(s)[-1:]}
        # event -> the times the server logged one (each rise of its counter, one time per record)
        self.log_events: dict[str, list[float]] = {}
        for s in _named(series, "pg_server_log_events_total"):
            prev = None
            for t, v in _clean(s):
                if prev is None or v > prev:
                    n = int(v - (prev or 0)) if prev is not None else 1
                    self.log_events.setdefault(s.labels.get("event", "?"), []).extend([t] * max(1, n))
                prev = v

    @staticmethod
    def _by_host(series: list[Series], name: str) -> dict[str, Timeline]:
        return {_host(s): rates(s) for s in _named(series, name)}

    # -- signals ------------------------------------------------------------------------------

    def _checkpoints(self, series: list[Series]) -> list[dict]:
        info = [(s.labels, boolean_regions(s)) for s in _named(series, "pg_checkpoint_info")]
        out = []
        for s in _named(series, "pg_checkpoint_in_progress"):
            for a, b in boolean_regions(s):
                row = {"start": a / 1000, "end": b / 1000, "reason": s.labels.get("reason", "unknown"),
                       "kind": s.labels.get("kind", "checkpoint")}
                for labels, regions in info:
                    if labels.get("reason") == row["reason"] and any(abs(ia - a) <= 1500 for ia, _ in regions):
                        row.update({k: labels[k] for k in ("buffers", "write_seconds", "sync_seconds", "total_seconds")
                                    if k in labels})
                        break
                out.append(row)
        return sorted(out, key=lambda r: r["start"])

    def _autovacuum_runs(self, series: list[Series]) -> list[dict]:
        """Each logged autovacuum/autoanalyze run: its span, table and kind, and what a vacuum removed
        (the pg_autovacuum_last_* samples at its end)."""
        removed: dict[tuple, dict[str, float]] = {}
        for name, key in (("pg_autovacuum_last_tuples_removed", "tuples_removed"),
                          ("pg_autovacuum_last_pages_removed", "pages_removed")):
            for s in _named(series, name):
                for t, v in _clean(s):
                    where = (s.labels.get("database", ""), s.labels.get("table", "?"), round(t * 1000))
                    removed.setdefault(where, {})[key] = v
        out = []
        for s in _named(series, "pg_autovacuum_in_progress"):
            database, table, kind = s.labels.get("database", ""), s.labels.get("table", "?"), s.labels.get("kind", "vacuum")
            for a, b in boolean_regions(s):
                row: dict[str, Any] = {"start": a / 1000, "end": b / 1000, "database": database, "table": table, "kind": kind}
                if kind == "vacuum":
                    row.update(removed.get((database, table, b), {}))
                out.append(row)
        return sorted(out, key=lambda r: r["start"])

    def _statements(self, series: list[Series]) -> tuple[dict[tuple[str, str], dict], dict[tuple[str, str], list]]:
        """The statements collector's series, by (target, queryid): {"text", "intervals": [(t0, t1, calls, seconds)]}
        (what finished between two samples: pg_stat_statements' counters), and the in-flight samples
        [(t, wait_event_type, wait_event, sessions)]."""
        own = self.ctx.engine_series

        def of(name: str) -> list[Series]:
            return _named(series, name) if own is None or name in own else []
        counters: dict[tuple[str, str], dict] = {}
        for name, what in (("pg_statement_calls_total", "calls"), ("pg_statement_exec_seconds_total", "seconds")):
            for s in of(name):
                key = (_host(s), s.labels.get("queryid", "?"))
                entry = counters.setdefault(key, {"text": s.labels.get("statement", "?")})
                entry[what] = {round(t, 3): v for t, v in _clean(s)}
        out = {}
        for key, entry in counters.items():
            calls, secs = entry.get("calls", {}), entry.get("seconds", {})
            times = sorted(set(calls) & set(secs))
            intervals = []
            for t0, t1 in zip(times, times[1:]):
                dc, ds = calls[t1] - calls[t0], secs[t1] - secs[t0]
                if dc < 0 or ds < 0:  # statistics reset: what was counted since
                    dc, ds = calls[t1], secs[t1]
                intervals.append((t0, t1, dc, ds))
            if intervals:
                out[key] = {"text": entry["text"], "intervals": intervals}
        flight: dict[tuple[str, str], list] = {}
        # (target, queryid) -> [(t, seconds the longest session had been in it)]
        self.longest_in_flight: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for s in of("pg_statement_active_seconds_max"):
            self.longest_in_flight.setdefault((_host(s), s.labels.get("queryid", "?")), []).extend(_clean(s))
        for s in of("pg_statement_active_sessions"):
            key = (_host(s), s.labels.get("queryid", "?"))
            rows = flight.setdefault(key, [])
            rows += [(t, s.labels.get("wait_event_type", "?"), s.labels.get("wait_event", "?"), v) for t, v in _clean(s)]
            counters.setdefault(key, {"text": s.labels.get("statement", "?")})
            if key not in out:
                out[key] = {"text": s.labels.get("statement", "?"), "intervals": []}
        return out, flight

    def _waits(self, series: list[Series]) -> dict[str, Timeline]:
        """Sessions waiting on heavyweight locks, per wait_event ("relation", "transactionid", "tuple", ...);
        on MySQL/MariaDB, InnoDB's row lock waits ("row lock") and the processlist's threads in a lock
        state ("waiting_for_table_metadata_lock", ...)."""
        out: dict[str, list[Timeline]] = {}

        def of(name: str) -> list[Series]:
            own = self.ctx.engine_series
            return _named(series, name) if own is None or name in own else []
        for s in of("pg_stat_activity_waits_sessions"):
            if s.labels.get("wait_event_type") == "Lock":
                out.setdefault(s.labels.get("wait_event", "?"), []).append(_clean(s))
        for s in of("mysql_global_status_innodb_row_lock_current_waits"):
            out.setdefault("row lock", []).append(_clean(s))
        for s in of("mysql_info_schema_processlist_threads"):
            state = s.labels.get("state", "")
            if "lock" in state and state.startswith("waiting"):
                out.setdefault(state, []).append(_clean(s))
        return {k: _sum_by_time(v) for k, v in out.items()}

    def _disks(self, series: list[Series]) -> dict[str, dict[str, Timeline]]:
        """Per device: util (share of the second busy, iostat %util / 100), await (seconds per I/O) and
        written (bytes per second: a fast or cached disk may absorb a write burst without queueing)."""
        by_dev: dict[str, dict[str, Series]] = {}
        for s in prefer_pushed(series):
            if s.name.startswith("node_disk_") and not NOT_DISKS.match(s.labels.get("device", "")):
                key = f"{s.labels.get('instance', '')}|{s.labels.get('device', '')}"
                by_dev.setdefault(key, {})[s.name] = s
        out = {}
        for key, m in by_dev.items():
            dev = key.split("|", 1)[1]
            util = rates(m["node_disk_io_time_seconds_total"]) if "node_disk_io_time_seconds_total" in m else []
            names = ("node_disk_read_time_seconds_total", "node_disk_write_time_seconds_total",
                     "node_disk_reads_completed_total", "node_disk_writes_completed_total")
            if all(n in m for n in names):
                rt, wt, rc, wc = (dict((round(t), v) for t, v in rates(m[n])) for n in names)
                # Only the seconds the disk was busy enough for its I/O to hold anyone up: a few writes of an
                # idle disk taking 1 ms instead of 0.1 is no cause (a point-select run beside busy loops).
                busy = {round(t): v for t, v in util}
                await_ = [(float(t), (rt[t] + wt.get(t, 0.0)) / (rc.get(t, 0.0) + wc.get(t, 0.0)))
                          for t in sorted(rt) if rc.get(t, 0.0) + wc.get(t, 0.0) > 0
                          and (not busy or busy.get(t, 0.0) >= AWAIT_MIN_UTIL)]
            else:
                await_ = []
            written = rates(m["node_disk_written_bytes_total"]) if "node_disk_written_bytes_total" in m else []
            if util or await_ or written:
                out[dev] = {"util": util, "await": await_, "written": written}
        return out

    def _line_gaps(self, series: list[Series]) -> list[tuple[float, float]]:
        """Stretches without a progress line from pgbench: gaps between its lines (the exporter's
        stall zeros, marked by benchmark_progress_stalled, are not lines)."""
        run = self.ctx.run_id
        tps = [s for s in _named(series, "benchmark_progress_tps") if s.labels.get("run_id") == run]
        stalled = {ts for s in _named(series, "benchmark_progress_stalled") if s.labels.get("run_id") == run
                   for ts, v in s.samples if v == 1}
        if not tps:
            return []
        lines = [ts / 1000 for ts, v in tps[0].samples if ts not in stalled and not is_stale_marker(v)]
        gap = STALL_FACTOR * self.ctx.interval_s
        out = [(a, b) for a, b in zip(lines, lines[1:]) if b - a > gap + 1e-3]
        if stalled and lines:  # still silent at the end (a run followed live)
            last_stall = max(stalled) / 1000
            if last_stall > lines[-1]:
                out.append((lines[-1], last_stall))
        return out

    def _aborts(self, series: list[Series]) -> list[tuple[float, float]]:
        """(time, clients aborted then) for each rise of benchmark_aborted_clients_total."""
        out = []
        for s in _named(series, "benchmark_aborted_clients_total"):
            if s.labels.get("run_id") != self.ctx.run_id:
                continue
            prev = 0.0
            for t, v in _clean(s):
                if v > prev:
                    out.append((t, v - prev))
                prev = v
        return out

    # -- scoring ------------------------------------------------------------------------------

    def candidates(self, start: float, end: float) -> list[Candidate]:
        lo, length = start - LEAD_S, max(end - start, self.ctx.interval_s)
        found: list[Candidate] = []

        def add(cause: str, active_s: float, strength: float, evidence: str, usual: float = 0.0, **details) -> None:
            """``usual``: the share of the rest of the run the signal was on (its base rate)."""
            if self.ctx.weighed is not None and cause not in self.ctx.weighed:
                return  # another engine's signal (a target of another engine in the same Prometheus)
            overlap = min(1.0, active_s / length)
            if usual > 0:
                details["usual"] = round(usual, 3)
                if usual >= 0.05:
                    evidence += f" (on {usual * 100:.0f}% of the rest of the run)"
            score = WEIGHTS[cause] * lift(overlap, usual) * strength
            if score > 0:
                found.append(Candidate(cause, score, overlap, strength, evidence, details))

        # pgbench printed nothing: the client itself was stopped (or, before pgbench 10,
        # all of thread 0's clients were blocked: its progress lines then come in a burst).
        silent = sum(max(0.0, min(end, b) - max(lo, a)) for a, b in self.gaps)
        if silent > 0:
            old = self.ctx.progress_held_back
            longest = max(b - a for a, b in self.gaps if b >= lo and a <= end)
            add("client_stall", silent, 0.5 if old else 1.0,
                f"no progress line from pgbench for {longest:.1f} s", usual=self._usual_spans(self.gaps, lo, end),
                silent_seconds=round(silent, 3))

        aborted = [(t, n) for t, n in self.aborts if lo <= t <= end + self.ctx.interval_s]
        if aborted:
            n = sum(k for _, k in aborted)
            clients = self.ctx.clients or n
            add("clients_aborted", end - max(lo, aborted[0][0]) + self.ctx.interval_s, min(1.0, n / max(clients, 1)),
                f"{n:.0f} of {clients} clients aborted", aborted=n)

        for (target, up_series), tl in self.down.items():
            down = _active_seconds(tl, lambda v: v == 0, lo, end)
            if down:
                add("target_down", down, 1.0, f"target {target} down ({up_series} 0) for {down:.0f} s",
                    usual=self._usual(tl, lambda v: v == 0, lo, end), target=target)

        slowed = self._slowed_statements(lo, end)
        if self.locks:
            # Sessions waiting on average, in the dip against the whole run (seconds without a
            # row count as 0), per client: a lock that holds every client scores near 1, the
            # odd row-lock wait of tpcb-like's updates near 0.
            total = _sum_by_time(self.locks.values())
            outside = max(1.0, self.ctx.run_end - self.ctx.run_start - (end - lo))
            usual = max(0.0, sum(_window_values(total, self.ctx.run_start, self.ctx.run_end))
                        - sum(_window_values(total, lo, end))) / outside
            waiting = sum(_window_values(total, start, end)) / max(1.0, end - start)
            peak = max(_window_values(total, lo, end) or [0.0])
            clients = self.ctx.clients or max(1.0, peak)
            if waiting > usual and peak >= 1:
                events = sorted(((max(_window_values(tl, lo, end) or [0.0]), ev) for ev, tl in self.locks.items()),
                                reverse=True)
                top = ", ".join(f"{ev} {n:.0f}" for n, ev in events if n > 0)
                text = (f"up to {peak:.0f} sessions waiting on locks ({top}), {waiting:.1f} on average in the dip, "
                        f"{usual:.2f} over the run")
                stmt = self._waiting_statement(lo, end)
                extra: dict[str, Any] = {"statement": stmt} if stmt else {}
                # The statement collector's view of the waiter: the statement its sessions waited in on a
                # heavyweight lock (in flight), else the one the lock-waits query names; its time per call.
                waiter = self._lock_waiter(slowed, lo, end, stmt)
                if stmt:
                    text += f"; {stmt['statement']} waited on Lock:{stmt['wait_event']}"
                    if stmt["blocker"]:
                        state, _, query = stmt["blocker"].partition(": ")
                        pid = f" (pid {stmt['blocker_pid']})" if stmt.get("blocker_pid") else ""
                        text += f", blocked by a session {state}{pid}" + (f": {query}" if query else "")
                elif waiter and waiter.get("lock_event"):
                    text += f"; {waiter['text']} waited on Lock:{waiter['lock_event']}"
                if waiter and waiter.get("usual_s") is not None:
                    if waiter.get("dip_s") is not None:
                        text = text.rstrip(";") + f"; {_per_call(waiter['usual_s'])} → {_per_call(waiter['dip_s'])} per call"
                    else:
                        text = text.rstrip(";") + f"; {_per_call(waiter['usual_s'])} per call before"
                    # A wait for a table lock comes while the statement is parsed, before its execution: not
                    # in pg_stat_statements' time. How long its sessions had been at it shows the wait.
                    longest = waiter.get("longest_s") or 0.0
                    if longest >= IN_FLIGHT_SHOWN_S:
                        text += f", in flight up to {longest:.1f} s"
                        if longest > 10 * (waiter.get("dip_s") or 0.0):
                            text += " (a wait for a table lock comes before execution, outside pg_stat_statements' time)"
                    extra["waiting_statement"] = {"statement": waiter["text"], "queryid": waiter["queryid"],
                                                  **_ms_details(waiter), "longest_in_flight_s": waiter.get("longest_s")}
                add("lock", _active_seconds(total, lambda v: v >= 1, lo, end),
                    min(1.0, (waiting - usual) / max(clients, 1)), text, peak_sessions=peak,
                    mean_sessions=round(waiting, 3), run_mean_sessions=round(usual, 3), **extra)

        # The disk: the device whose measures (%util, await, writes) rose most, active whenever
        # any of them was up; it goes first, since it also qualifies WAL-requested checkpoints.
        best_disk = None
        for dev, tls in self.disks.items():
            measures = {what: got for what, tl in tls.items()
                        if (got := _deviation(tl, self.ctx.run_start, self.ctx.run_end, lo, end, floor=DISK_FLOORS[what]))}
            if not measures:
                continue
            what = max(measures, key=lambda w: measures[w][1])
            up: set[int] = set()
            for w in measures:
                threshold = measures[w][4]
                up |= {round(t) for t, v in tls[w] if v >= threshold and lo < t <= end + 1}
            active_s = float(len(up))
            _, strength, peak, base, _ = measures[what]
            if best_disk is None or active_s * strength > best_disk[0] * best_disk[1]:
                best_disk = (active_s, strength, peak, base, dev, what, up)
        disk_busy: set[int] = set()  # the seconds the disk was up (each sample stands for the second before it)
        if best_disk:
            active_s, strength, peak, base, dev, what, disk_busy = best_disk
            shown = {"util": f"%util {peak * 100:.0f}% ({base * 100:.0f}% usually)",
                     "await": f"await {peak * 1000:.1f} ms ({base * 1000:.1f} ms usually)",
                     "written": f"writes {peak / 2**20:.0f} MiB/s ({base / 2**20:.1f} MiB/s usually)"}[what]
            add("disk", active_s, strength, f"disk {dev}: {shown}", device=dev, measure=what,
                peak=round(peak, 4), baseline=round(base, 4))
        write_surge = best_disk is not None

        before = len(found)
        # A checkpoint starting or ending in the window is telling only if that is rare: with
        # checkpoints every 10 s one starts or ends in almost any window. The chance of one (of
        # the same kind) in a window this long, from how often they start or end in the rest of the run.
        rest = self._rest(lo, end)
        edges = {True: 0, False: 0}
        for c in self.checkpoints:
            if c["start"] <= end and c["end"] + AFTERMATH_S >= lo:
                continue  # one of this window's own: its other edge is not "elsewhere"
            edges[_forced(c)] += sum(1 for t in (c["start"], c["end"])
                                     if self.ctx.run_start <= t <= self.ctx.run_end and not lo <= t <= end)
        under_way = self._usual_spans([(c["start"], c["end"] + AFTERMATH_S) for c in self.checkpoints], lo, end)
        for c in self.checkpoints:
            # A progress line stands for the interval that ends at it, and the dip starts where its first low
            # line's interval starts: when in that interval TPS fell is not known. A checkpoint that started
            # within it holds the dip from its start (it is not 0.2 s late for a fall it may have caused).
            began = start if start <= c["start"] < start + self.ctx.interval_s else c["start"]
            a, b = max(lo, began), min(end, c["end"] + AFTERMATH_S)
            if b <= a:
                continue
            forced = _forced(c)
            edge = lo <= c["start"] <= end or lo <= c["end"] <= end
            # Merely under way (a spread checkpoint writes slowly for minutes): below MIN_SCORE alone.
            strength = 1.0 if forced else 0.5 if edge else 0.15
            odds = chance(edges[forced], rest, end - lo) if edge else 0.0
            strength *= 1.0 - odds
            if c["reason"].startswith(("wal", "xlog")) and write_surge:
                strength = min(strength, 0.25)  # requested by the WAL of that surge: its consequence
            figures = ", ".join(f"{k.replace('_seconds', '')} {c[k]} s" for k in ("write_seconds", "sync_seconds") if k in c)
            lag = c["start"] - start
            text = (f"checkpoint ({c['reason']}) started {abs(lag):.1f} s {'before' if lag < 0 else 'after'} the dip began, "
                    f"lasting {c['end'] - c['start']:.1f} s")
            if "buffers" in c:
                text += f", {c['buffers']} buffers written"
            if figures:
                text += f" ({figures})"
            if odds >= 0.05:
                text += f"; one starts or ends in {odds * 100:.0f}% of windows this long elsewhere in the run"
            add("checkpoint", b - a, strength, text, usual=0.0 if edge else under_way, chance=round(odds, 3),
                reason=c["reason"], start=c["start"], end=c["end"],
                **{k: c[k] for k in ("buffers", "write_seconds", "sync_seconds") if k in c})

        ckpts = sorted(found[before:], key=lambda c: -c.score)
        if len(ckpts) > 1:  # several checkpoints in one dip (a WAL storm): one candidate, the strongest
            ckpts[0].evidence += f" (and {len(ckpts) - 1} more checkpoint(s) in the dip)"
            ckpts[0].details["checkpoints"] = len(ckpts)
            del found[before:]
            found.append(ckpts[0])

        checkpoint = next((c for c in found[before:] if c.cause == "checkpoint"), None)

        self._autovacuum(add, lo, end, length)

        if self.fpi and any(lo - 10 <= c["start"] <= end for c in self.checkpoints):
            self._baseline_signal(add, "wal_fpi", self.fpi, lo, end, lambda peak, base:
                                  f"full-page images {peak:.0f}/s after a checkpoint, {base:.0f}/s usually")

        # InnoDB's flushing pressure is its checkpoint: dirty pages at their limit, or the redo log
        # close to full, make InnoDB flush harder and commits wait (docs/innodb.md).
        for target, tl in self.innodb.items():
            pressed = _active_seconds(tl, lambda v: v >= 1, lo, end)
            if pressed:
                add("innodb_flushing", pressed, 1.0,
                    f"InnoDB flushing pressure on {target} for {pressed:.0f} s (dirty pages at their flush point "
                    "or checkpoint age past 7/8 of its maximum)", usual=self._usual(tl, lambda v: v >= 1, lo, end),
                    target=target)

        best_statement = max((st for st in slowed if st.get("score")), key=lambda st: st["score"], default=None)
        if best_statement:
            st = best_statement
            text = (f"{st['text']}: {_per_call(st['usual_s'])} → {_per_call(st['dip_s'])} per call "
                    f"({st['calls']:.0f} calls finished in the dip and the sample after, {st['share'] * 100:.0f}% of "
                    "the top statements' time)")
            if st.get("in_flight"):
                text += "; in flight: " + st["in_flight"]
                if (st.get("longest_s") or 0.0) >= IN_FLIGHT_SHOWN_S:
                    text += f", one for up to {st['longest_s']:.1f} s"
            if st["others_rise"] is not None:
                text += f"; the other statements {st['others_rise']:.1f}× their usual"
            add("statement", st["active_s"], st["strength"], text, usual=st["usual_share"],
                statement=st["text"], queryid=st["queryid"], share=round(st["share"], 3), calls=st["calls"],
                others_rise=st["others_rise"], **_ms_details(st))
        self._host_signals(add, lo, start, end)
        logged = self._log_events(add, lo, end)
        if "deadlock" in logged:
            # The lock waits of a deadlock are its own: the deadlock is the more specific answer.
            for waited in found:
                if waited.cause == "lock":
                    waited.score *= 0.5
                    waited.evidence += " (waits of the deadlocks)"

        lock = next((c for c in found if c.cause == "lock"), None)
        for cand in found:
            if cand.cause == "statement" and lock is not None and self._waited_on_lock(cand.details, lock, lo, end):
                # A statement slowed by the lock it waited on: the lock (with its blocker) is the answer,
                # and its evidence names this statement's time per call.
                cand.score *= 0.5
                cand.evidence += " (it waited on a lock)"

        # The server spending its CPUs is how a heavier statement, an autovacuum or a checkpoint shows on
        # the host: beside one of the causes that say why (any but the host's and the disk's, which are
        # symptoms too) strong enough to be named, it ranks below it whatever its own score.
        why = max((c.score for c in found if c.cause not in HOST and c.cause != "disk" and c.score >= MIN_SCORE),
                  default=0.0)
        for symptom in found:
            if symptom.cause == "database_cpu_bound" and why and symptom.score >= why:
                symptom.score = 0.9 * why
                symptom.details["ranked_below"] = next(o.cause for o in found if o.score == why)

        # A disk busy while an immediate checkpoint wrote is the checkpoint's doing: it writes as fast as the disk
        # takes (then fsyncs it all), and the commits' WAL flushes queue behind it. The checkpoint says why, the
        # disk only how, so the disk ranks below it. Not so for a spread checkpoint, which paces its writes over
        # minutes (a disk busy then is busy with something else: a VACUUM FULL), nor a WAL-requested one, which a
        # write surge causes (see above).
        disk = next((c for c in found if c.cause == "disk"), None)
        if disk is not None and checkpoint is not None and checkpoint.score >= MIN_SCORE and disk.score >= checkpoint.score \
                and _forced({"reason": checkpoint.details.get("reason", "")}) \
                and _mostly_within(disk_busy, checkpoint.details["start"], checkpoint.details["end"] + 1.0):
            disk.score = 0.9 * checkpoint.score
            disk.details["ranked_below"] = "checkpoint"
            disk.evidence += " (while the checkpoint wrote)"

        found.sort(key=lambda c: -c.score)
        return [c for c in found if c.score >= MIN_SCORE / 2]

    def _autovacuum(self, add, lo: float, end: float, length: float) -> None:
        """The logged run that overlaps the window most beyond its table's usual (the share of the rest of
        the run that table had a run of that kind under way: pgbench_branches vacuumed every minute for
        10 ms explains nothing, a 20 s vacuum of pgbench_accounts once does); else the workers no
        logged run accounts for."""
        best: tuple[float, dict, float, float] | None = None
        near = [r for r in self.autovacuum_runs if r["start"] <= end and r["end"] >= lo]
        for r in near:
            active = min(end, r["end"]) - max(lo, r["start"])
            same = [(x["start"], x["end"]) for x in self.autovacuum_runs
                    if (x["database"], x["table"], x["kind"]) == (r["database"], r["table"], r["kind"])]
            usual = self._usual_spans(same, lo, end)
            rank = lift(min(1.0, active / length), usual)
            if best is None or rank > best[0]:
                best = (rank, r, active, usual)
        if best is not None and best[0] > 0:
            _, r, active, usual = best
            lag = r["start"] - (lo + LEAD_S)
            text = (f"{r['kind']} of {r['table']} (database {r['database']}) ran {r['end'] - r['start']:.1f} s, "
                    f"from {abs(lag):.1f} s {'before' if lag < 0 else 'after'} the dip began (server log)")
            figures = {k: r[k] for k in ("tuples_removed", "pages_removed") if k in r}
            if "tuples_removed" in figures:
                text += f"; it removed {figures['tuples_removed']:.0f} dead tuples"
            if len(near) > 1:
                text += f" (and {len(near) - 1} more autovacuum run(s) in the window)"
            add("autovacuum", active, 0.5, text, usual=usual, source="server_log", table=r["table"],
                database=r["database"], kind=r["kind"], seconds=round(r["end"] - r["start"], 3),
                start=r["start"], end=r["end"], **figures)
            return
        if self.autovacuum:
            peak = max(_window_values(self.autovacuum, lo, end) or [0.0])
            if peak > 0:
                add("autovacuum", _active_seconds(self.autovacuum, lambda v: v > 0, lo, end), 0.5,
                    f"{peak:.0f} autovacuum worker(s) active",
                    usual=self._usual(self.autovacuum, lambda v: v > 0, lo, end), source="workers", workers=peak)

    def _host_signals(self, add, lo: float, start: float, end: float) -> None:
        """cpu_contention: processes other than the database and the load generator took CPU time
        (the processes collector), while tasks waited for a CPU (pressure stall information, when
        there); database_cpu_bound: the database's own processes used more of the full CPUs than
        usual, the others not; io_pressure: tasks stalled on I/O far more than usual. The strongest
        host of each."""
        r0, r1 = self.ctx.run_start, self.ctx.run_end
        best: tuple | None = None
        contended: set[str] = set()  # hosts whose other processes rose: theirs is the answer there
        for host, groups in self.cpu_groups.items():
            cpus = self.cpus.get(host) or 1.0
            # Every process but the database's and the load generator's; and those started lately alone:
            # on a machine already short of CPU a newcomer takes its share from everyone, the others
            # too, so their total hardly moves while the newcomers' does.
            measures = {"all": _sum_by_time([groups.get("other") or [], groups.get("new") or []]),
                        "new": groups.get("new") or []}
            for which, tl in measures.items():
                got = _rise(tl, r0, r1, lo, end, OTHER_CPU_FLOOR)
                if not got:
                    continue
                active_s, used, base = got
                contended.add(host)
                strength = min(1.0, (used - base) / (0.5 * cpus))
                if best is None or active_s * strength > best[0] * best[1]:
                    best = (active_s, strength, host, which, used, base, cpus)
        if best:
            active_s, strength, host, which, used, base, cpus = best
            who = "processes started lately" if which == "new" else "other processes"
            text = f"{who} used {used:.1f} of {cpus:.0f} CPUs ({base:.1f} usually)"
            groups = self.cpu_groups[host]
            ours = _sum_by_time([groups.get("database") or [], groups.get("load_generator") or []])
            ours_usual = statistics.median(_window_values(ours, r0, r1) or [0.0])
            # Over the dip itself: a scan every 2-3 s on a loaded machine, the one just inside the window
            # stands mostly for the seconds before the dip, when they still got their usual CPU.
            got_now = _mean_over(ours, start, end)
            if got_now is not None:
                text += f"; the database and the load generator got {got_now:.1f} CPUs ({ours_usual:.1f} usually)"
                if got_now >= SQUEEZED * ours_usual:
                    strength *= 0.5  # they got what they usually get: the others did not take it from them
            top = self._busiest(host, lo, end + 2.0, first=which)
            if top:
                text += "; busiest: " + ", ".join(f"{name} {r:.2f}" for name, r in top)
            waited = self._cpu_waited(host, lo, end)
            if waited is not None:
                text += f"; tasks waited for a CPU {waited * 100:.0f}% of the time"
                if waited < PRESSURE_FLOOR:
                    strength *= 0.5  # the CPUs had room for both: the others took what was idle
            add("cpu_contention", active_s, strength, text, host=host, measure=which, other_cpus=round(used, 3),
                other_cpus_usually=round(base, 3), busiest=[{"process": n, "cpus": round(r, 3)} for n, r in top])

        # The database itself spent the CPUs: its processes used more of them than over the rest of the
        # run (one that is CPU-bound all run long explains no particular dip), at least half of the host's,
        # while the CPUs were full (tasks waited for one; without PSI, every process together used nearly
        # all of them) and the others did not rise (that is cpu_contention: busy loops beside the run
        # take the database's CPU, so its own falls).
        bound: tuple | None = None
        for host, groups in self.cpu_groups.items():
            db = groups.get("database") or []
            cpus = self.cpus.get(host) or 1.0
            if host in contended or not db:
                continue
            got = _rise(db, r0, r1, lo, end, DATABASE_CPU_FLOOR, at_least=DATABASE_CPU_SHARE * cpus)
            if not got:
                continue
            waited = self._cpu_waited(host, lo, end)
            if waited is None:
                everyone = _mean_over(_sum_by_time(groups.values()), start, end)
                if everyone is None or everyone < FULL * cpus:
                    continue
            elif waited < PRESSURE_FLOOR:
                continue  # no task waited for a CPU: it used CPU that was idle, the CPU did not hold it back
            active_s, used, base = got
            strength = min(1.0, (used - base) / (0.5 * cpus))
            if bound is None or active_s * strength > bound[0] * bound[1]:
                bound = (active_s, strength, host, used, base, cpus, db, waited)
        if bound:
            active_s, strength, host, used, base, cpus, db, waited = bound
            text = f"the database's processes used {used:.1f} of {cpus:.0f} CPUs ({base:.1f} usually)"
            text += (f"; tasks waited for a CPU {waited * 100:.0f}% of the time" if waited is not None
                     else f"; every process together used nearly all {cpus:.0f}")
            threshold = max(base + DATABASE_CPU_FLOOR, DATABASE_CPU_SHARE * cpus)
            add("database_cpu_bound", active_s, strength, text, host=host,
                usual=self._usual(db, lambda v: v >= threshold, lo, end, step=_spacing(db)),
                database_cpus=round(used, 3), database_cpus_usually=round(base, 3), cpus=cpus)

        io_best: tuple | None = None
        for host, tl in self.io_pressure.items():
            io = _deviation(tl, r0, r1, lo, end, floor=IO_PRESSURE_FLOOR)
            if io and (io_best is None or io[0] * io[1] > io_best[1][0] * io_best[1][1]):
                io_best = (host, io)
        if io_best:
            host, (active_s, strength, peak, base, _) = io_best
            add("io_pressure", active_s, strength,
                f"tasks waited on I/O {peak * 100:.0f}% of the time ({base * 100:.0f}% usually)",
                host=host, peak=round(peak, 3), baseline=round(base, 3))

    def _cpu_waited(self, host: str, lo: float, end: float) -> float | None:
        """The highest share of a second some task waited for a CPU on the host in [lo, end] (PSI; the only
        host's when the processes collector and node_exporter name it apart), None without PSI."""
        psi = self.cpu_pressure.get(host) or (next(iter(self.cpu_pressure.values())) if len(self.cpu_pressure) == 1 else None)
        waited = _window_values(psi, lo, end) if psi else []
        return min(1.0, max(waited)) if waited else None

    def _log_events(self, add, lo: float, end: float) -> set[str]:
        """Each kind of server log event in the window (from EVENT_LEAD_S before the dip to one interval
        after it: a deadlock is logged when it is resolved), held against how often it comes in the rest
        of the run. Returns the kinds found."""
        found = set()
        hi = end + self.ctx.interval_s
        rest = self._rest(lo, end)
        length = max(end - lo, self.ctx.interval_s)
        for event, times in self.log_events.items():
            inside = [t for t in times if lo <= t <= hi]
            if not inside:
                continue
            found.add(event)
            elsewhere = sum(1 for t in times if self.ctx.run_start <= t <= self.ctx.run_end and not lo <= t <= hi)
            odds = chance(elsewhere, rest, length)
            text = f"{len(inside)} {LOG_EVENTS.get(event, event)}, the first {inside[0] - self.ctx.run_start:.1f} s into the run"
            if elsewhere:
                text += f"; {elsewhere} more elsewhere in the run"
            active = hi - max(lo, inside[0] - EVENT_LEAD_S)
            add(event, active, 1.0 - odds, text, events=len(inside), elsewhere=elsewhere, chance=round(odds, 3))
        return found

    def _busiest(self, host: str, lo: float, hi: float, first: str) -> list[tuple[str, float]]:
        """The processes that used most CPU in [lo, hi], with their mean CPUs over the scans there:
        new ones first when it is the newcomers' rise that is the evidence."""
        seen = [(t, name, g, v) for t, name, g, v in self.top_processes.get(host, []) if lo < t <= hi]
        scans = len({round(t) for t, *_ in seen}) or 1
        used: dict[str, float] = {}
        newcomer: set[str] = set()  # new in any scan: a process ages from new to other mid-window, one entry
        for _, name, g, v in seen:
            used[name] = used.get(name, 0.0) + v
            if g == first:
                newcomer.add(name)
        ahead = newcomer if first == "new" else set(used)
        return [(n, v / scans) for n, v in sorted(used.items(), key=lambda x: (x[0] not in ahead, -x[1]))[:BUSIEST]]

    def _slowed_statements(self, lo: float, end: float) -> list[dict]:
        """Each statement's time per call in the dip's window against the rest of the run. pg_stat_statements
        counts a call when it ends: the window is the samples from ``lo`` to one sample after ``end``.
        Those whose time per call rose STATEMENT_RISE times (and by STATEMENT_FLOOR_S) get a ``score``."""
        r0, r1 = self.ctx.run_start, self.ctx.run_end
        out = []
        spent_by_host: dict[str, float] = {}
        for (host, qid), entry in self.statements.items():
            ivs = [iv for iv in entry["intervals"] if iv[1] > r0 - 1 and iv[0] < r1 + 5]
            # The dip itself, not the lead before it: an interval that ends before TPS fell holds the usual calls.
            inside = [iv for iv in ivs if iv[1] > lo + LEAD_S and iv[0] < end]
            after = [iv for iv in ivs if iv[0] >= end][:1]
            window = inside + [iv for iv in after if iv not in inside]
            w_end = window[-1][1] if window else end
            rest = [iv for iv in ivs if iv[1] <= lo or iv[0] >= w_end]
            calls = sum(iv[2] for iv in inside)
            spent = sum(iv[3] for iv in inside)
            # The calls stuck in the dip end in the sample after it: counted when they raise the time per call
            # (not the quick calls after the dip's end, which would dilute it).
            if after and after[0] not in inside and after[0][2] > 0 and (
                    calls == 0 or after[0][3] / after[0][2] > spent / calls):
                calls, spent = calls + after[0][2], spent + after[0][3]
            spent_by_host[host] = spent_by_host.get(host, 0.0) + spent
            per = [iv[3] / iv[2] for iv in rest if iv[2] > 0]
            st: dict[str, Any] = {"host": host, "queryid": qid, "text": entry["text"], "calls": calls, "spent": spent,
                                  "window": window, "after": after[0] if after else None, "rest": rest,
                                  "usual_s": statistics.median(per) if len(per) >= 2 else None,
                                  "dip_s": spent / calls if calls > 0 else None}
            st["in_flight"], st["lock_event"], st["lock_share"] = self._in_flight(host, qid, lo, end)
            st["longest_s"] = max((v for t, v in self.longest_in_flight.get((host, qid), []) if lo <= t <= end + 1.0),
                                  default=None)
            out.append(st)
        for st in out:
            total = spent_by_host.get(st["host"]) or 0.0
            st["share"] = st["spent"] / total if total > 0 else 0.0
            usual, dip = st["usual_s"], st["dip_s"]
            if usual is None or dip is None:
                continue
            threshold = max(STATEMENT_RISE * usual, usual + STATEMENT_FLOOR_S)
            if dip < threshold:
                continue
            flight = self.in_flight.get((st["host"], st["queryid"]), [])

            def slow(iv: tuple[float, float, float, float]) -> bool:
                # Slow calls finished in it, or none finished while sessions were in it (stuck).
                return (iv[2] > 0 and iv[3] / iv[2] >= threshold) or (
                    iv[2] == 0 and any(iv[0] < t <= iv[1] and n > 0 for t, *_, n in flight))
            active_s = sum(max(0.0, min(iv[1], end) - max(iv[0], lo)) for iv in st["window"] if slow(iv))
            if st["after"] is not None and slow(st["after"]):
                active_s = max(active_s, self.ctx.interval_s)  # its slow calls were counted when they ended
            rest_s = sum(iv[1] - iv[0] for iv in st["rest"])
            rest_slow = sum(iv[1] - iv[0] for iv in st["rest"] if slow(iv))
            st["usual_share"] = rest_slow / rest_s if rest_s >= 2 * self.ctx.interval_s else 0.0
            st["active_s"] = active_s
            # One statement's own trouble, not everyone's: under a CPU hog or a busy disk every statement slows
            # alike, and the cause is elsewhere. Held against how much the other statements slowed (median).
            others = [o["dip_s"] / o["usual_s"] for o in out if o is not st and o["host"] == st["host"]
                      and o.get("usual_s") and o.get("dip_s") is not None]
            specific = max(0.0, 1.0 - (statistics.median(others) if others else 1.0) / (dip / usual))
            st["others_rise"] = round(statistics.median(others), 2) if others else None
            st["strength"] = (1.0 - usual / dip) * specific * min(1.0, st["share"] / STATEMENT_FULL_SHARE)
            length = max(end - (lo + LEAD_S), self.ctx.interval_s)
            st["score"] = WEIGHTS["statement"] * lift(min(1.0, active_s / length), st["usual_share"]) * st["strength"]
        return out

    def _in_flight(self, host: str, qid: str, lo: float, end: float) -> tuple[str, str | None, float]:
        """What the statement's sessions waited on in the window (share of the session samples, strongest first),
        the heavyweight lock they waited on most (None) and the share of their samples spent on such locks."""
        seen: dict[str, float] = {}
        locks: dict[str, float] = {}
        for t, wtype, wevent, n in self.in_flight.get((host, qid), []):
            if lo <= t <= end + 1.0 and n > 0:
                name = "CPU" if wtype == "CPU" else f"{wtype}:{wevent}"
                seen[name] = seen.get(name, 0.0) + n
                if wtype == "Lock":
                    locks[wevent] = locks.get(wevent, 0.0) + n
        total = sum(seen.values())
        if not total:
            return "", None, 0.0
        text = ", ".join(f"{name} {n / total * 100:.0f}%" for name, n in sorted(seen.items(), key=lambda x: -x[1])[:3])
        top_lock = max(locks, key=lambda k: locks[k]) if locks else None
        return f"sessions waited on {text}", top_lock, sum(locks.values()) / total

    def _lock_waiter(self, slowed: list[dict], lo: float, end: float, stmt: dict | None) -> dict | None:
        """The statement sessions waited in on a heavyweight lock in the window: from the in-flight samples
        (most session samples on a Lock), else the lock-waits query's statement matched by its text."""
        # Those with a usual time per call first: the same text may also stand for sessions the collector
        # could not give a queryid, or the statement under another queryid, without counters.
        def counted(st: dict | None) -> dict | None:
            """The entry of the same text that has counters (its time per call), with the waiter's in-flight view."""
            if st is None or st["usual_s"] is not None:
                return st
            key = sqltext.key(st["text"])
            other = next((o for o in slowed if o["usual_s"] is not None and key and sqltext.key(o["text"]) == key), None)
            if other is None:
                return st
            return {**other, **{k: st[k] for k in ("in_flight", "lock_event", "lock_share") if st.get(k)},
                    "longest_s": max(other.get("longest_s") or 0.0, st.get("longest_s") or 0.0) or None}

        waiting = [st for st in slowed if st.get("lock_event")]
        if waiting:
            return counted(max(waiting, key=lambda st: (st["usual_s"] is not None,
                                                        st["lock_share"] * (st["spent"] + 1e-9 + st["calls"]))))
        if stmt:
            key = sqltext.key(stmt["statement"])
            same = [st for st in slowed if key and sqltext.key(st["text"]) == key]
            return max(same, key=lambda st: st["usual_s"] is not None, default=None)
        return None

    def _waited_on_lock(self, details: dict, lock: Candidate, lo: float, end: float) -> bool:
        waiter = lock.details.get("waiting_statement") or {}
        if waiter.get("queryid") == details.get("queryid"):
            return True
        host_qid = [k for k in self.in_flight if k[1] == details.get("queryid")]
        return any(self._in_flight(h, q, lo, end)[2] >= 0.5 for h, q in host_qid)

    def _waiting_statement(self, lo: float, end: float) -> dict | None:
        """The statement most sessions waited in over the window, with its lock and its blocker."""
        best = None
        for (statement, event, blocker, pid), tl in self.waiting_statements.items():
            n = sum(_window_values(tl, lo, end))
            if n > 0 and (best is None or n > best[0]):
                best = (n, statement, event, blocker, pid)
        if best is None:
            return None
        out = {"statement": best[1], "wait_event": best[2], "blocker": best[3]}
        if best[4]:
            out["blocker_pid"] = best[4]
        return out

    # -- base rates: how often a signal is on over the rest of the run --------------------------

    def _rest(self, lo: float, end: float) -> float:
        """Seconds of the run outside the dip's window [lo, end]."""
        r0, r1 = self.ctx.run_start, self.ctx.run_end
        return max(0.0, (r1 - r0) - max(0.0, min(end, r1) - max(lo, r0)))

    def _usual(self, tl: Timeline, active, lo: float, end: float, step: float = 1.0) -> float:
        """The share of the rest of the run where the timeline is active (0 when the rest is too short to say);
        ``step``: the seconds each sample stands for."""
        rest = self._rest(lo, end)
        if rest < 2 * self.ctx.interval_s:
            return 0.0
        r0, r1 = self.ctx.run_start, self.ctx.run_end
        on = _active_seconds(tl, active, r0, r1, step) - _active_seconds(tl, active, max(lo, r0), min(end, r1), step)
        return min(1.0, max(0.0, on / rest))

    def _usual_spans(self, spans: Iterable[tuple[float, float]], lo: float, end: float) -> float:
        """The same for (start, end) stretches."""
        rest = self._rest(lo, end)
        if rest < 2 * self.ctx.interval_s:
            return 0.0
        r0, r1 = self.ctx.run_start, self.ctx.run_end
        on = 0.0
        for a, b in spans:
            a, b = max(a, r0), min(b, r1)
            if b > a:
                on += (b - a) - max(0.0, min(b, end) - max(a, lo))
        return min(1.0, max(0.0, on / rest))

    def _baseline_signal(self, add, cause: str, tl: Timeline, lo: float, end: float, text) -> None:
        got = _deviation(tl, self.ctx.run_start, self.ctx.run_end, lo, end, floor=1.0)
        if got:
            active_s, strength, peak, base, _ = got
            add(cause, active_s, strength, text(peak, base), peak=round(peak, 3), baseline=round(base, 3))


def _uncovered(tl: Timeline, spans: list[tuple[float, float]]) -> Timeline:
    """The timeline with 0 wherever spans cover most of the second a sample stands for (the second
    before it): a worker a logged run accounts for; a 10 ms run does not account for a whole second."""
    if not spans:
        return tl
    out: Timeline = []
    for t, v in tl:
        covered = sum(max(0.0, min(b, t) - max(a, t - 1.0)) for a, b in spans if a < t and b > t - 1.0)
        out.append((t, 0.0 if covered >= 0.5 else v))
    return out


def _per_call(seconds: float) -> str:
    """A time per call as people read it: 0.21 ms, 4.5 ms, 48 ms, 2,950 ms."""
    ms = seconds * 1000
    return f"{ms:.2f} ms" if ms < 1 else f"{ms:.1f} ms" if ms < 10 else f"{ms:,.0f} ms"


def _ms_details(st: dict) -> dict:
    return {"ms_per_call_before": None if st.get("usual_s") is None else round(st["usual_s"] * 1000, 4),
            "ms_per_call_in_dip": None if st.get("dip_s") is None else round(st["dip_s"] * 1000, 4)}


def _host(s: Series) -> str:
    return s.labels.get("host") or s.labels.get("target") or s.labels.get("instance") or ""


def _rise(tl: Timeline, run_start: float, run_end: float, lo: float, hi: float,
          floor: float, at_least: float = 0.0) -> tuple[float, float, float] | None:
    """(active seconds, mean while active, baseline) of a level (CPUs used) that rose by at least ``floor``
    above the run's median in [lo, hi], and to ``at_least``; unlike _deviation it need not double (a loaded
    machine's CPUs cannot)."""
    base = statistics.median(_window_values(tl, run_start, run_end) or [0.0])
    step = _spacing(tl)
    threshold = max(base + floor, at_least)
    up = [v for t, v in tl if lo < t <= hi + step and v >= threshold]
    if not up:
        return None
    return _active_seconds(tl, lambda v: v >= threshold, lo, hi + step, step), statistics.fmean(up), base


def _mean_over(tl: Timeline, a: float, b: float) -> float | None:
    """The time-weighted mean of a rate timeline over [a, b], each sample standing for the time since the
    one before it (the first for the usual spacing); None when no sample covers any of it."""
    step = _spacing(tl)
    total = weight = 0.0
    prev = None
    for t, v in tl:
        since = t - step if prev is None else prev
        prev = t
        covered = min(b, t) - max(a, since)
        if covered > 0:
            total += v * covered
            weight += covered
    return total / weight if weight > 0 else None


def _spacing(tl: Timeline) -> float:
    """The usual time between samples (the processes collector scans every 2 s; node_exporter every 1 s)."""
    gaps = [b[0] - a[0] for a, b in zip(tl, tl[1:]) if b[0] > a[0]]
    return statistics.median(gaps) if gaps else 1.0


def _mostly_within(seconds: set[int], a: float, b: float) -> bool:
    """Whether at least half of the seconds (each a sample's time, standing for the second before it) lie
    mostly within [a, b]."""
    inside = sum(1 for t in seconds if min(t, b) - max(t - 1.0, a) >= 0.5)
    return bool(seconds) and inside >= 0.5 * len(seconds)


def _forced(checkpoint: dict) -> bool:
    return any(w in checkpoint["reason"] for w in ("immediate", "force"))


def _deviation(tl: Timeline, run_start: float, run_end: float, lo: float, hi: float,
               floor: float) -> tuple[float, float, float, float, float] | None:
    """(active seconds, strength, peak, baseline, threshold) of a measure that rose well above the run's median:
    at least twice it and by more than ``floor``; strength 1 - baseline/peak."""
    base = statistics.median(_window_values(tl, run_start, run_end) or [0.0])
    peak = max(_window_values(tl, lo, hi) or [0.0])
    if peak < 2 * base or peak - base < floor:
        return None
    # Active wherever it is as far above the median as a candidate must peak: a burst
    # that stays high but below its first spike still counts.
    threshold = max(2 * base, base + floor)
    return _active_seconds(tl, lambda v: v >= threshold, lo, hi), 1 - base / peak, peak, base, threshold
