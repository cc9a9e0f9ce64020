"""Collector ``dips``: runs the dip detector on each live run and remote-writes what it finds.

Two small families (catalogue: DIP_METRICS), read by the run dashboard's
annotation and the PgbenchTPSDrop alert's text:

- ``benchmark_dip_leading_cause_info{run_id, cause, evidence}``: 1 every second
  while a dip is under way, labelled with its leading cause so far; ended by a
  staleness marker when the dip ends or the cause changes;
- ``benchmark_dip_info{run_id, dip, level, cause, evidence}``: 1 over a finished
  dip's span, written when it ends (like pg_checkpoint_info): the annotation.

The analysis reads the run and its evidence back from Prometheus (the same
code as ``benchwatch explain``) in a thread of its own, so a slow query never
delays the progress lines. It is not run every second: the collector sees the
TPS lines the exporter sends (``ExporterOptions.subscribe``) and keeps the
recent ones of each run; a pass is due only when a new line might be low
(:func:`possibly_low`, a superset of what the detector can flag), while a dip
is under way, every RECHECK_S as a safety net, and once when the run ends; the
detector runs on the lines in memory first, and the evidence is read when it
finds a dip, and while one lasts every ONGOING_EVERY_S and when it ends.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence

from benchwatch.collector import ORDER_DIPS, ExporterOptions, MetricsDoc, Sink, register_collector
from benchwatch.collector import Sample as SampleLike
from benchwatch.explain import dips as detector
from benchwatch.model.run import INTERVAL, TPS
from benchwatch.model.samples import STALE_NAN, Sample, sample
from benchwatch.query.series import fetch
from benchwatch.record import rundir
from benchwatch.util import processes

log = logging.getLogger("benchwatch.exporter")

DIP_METRICS: dict[str, tuple[str, str]] = {
    "benchmark_dip_leading_cause_info": ("gauge", "1 while a TPS dip of the run is under way, labelled with its leading cause and evidence so far (benchwatch explain)."),
    "benchmark_dip_info": ("gauge", "1 over a finished TPS dip's span, written when it ends, labelled with its number, level (deep, mild), cause and evidence."),
}

METRICS_DOC_SECTION = """
## TPS dips (benchwatch exporter, `dips` collector)

The dip detector of `benchwatch explain` ([explain.md](explain.md)) run on each live run, from what
Prometheus holds, when a new TPS line might be low, while a dip is under way, every 15 s and at the
run's end ([explain.md](explain.md#live-annotations-and-the-alert)); remote-written, never on /metrics. Both carry `run_id`, `cause`
(`lock`, `checkpoint`, `client_stall`, `disk`, ..., or `no cause found`) and `evidence` (a sentence);
`benchmark_dip_info` also `dip` (its number in the run) and `level` (`deep`: below 50% of the steady
level, `mild`: below 80%). At most 30 dips and 40 leading-cause label sets per run are written;
`benchwatch explain` lists every dip.

