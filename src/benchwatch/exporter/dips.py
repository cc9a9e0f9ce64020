"""Collector ``dips``: runs the dip detector on each live run and remote-writes what it finds.

Two small families (catalogue: DIP_METRICS), read by the run dashboard's
annotation and the PgbenchTPSDrop alert's text:

- ``pgbench_dip_leading_cause_info{run_id, cause, evidence}``: 1 every second
  while a dip is under way, labelled with its leading cause so far; ended by a
  staleness marker when the dip ends or the cause changes;
- ``pgbench_dip_info{run_id, dip, level, cause, evidence}``: 1 over a finished
  dip's span, written when it ends (like pg_checkpoint_info): the annotation.

The analysis reads the run and its evidence back from Prometheus (the same
code as ``benchwatch explain``) in a thread of its own, so a slow query never
delays the progress lines.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from benchwatch.exporter import ExporterOptions, register_collector
from benchwatch.model.samples import STALE_NAN, Sample, sample
from benchwatch.record import rundir
from benchwatch.util import processes

log = logging.getLogger("benchwatch.exporter")

DIP_METRICS: dict[str, tuple[str, str]] = {
    "pgbench_dip_leading_cause_info": ("gauge", "1 while a TPS dip of the run is under way, labelled with its leading cause and evidence so far (benchwatch explain)."),
    "pgbench_dip_info": ("gauge", "1 over a finished TPS dip's span, written when it ends, labelled with its number, level (deep, mild), cause and evidence."),
}

EVERY_S = 1.0
# Past this many dips (and leading-cause label sets) a run's later ones are left to benchwatch
# explain: with its own series, a run stays well under 200.
MAX_DIPS = 30
MAX_LEADING = 40
# How far back the live analysis reads: the detector's window and the signals' baselines.
LOOKBACK_S = 120.0
# After a run ends, wait this long for its last samples to land before the final pass.
SETTLE_S = 2.0


class _RunState:
    def __init__(self, run: rundir.RunDir):
        self.run = run
        self.leading: tuple[tuple[str, str], ...] | None = None  # labels of the leading-cause series being written
        self.exported: list[tuple[float, float]] = []
        self.leading_sets = 0
        self.ended_at: float | None = None


class DipWatcher:
    def __init__(self, runs_dir: str, prometheus: str, sink: Callable[[list[Sample]], None],
                 clock: Callable[[], float] = time.time):
        self.runs_dir, self.prometheus, self.sink, self.clock = runs_dir, prometheus, sink, clock
        self.runs: dict[str, _RunState] = {}
        self.done: set[str] = set()
        self._busy = threading.Lock()
        self._last = 0.0
        self._outbox: list[Sample] = []  # filled by the analysis thread, sent by poll()
        self._outbox_lock = threading.Lock()

    def poll(self) -> None:
        with self._outbox_lock:
            ready, self._outbox = self._outbox, []
        if ready:
            self.sink(ready)  # in the poll loop, which flushes the writer right after
        now = self.clock()
        if now - self._last < EVERY_S or self._busy.locked():
            return
        self._last = now
        threading.Thread(target=self._pass, daemon=True, name="dips").start()

    def collect(self):
        return []  # remote-written only: Prometheus scrapes nothing of this collector

    def _pass(self) -> None:
        with self._busy:
            try:
                self._discover()
                for run_id, state in list(self.runs.items()):
                    self._analyse(run_id, state)
            except Exception:  # Prometheus away: try again next second
                log.debug("dip analysis failed", exc_info=True)

    def _discover(self) -> None:
        try:
            names = os.listdir(self.runs_dir)
        except FileNotFoundError:
            return
        for name in names:
            if name in self.runs or name in self.done:
                continue
            run = rundir.RunDir(os.path.join(self.runs_dir, name))
            meta = run.read_meta()
            if meta.get("state") == rundir.RUNNING and processes.process_alive(meta.get("pid")):
                self.runs[name] = _RunState(run)
            elif meta:
                self.done.add(name)  # finished before we saw it: benchwatch explain covers it

    def _analyse(self, run_id: str, state: _RunState) -> None:
        from benchwatch.explain import causes, dips, report
        from benchwatch.query.series import fetch

        meta = state.run.read_meta()
        now = self.clock()
        running = meta.get("state") == rundir.RUNNING and processes.process_alive(meta.get("pid"))
        if not running:
            state.ended_at = state.ended_at or now
            if now - state.ended_at < SETTLE_S:
                return
        run_id = meta.get("run_id") or run_id
        start = max(float(meta.get("clock_start_epoch") or meta.get("started_at") or now - LOOKBACK_S), now - LOOKBACK_S)
        if running and state.leading is None:
            # The cheap look first (one series): the evidence is fetched only while a dip is under
            # way or when one has just ended, so a steady second costs Prometheus one small query.
            tps = fetch(self.prometheus, [f'pgbench_progress_tps{{run_id="{run_id}"}}'], start - 60, now)
            ctx = report.context(meta, tps, run_id, now)
            found = dips.detect(report.tps_samples(tps, run_id), ctx.interval_s, ongoing=True)
            room = len(state.exported) < MAX_DIPS
            if not any(d.ongoing or (room and not any(a < d.end and d.start < b for a, b in state.exported))
                       for d in found):
                return
        series = fetch(self.prometheus, causes.run_selectors(run_id), start - 60, now)
        result = report.explain(series, {**meta, "ended_at": None if running else meta.get("ended_at")}, run_id,
                                ongoing=running, now=now)
        out: list[Sample] = []
        now_ms = int(now * 1000)
        current = next((d for d in result["dips"] if d.get("ongoing")), None)
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
            out.append(Sample("pgbench_dip_leading_cause_info", state.leading, STALE_NAN, now_ms))
        if leading is not None:
            out.append(Sample("pgbench_dip_leading_cause_info", leading, 1.0, now_ms + 1))
        state.leading = leading
        for d in result["dips"]:
            if d.get("ongoing") or len(state.exported) >= MAX_DIPS:
                continue
            if any(a < d["end"] and d["start"] < b for a, b in state.exported):
                continue
            state.exported.append((d["start"], d["end"]))
            out.extend(dip_samples(run_id, len(state.exported), d))
        if out:
            with self._outbox_lock:
                self._outbox.extend(out)
        if not running:
            del self.runs[state.run.run_id]
            self.done.add(state.run.run_id)


def dip_samples(run_id: str, number: int, d: dict) -> list[Sample]:
    """pgbench_dip_info over the dip: 1 each second from its start to its end, then a staleness marker."""
    labels = {"run_id": run_id, "dip": str(number), "level": d["level"], "cause": d["cause"],
              "evidence": d["evidence"] or "no signal stands out"}
    a, b = int(d["start"] * 1000), int(d["end"] * 1000)
    stamps = list(range(a, b, 1000)) + [b]
    out = [sample("pgbench_dip_info", labels, 1.0, ts) for ts in stamps]
    out.append(sample("pgbench_dip_info", labels, STALE_NAN, b + 1))
    return out


@register_collector("dips", "find TPS dips of live runs and remote-write their leading cause (needs Prometheus)")
def _build(options: ExporterOptions) -> DipWatcher | None:
    if not options.archive_url:
        return None
    return DipWatcher(options.runs_dir, options.archive_url, options.sink, clock=options.clock)
