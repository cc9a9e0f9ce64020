"""Saves each finished run's series into its run directory, so a later snapshot needs no Prometheus,
then completes the run's summary.json: its stability profile's dips by cause need explain over those
series (benchwatch.stability.runs.complete), so the archiver, which alone knows when they are written, adds them.

Which series is benchwatch.query.archive's list (the host's and each engine's), plain data: the daemon
imports neither the dashboards nor the snapshot code (tests/unit/test_layout.py)."""

from __future__ import annotations

import logging
import queue
import threading

from benchwatch.exporter import self_metrics as sm
from benchwatch.query import longterm
from benchwatch.query.archive import save_run_series
from benchwatch.record import rundir
from benchwatch.stability import runs as stability_runs

log = logging.getLogger("benchwatch.exporter")


class RunArchiver:
    """Called with each finished run; saves its series from Prometheus.

    In a thread of its own: saving waits until Prometheus has scraped a few
    seconds past the run, and the poll loop must not wait with it.
    """

    def __init__(self, prometheus_url: str):
        self.prometheus_url = prometheus_url
        self.queue: queue.Queue = queue.Queue()
        self.saved = 0
        self.failed = 0
        threading.Thread(target=self._work, daemon=True, name="run-archiver").start()

    def __call__(self, run) -> None:
        self.queue.put(run)

    def _work(self) -> None:
        while True:
            run = self.queue.get()
            try:
                save_run_series(run.path, self.prometheus_url)
                self.saved += 1
            except Exception:  # Prometheus away, a run without data: the raw output is still there
                self.failed += 1
                log.exception("could not save the series of run %s", run.run_id)
                continue
            try:
                stability_runs.complete(rundir.RunDir(run.path))
            except Exception:  # its readers compute the dips by cause from the series when summary.json lacks them
                log.exception("could not complete the stability profile of run %s", run.run_id)
            store = longterm.store_of(self.prometheus_url)
            if store is None:
                continue
            try:
                # What Prometheus' remote write did not forward (out-of-order samples) written to the store.
                done = longterm.complete_run(run.path, self.prometheus_url, store)
                log.info("run %s in the long-term store %s: %s", run.run_id, store, done.to_json())
            except Exception:  # the store away: the run's series are still here, and in its series/*.csv
                log.exception("could not complete run %s in the long-term store %s", run.run_id, store)

    def collect(self):
        for name, value in ((sm.RUNS_SAVED, self.saved), (sm.RUNS_SAVE_FAILURES, self.failed)):
            f = sm.family(name)
            f.add_metric([], value)
            yield f