| metric | type | meaning |
| --- | --- | --- |
"""
EVERY_S = 1.0
# Past this many dips (and leading-cause label sets) a run's later ones are left to benchwatch
# explain: with its own series, a run stays well under 200.
MAX_DIPS = 30
MAX_LEADING = 40
# How far back the live analysis reads: the detector's window and the signals' baselines.
LOOKBACK_S = 120.0
# After a run ends, wait this long for its last samples to land before the final pass.
SETTLE_S = 2.0
# TPS lines kept per run: what a pass reads from Prometheus (LOOKBACK_S and 60 s before).
KEEP_S = LOOKBACK_S + 60.0
# With no line that might be low, the detector still looks at the lines in memory this often: a
# dip can show only once later lines raise the steady level around it (finished dips only).
RECHECK_S = 15.0
# runs_dir is listed when its mtime changes, and at least this often.
DISCOVER_S = 5.0
# A pass waits at most this long for the lines that called for it to reach Prometheus.
DELIVERY_WAIT_S = 3.0

LOW_KEEP_S = 60.0  # TPS lines LowLines keeps per run for possibly_low (its window is 30 s)

# What a pass does for a run: LOOK reads the TPS back and fetches the evidence only if it finds
# a dip to write (today's cheap look); MEMORY runs the detector on the lines in memory first;
# FULL fetches the evidence straight away (a dip under way, the run's end).
# DURING (a dip under way, its evidence read less than ONGOING_EVERY_S ago) runs the detector on the
# lines in memory and reads the evidence only when the dip has ended there.
LOOK, MEMORY, FULL, DURING = "look", "memory", "full", "during"
# While a dip is under way its evidence (every signal of the run, and the causes) is read again this
# often, and when it ends: its leading cause so far changes slowly, and a pass every second on a noisy
# run, whose lines dip often, was the exporter's largest cost (issue 32).
ONGOING_EVERY_S = 5.0


def possibly_low(points: Sequence[tuple[int, float]], i: int, interval_s: Sequence[float] = (1.0,)) -> bool:
    """Whether ``dips.detect(points[:i + 1], ongoing=True)`` can find line ``i`` low (an ongoing dip ends there).

    ``points``: (ms, tps), time order, no staleness markers. ``interval_s``: every progress
    interval the detector might be given (which lines cover a full interval depends on it).

    A superset, never a miss, against the detector's rolling level: at the newest line a median
    of the full lines within WINDOW_S / 2 before it (at most their maximum), or, with fewer than
    MIN_LINES of them, another line's level (at most the maximum of all lines); with fewer
    than MIN_LINES full lines in all it finds nothing. A line held against the level before a
    lasting fall (dips.Dip.lasting) is in a dip already under way, or (a slow slide) is found
    by the RECHECK_S pass on the lines in memory."""
    lo_iv, hi_iv = min(interval_s), max(interval_s)
    t = points[i][0] / 1000
    half = detector.WINDOW_S / 2
    window_max = 0.0
    full_in_window = 0  # counted at the longest interval: fewest lines full, a lower bound
    j = i
    while j >= 0 and not points[j][0] / 1000 < t - half:
        window_max = max(window_max, points[j][1])
        full_in_window += _full(points, j, hi_iv)
        j -= 1
    if full_in_window >= detector.MIN_LINES:
        level = window_max
    else:
        # Counted at the shortest interval: most lines full, so "too few" is sure.
        if sum(_full(points, k, lo_iv) for k in range(i + 1)) < detector.MIN_LINES:
            return False
        level = max(v for _, v in points[:i + 1])
    return points[i][1] < detector.MILD * level


def _full(points: Sequence[tuple[int, float]], j: int, interval_s: float) -> bool:
    covered = detector.covered_s(points[j - 1][0] if j else None, points[j][0], interval_s)
    return detector.is_full(covered, interval_s)


class LowLines:
    """The exporter's ``on_possibly_low`` (ExporterOptions): a subscriber to every batch sent that keeps
    each run's recent TPS lines and, when a batch holds a line :func:`possibly_low` finds low, calls
    back every collector that asked (the statements collector samples faster then)."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []
        self.lines: dict[str, list[tuple[int, float]]] = {}
        self.intervals: dict[str, float] = {}
        self.lock = threading.Lock()

    def observe(self, samples: Sequence[SampleLike]) -> None:
        low = False
        with self.lock:
            for s in samples:
                if s.name not in (TPS, INTERVAL) or s.value != s.value:
                    continue
                run_id = dict(s.labels).get("run_id")
                if not run_id:
                    continue
                if s.name == INTERVAL:
                    self.intervals[run_id] = s.value
                    continue
                points = self.lines.setdefault(run_id, [])
                if points and s.timestamp_ms <= points[-1][0]:
                    continue
                points.append((s.timestamp_ms, s.value))
                if points[0][0] < s.timestamp_ms - 2 * LOW_KEEP_S * 1000:
                    points[:] = [p for p in points if p[0] >= s.timestamp_ms - LOW_KEEP_S * 1000]
                low = low or possibly_low(points, len(points) - 1, (self.intervals.get(run_id) or 1.0,))
        if low:
            for callback in self.callbacks:
                callback()


