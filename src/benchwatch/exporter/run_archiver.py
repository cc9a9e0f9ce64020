"""Saves each finished run's series into its run directory, so a later snapshot needs no Prometheus,
then completes the run's summary.json: its stability profile's dips by cause need explain over those
series (benchwatch.stability.runs.complete), so the archiver, which alone knows when they are written, adds them;
then hands the run to the results database's writer (benchwatch.exporter.results_writer), so the record it
writes holds the archived series and the completed summary.

Which series is benchwatch.query.archive's list (the host's and each engine's), plain data: the daemon
imports neither the dashboards nor the snapshot code (tests/unit/test_layout.py)."""

from __future__ import annotations

import logging
import queue
import threading

from benchwatch.exporter import self_metrics as sm
from benchwatch.exporter.results_writer import ResultsWriter
from benchwatch.query.archive import save_run_series
from benchwatch.record import rundir
from benchwatch.stability import runs as stability_runs

log = logging.getLogger("benchwatch.exporter")


class RunArchiver:
    """Called with each finished run; saves its series from Prometheus.

    In a thread of its own: saving waits until Prometheus has scraped a few
    seconds past the run, and the poll loop must not wait with it.
    """

    def __init__(self, prometheus_url: str, results: ResultsWriter | None = None):
        self.prometheus_url = prometheus_url
        self.results = results
        self.queue: queue.Queue = queue.Queue()
        self.saved = 0
        self.failed = 0
        threading.Thread(target=self._work, daemon=True, name="run-archiver").start()

    def __call__(self, run) -> None:
        self.queue.put(run)

    def _work(self) -> None:
        while True:
            run = self.queue.get()
            self._archive(run)
            if self.results is not None:
                # Last: the record then holds the archived series and the completed summary. Without series (Prometheus
                # away) the record is written all the same, with what the run directory has.
                self.results.run_ended(run.path)

    def _archive(self, run) -> None:
        try:
            save_run_series(run.path, self.prometheus_url)
            self.saved += 1
        except Exception:  # Prometheus away, a run without data: the raw output is still there
            self.failed += 1
            log.exception("could not save the series of run %s", run.run_id)
            return
        try:
            stability_runs.complete(rundir.RunDir(run.path))
        except Exception:  # its readers compute the dips by cause from the series when summary.json lacks them
            log.exception("could not complete the stability profile of run %s", run.run_id)

    def collect(self):
        for name, value in ((sm.RUNS_SAVED, self.saved), (sm.RUNS_SAVE_FAILURES, self.failed)):
            f = sm.family(name)
            f.add_metric([], value)
            yield f
        # The results database's counts, 0 without one ("off"): the catalogue is the same on every exporter.
        yield from (self.results.collect() if self.results is not None else ResultsWriter.idle_families())
