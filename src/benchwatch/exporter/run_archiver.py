"""Saves each finished run's series into its run directory, so a later snapshot needs no Prometheus,
then completes the run's summary.json: its stability profile's dips by cause need explain over those
series (benchwatch.stability.runs.complete), so the archiver, which alone knows when they are written, adds them;
then hands the run to the results database's writer (benchwatch.exporter.results_writer), so the record it
writes holds the archived series and the completed summary.

Which series is benchwatch.query.archive's list (the host's and each engine's), plain data: the daemon
imports neither the dashboards nor the snapshot code (tests/unit/test_layout.py)."""

from __future__ import annotations

import heapq
import logging
import queue
import threading
import time

from benchwatch.exporter import self_metrics as sm
from benchwatch.exporter.results_writer import ResultsWriter
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

    def __init__(self, prometheus_url: str, results: ResultsWriter | None = None):
        self.prometheus_url = prometheus_url
        self.results = results
        self.queue: queue.Queue = queue.Queue()
        self.saved = 0
        self.failed = 0
        self.completer: LongTermCompleter | None = None
        # Runs handed over and not yet through _work (queued or in hand): with the completer's, what
        # RUNS_FINISHING says, so that a runner's flush does not return between a run's end and its record.
        self.in_hand = 0
        self.count_lock = threading.Lock()
        threading.Thread(target=self._work, daemon=True, name="run-archiver").start()

    def __call__(self, run) -> None:
        with self.count_lock:
            self.in_hand += 1
        self.queue.put(run)

    def finishing(self) -> int:
        with self.count_lock:
            mine = self.in_hand
        return mine + (self.completer.pending() if self.completer is not None else 0)

    def _work(self) -> None:
        while True:
            run = self.queue.get()
            try:
                self._finish(run)
            finally:
                with self.count_lock:
                    self.in_hand -= 1

    def _finish(self, run) -> None:
        if self._archive(run):
            store = longterm.store_of(self.prometheus_url)
            if store is not None:
                if self.completer is None:
                    self.completer = LongTermCompleter(self.prometheus_url, store)
                self.completer.add(run.path, run.run_id)
        if self.results is not None:
            # Last: the record then holds the archived series and the completed summary. Without series (Prometheus
            # away) the record is written all the same, with what the run directory has.
            self.results.run_ended(run.path)

    def _archive(self, run) -> bool:
        """Saves the run's series and completes its stability profile; False when the series could not be saved."""
        try:
            save_run_series(run.path, self.prometheus_url)
            self.saved += 1
        except Exception:  # Prometheus away, a run without data: the raw output is still there
            self.failed += 1
            log.exception("could not save the series of run %s", run.run_id)
            return False
        try:
            stability_runs.complete(rundir.RunDir(run.path))
        except Exception:  # its readers compute the dips by cause from the series when summary.json lacks them
            log.exception("could not complete the stability profile of run %s", run.run_id)
        return True

    def collect(self):
        for name, value in ((sm.RUNS_SAVED, self.saved), (sm.RUNS_SAVE_FAILURES, self.failed),
                            (sm.RUNS_FINISHING, self.finishing())):
            f = sm.family(name)
            f.add_metric([], value)
            yield f
        # The results database's counts, 0 without one ("off"): the catalogue is the same on every exporter.
        yield from (self.results.collect() if self.results is not None else ResultsWriter.idle_families())


class LongTermCompleter:
    """Writes to the long-term store what Prometheus' remote write did not forward of each finished run
    (benchwatch.query.longterm.complete_run), in a thread of its own so that the next run's archive does
    not wait for it; a run the store was away for is tried again later (RETRY_S), for about a day."""

    RETRY_S = (10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 3600.0, 3600.0, 3600.0, 7200.0, 7200.0,
               14400.0, 14400.0, 28800.0)

    def __init__(self, local: str, store: longterm.Store, clock=time.monotonic):
        self.local, self.store, self.clock = local, store, clock
        self.due: list[tuple[float, int, str, str, int]] = []  # (when, order, path, run id, attempt)
        self.order = 0
        self.working = False  # a run taken off ``due`` and being completed
        self.wake = threading.Condition()
        threading.Thread(target=self._work, daemon=True, name="long-term-completer").start()

    def pending(self) -> int:
        """Runs still to complete (waiting, or again later after a failure) or being completed."""
        with self.wake:
            return len(self.due) + self.working

    def add(self, path: str, run_id: str, attempt: int = 0, delay_s: float = 0.0) -> None:
        with self.wake:
            self.order += 1
            heapq.heappush(self.due, (self.clock() + delay_s, self.order, path, run_id, attempt))
            self.wake.notify()

    def _next(self) -> tuple[str, str, int]:
        with self.wake:
            while not self.due or self.due[0][0] > self.clock():
                self.wake.wait(None if not self.due else max(0.0, self.due[0][0] - self.clock()))
            _, _, path, run_id, attempt = heapq.heappop(self.due)
            self.working = True
            return path, run_id, attempt

    def _work(self) -> None:
        while True:
            path, run_id, attempt = self._next()
            try:
                done = longterm.complete_run(path, self.local, self.store)
                log.info("run %s in the long-term store %s: %s", run_id, self.store, done.to_json())
            except Exception:  # the store away: the run's series are still here, and in its series/*.csv
                if attempt < len(self.RETRY_S):
                    log.exception("could not complete run %s in the long-term store %s: again in %.0f s",
                                  run_id, self.store, self.RETRY_S[attempt])
                    self.add(path, run_id, attempt + 1, self.RETRY_S[attempt])
                else:
                    log.exception("could not complete run %s in the long-term store %s: given up", run_id, self.store)
            finally:
                with self.wake:
                    self.working = False