class _Lines:
    """The recent TPS lines of one run as the exporter sent them; what Prometheus holds of it."""

    def __init__(self) -> None:
        self.points: list[tuple[int, float]] = []
        self.interval: float | None = None  # the last benchmark_progress_interval_seconds sent
        self.checked_ms = -1  # the newest line possibly_low has looked at

    def add(self, ts: int, v: float) -> None:
        if v != v:  # a staleness marker: not a line
            return
        if self.points and ts <= self.points[-1][0]:
            return  # Prometheus would keep only the first sample at a time, and none out of order
        self.points.append((ts, v))
        # A few seconds more than a pass reads (its window is rounded up), trimmed every 10 s.
        if self.points[0][0] < ts - (KEEP_S + 15) * 1000:
            cut = ts - (KEEP_S + 5) * 1000
            self.points = [p for p in self.points if p[0] >= cut]

    def seed(self, older: list[tuple[int, float]]) -> None:
        """Lines read back from Prometheus, for the time before this collector saw any (a restart)."""
        first = self.points[0][0] if self.points else None
        head = [(ts, v) for ts, v in older if v == v and (first is None or ts < first)]
        if head:
            self.points = head + self.points
            self.checked_ms = max(self.checked_ms, head[-1][0])


class _RunState:
    def __init__(self, run: rundir.RunDir, run_id: str):
        self.run = run
        self.run_id = run_id  # the run's own id (meta.json), which its series carry
        self.leading: tuple[tuple[str, str], ...] | None = None  # labels of the leading-cause series being written
        self.exported: list[tuple[float, float]] = []
        self.leading_sets = 0
        self.ended_at: float | None = None
        self.seeded = False  # a pass has read its lines back from Prometheus once
        self.rechecked = 0.0
        # A lasting dip under way (dips.Dip.lasting): the level it fell from and where it began, kept for the
        # passes whose look-back no longer reaches them.
        self.level_before: float | None = None
        self.lasting_start: float | None = None
        self.full_at = -math.inf  # when the evidence was last read
        self.ongoing_start: float | None = None  # start of the dip under way as that read found it
        self._meta: dict = {}
        self._meta_stat: tuple[int, int] | None = None

    def meta(self) -> dict:
        """meta.json, read again only when it changed."""
        try:
            st = os.stat(self.run.file(rundir.META))
        except FileNotFoundError:
            return self._meta
        if (st.st_mtime_ns, st.st_size) != self._meta_stat:
            self._meta = self.run.read_meta()
            self._meta_stat = (st.st_mtime_ns, st.st_size)
        return self._meta


class DipWatcher:
    def __init__(self, runs_dir: str, prometheus: str, sink: Callable[[list[Sample]], None],
                 clock: Callable[[], float] = time.time,
                 subscribe: Callable[[Sink], None] | None = None,
                 mark: Callable[[Callable[[], None]], None] | None = None):
        """``subscribe``: how to see the samples the exporter sends (ExporterOptions.subscribe);
        without it every live run gets a pass every second. ``mark``: the sink's delivery marks,
        so that a pass reads back the lines that called for it."""
        self.runs_dir, self.prometheus, self.sink, self.clock = runs_dir, prometheus, sink, clock
        self.mark = mark
        self.runs: dict[str, _RunState] = {}
        self.done: set[str] = set()
        self._busy = threading.Lock()
        self._last = 0.0
        self._outbox: list[Sample] = []  # filled by the analysis thread, sent by poll()
        self._outbox_lock = threading.Lock()
        self.observing = subscribe is not None
        self.lines: dict[str, _Lines] = {}  # run id -> its recent TPS lines
        self._lines_lock = threading.Lock()  # observe() in the poll loop, seed() in the pass thread
        self._new_runs = rundir.NewRuns(runs_dir, DISCOVER_S)
        self._rediscover = False  # a run directory without meta.json yet
        # How a pass reads Prometheus: (base URL, selectors, start, end) -> [Series]; a test may
        # put its own here.
        self.fetch = fetch
        self.thread: threading.Thread | None = None  # the last pass started
        self.thread_cpu_seconds = 0.0  # the passes' CPU (the exporter's per-collector self-metric)
        if subscribe is not None:
            subscribe(self.observe)

    def observe(self, samples: Sequence[SampleLike]) -> None:
        """Every batch the exporter sends: keep the TPS lines (and progress interval) of each run."""
        with self._lines_lock:
            for s in samples:
                if s.name != TPS and s.name != INTERVAL:
                    continue
                run_id = dict(s.labels).get("run_id")
                if not run_id or run_id in self.done:
                    continue
                lines = self.lines.get(run_id)
                if lines is None:
                    lines = self.lines[run_id] = _Lines()
                if s.name == TPS:
                    lines.add(s.timestamp_ms, s.value)
                elif s.value == s.value:
                    lines.interval = s.value

    def poll(self) -> None:
        with self._outbox_lock:
            ready, self._outbox = self._outbox, []
        if ready:
            self.sink(ready)  # in the poll loop, which flushes the writer right after
        now = self.clock()
        if now - self._last < EVERY_S or self._busy.locked():
            return
        self._last = now
        self._discover(now)
        jobs = self._plans(now)
        if not jobs:
            return
        delivered = threading.Event()
        if self.mark is not None:
            self.mark(delivered.set)  # fires when the poll loop flushes the lines just observed
        else:
            delivered.set()
        self.thread = threading.Thread(target=self._pass, args=(jobs, delivered), daemon=True, name="dips")
        self.thread.start()

    def collect(self):
        return []  # remote-written only: Prometheus scrapes nothing of this collector

    def _plans(self, now: float) -> list[tuple]:
        jobs = []
        for state in list(self.runs.values()):
            try:
                job = self._plan(state, now)
            except (rundir.CorruptMeta, OSError):  # meta.json unreadable this second: next second
                log.debug("dip watch of %s", state.run_id, exc_info=True)
                continue
            if job is not None:
                jobs.append(job)
        return jobs

    def _plan(self, state: _RunState, now: float) -> tuple | None:
        """What this second calls for: None, or (state, how, meta, running) for the pass thread."""
        meta = state.meta()
        running = state.ended_at is None and meta.get("state") == rundir.RUNNING \
            and processes.process_alive(meta.get("pid"))
        if not running:
            state.ended_at = state.ended_at or now
            return (state, FULL, meta, False) if now - state.ended_at >= SETTLE_S else None
        if state.leading is not None:
            if now - state.full_at >= ONGOING_EVERY_S or not self.observing or not state.seeded:
                return state, FULL, meta, True  # (without the lines in memory: every second, as before)
            return state, DURING, meta, True
        if not self.observing or not state.seeded:
            state.rechecked = now
            return state, LOOK, meta, True
        with self._lines_lock:
            lines = self.lines.get(state.run_id)
            fired = lines is not None and self._new_line_possibly_low(lines, meta)
        if fired:
            state.rechecked = now  # the look covers the safety net's ground
            # Seeded, the lines in memory are what Prometheus holds (the pass waits for their delivery):
            # the detector runs on them, and Prometheus is asked only when it finds a dip to write. On a
            # noisy run many lines are possibly low; one query each cost Prometheus and the exporter more
            # than the rest of the collector (issue 32).
            return state, MEMORY, meta, True
        if now - state.rechecked >= RECHECK_S:
            state.rechecked = now
            return state, MEMORY, meta, True
        return None

    @staticmethod
    def _new_line_possibly_low(lines: _Lines, meta: dict) -> bool:
        points = lines.points
        if not points or points[-1][0] <= lines.checked_ms:
            return False
        # The look reads the interval from meta.json (or takes 1 s), the evidence pass may read
        # benchmark_progress_interval_seconds: the check holds for either.
        given = float(meta.get("progress_interval") or 0)
        intervals = (given or 1.0, given or lines.interval or 1.0)
        first_new = len(points)
        while first_new > 0 and points[first_new - 1][0] > lines.checked_ms:
            first_new -= 1
        lines.checked_ms = points[-1][0]
        # Each new line as the newest one it was: a low line inside a burst counts too.
        return any(possibly_low(points, i, intervals) for i in range(first_new, len(points)))

    def _pass(self, jobs: list[tuple] | None = None, delivered: threading.Event | None = None) -> None:
        """The analysis thread. Without ``jobs``: every run found, as they stand (one pass each)."""
        cpu0 = time.thread_time()
        try:
            self._pass_locked(jobs, delivered)
        finally:
            self.thread_cpu_seconds += time.thread_time() - cpu0

    def _pass_locked(self, jobs: list[tuple] | None, delivered: threading.Event | None) -> None:
        with self._busy:
            if delivered is not None and not delivered.wait(DELIVERY_WAIT_S):
                log.debug("dip pass: the lines are not delivered yet; reading what Prometheus has")
            if jobs is None:
                self._discover(self.clock())
                jobs = self._plans(self.clock())
            for job in jobs:
                try:
                    self._analyse(*job)
                except Exception:  # Prometheus away: try again next second
                    log.debug("dip analysis failed", exc_info=True)

    def _discover(self, now: float) -> None:
        """New live runs; runs_dir is listed only when it changed, or every DISCOVER_S."""
        if not self._new_runs.due(now, waiting=self._rediscover):
            return
        self._rediscover = False
        for name in os.listdir(self.runs_dir):
            if name in self.runs or name in self.done:
                continue
            run = rundir.RunDir(os.path.join(self.runs_dir, name))
            try:
                meta = run.read_meta()
            except (rundir.CorruptMeta, OSError):  # the runs collector sets it aside and says why
                self._forget(name, name)
                continue
            if meta.get("state") == rundir.RUNNING and processes.process_alive(meta.get("pid")):
                self.runs[name] = _RunState(run, meta.get("run_id") or name)
            elif meta:
                self._forget(name, meta.get("run_id") or name)  # finished before we saw it: benchwatch explain covers it
            else:
                self._rediscover = True  # meta.json not written yet: look again next second

    def _read_back(self, run_id: str, points: list[tuple[int, float]], seed: bool = False) -> None:
        """A pass read these TPS lines from Prometheus: it stands for possibly_low on them; ``seed``:
        keep those older than any line observed (a restart)."""
        with self._lines_lock:
            lines = self.lines.setdefault(run_id, _Lines())
            if seed:
                lines.seed(points)
            if points:
                lines.checked_ms = max(lines.checked_ms, points[-1][0])

    def _forget(self, name: str, run_id: str) -> None:
        with self._lines_lock:
            self.done.update((name, run_id))
            self.lines.pop(run_id, None)

    def _analyse(self, state: _RunState, how: str, meta: dict, running: bool) -> None:
        from benchwatch.explain import causes, report

        now = self.clock()
        run_id = state.run_id
        start = max(float(meta.get("clock_start_epoch") or meta.get("started_at") or now - LOOKBACK_S), now - LOOKBACK_S)
        if how != FULL:
            if how == LOOK:
                # The cheap look (one series): the evidence is fetched only while a dip is under
                # way or when one has just ended.
                tps = self.fetch(self.prometheus, [f'{TPS}{{run_id="{run_id}"}}'], start - 60, now)
                points = report.tps_samples(tps, run_id)
                if self.observing:
                    self._read_back(run_id, points, seed=True)
                    state.seeded = True
                interval = report.context(meta, tps, run_id, now).interval_s
            else:
                # The lines the look would read: query.series.fetch's window, rounded up as it does.
                since = now - max(1, math.ceil(now - (start - 60)))
                with self._lines_lock:
                    kept = self.lines.get(run_id)
                    points = [p for p in kept.points if since * 1000 < p[0] <= now * 1000] if kept else []
                interval = float(meta.get("progress_interval") or 0) or 1.0
            found = detector.detect(points, interval, ongoing=True, level_before=state.level_before)
            if how == DURING:
                if any(d.ongoing and d.start == state.ongoing_start for d in found):
                    # The same dip still under way: its leading cause so far, written every second; its
                    # evidence is read again ONGOING_EVERY_S after the last.
                    if state.leading is not None:
                        with self._outbox_lock:
                            self._outbox.append(Sample("benchmark_dip_leading_cause_info", state.leading, 1.0,
                                                       int(now * 1000) + 1))
                    return
            room = len(state.exported) < MAX_DIPS
            if not any(d.ongoing or (room and not any(a < d.end and d.start < b for a, b in state.exported))
                       for d in found):
                return
        state.full_at = now
        series = self.fetch(self.prometheus, causes.run_selectors(run_id), start - 60, now)
        if self.observing and running:
            self._read_back(run_id, report.tps_samples(series, run_id))
        result = report.explain(series, {**meta, "ended_at": None if running else meta.get("ended_at")}, run_id,
                                ongoing=running, now=now, level_before=state.level_before)
        out: list[Sample] = []
        now_ms = int(now * 1000)
        current = next((d for d in result["dips"] if d.get("ongoing")), None)
        state.ongoing_start = current["start"] if current is not None else None
        leading = None
        if current is not None:
            leading = tuple(sorted({"run_id": run_id, "cause": current["cause"],
                                    "evidence": current["evidence"] or "no signal stands out"}.items()))
            if state.leading is not None and dict(state.leading)["cause"] == current["cause"]:
                leading = state.leading  # same cause: keep one series (its first evidence) rather than one per second
            elif state.leading_sets >= MAX_LEADING:
                leading = None
            else:
                state.leading_sets += 1
        if state.leading is not None and state.leading != leading:
            out.append(Sample("benchmark_dip_leading_cause_info", state.leading, STALE_NAN, now_ms))
        if leading is not None:
            out.append(Sample("benchmark_dip_leading_cause_info", leading, 1.0, now_ms + 1))
        state.leading = leading
        for d in result["dips"]:
            if d.get("ongoing") or len(state.exported) >= MAX_DIPS:
                continue
            if d.get("lasting") and state.lasting_start is not None and state.lasting_start < d["start"]:
                d = {**d, "start": state.lasting_start}  # it began before this pass's look-back
            if any(a < d["end"] and d["start"] < b for a, b in state.exported):
                continue
            state.exported.append((d["start"], d["end"]))
            out.extend(dip_samples(run_id, len(state.exported), d))
        if current is not None and current.get("lasting"):
            state.level_before = current["baseline_tps"]
            state.lasting_start = min(state.lasting_start or current["start"], current["start"])
        else:
            state.level_before = state.lasting_start = None
        if out:
            with self._outbox_lock:
                self._outbox.extend(out)
        if not running:
            del self.runs[state.run.run_id]
            self._forget(state.run.run_id, run_id)


def dip_samples(run_id: str, number: int, d: dict) -> list[Sample]:
    """benchmark_dip_info over the dip: 1 each second from its start to its end, then a staleness marker."""
    labels = {"run_id": run_id, "dip": str(number), "level": d["level"], "cause": d["cause"],
              "evidence": d["evidence"] or "no signal stands out"}
    a, b = int(d["start"] * 1000), int(d["end"] * 1000)
    stamps = list(range(a, b, 1000)) + [b]
    out = [sample("benchmark_dip_info", labels, 1.0, ts) for ts in stamps]
    out.append(sample("benchmark_dip_info", labels, STALE_NAN, b + 1))
    return out


@register_collector("dips", "find TPS dips of live runs and remote-write their leading cause (needs Prometheus)",
                    order=ORDER_DIPS)
def _build(options: ExporterOptions) -> DipWatcher | None:
    if not options.archive_url:
        return None
    return DipWatcher(options.runs_dir, options.archive_url, options.sink, clock=options.clock,
                      subscribe=options.subscribe, mark=options.mark)


def metrics_doc() -> MetricsDoc:
    return MetricsDoc([(METRICS_DOC_SECTION, DIP_METRICS)])
