"""Writes each finished run's record to the results database (benchwatch.results), after the run archiver has
saved its series and completed its summary, so the record holds them; and writes through, every
RETRY_S, what the database missed while it was down (benchwatch.results.pending).

The run directory is never changed here and the run's exit code and output were settled before: a
database that is down or refuses costs a pending marker and a log line, nothing else.

Configured by the daemon's environment, as ``up`` starts it: BENCHWATCH_RESULTS_DSN (no password: libpq
reads it from the pgpass file the DSN's passfile or PGPASSFILE names) and BENCHWATCH_HOST (the host name
the records carry when a run's meta.json names none)."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping

from benchwatch.exporter import self_metrics as sm
from benchwatch.history import events, index, workload
from benchwatch.record import rundir
from benchwatch.results import dsn as results_dsn
from benchwatch.results.pending import Pending
from benchwatch.results.store import Store
from benchwatch.results.sweeps import PendingSweeps

log = logging.getLogger("benchwatch.exporter")

RETRY_S = 15.0  # how often runs pending while the database was down are tried again


class ResultsWriter:
    def __init__(self, runs_dir: str, dsn: str, host: str, retry_s: float = RETRY_S):
        self.runs_dir, self.host, self.retry_s = runs_dir, host, retry_s
        self.store = Store(dsn)
        self.pending = Pending(runs_dir)
        # a sweep's rows the sweep could not write (benchwatch.results.sweeps), in the state dir of these runs
        self.sweeps = PendingSweeps(os.path.dirname(os.path.abspath(runs_dir)))
        self.written = 0
        self.failed = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._wake.set()  # a restarted daemon writes through what an earlier one left pending
        threading.Thread(target=self._retry_loop, daemon=True, name="results-writer").start()

    @classmethod
    def from_environ(cls, runs_dir: str, environ: Mapping[str, str]) -> ResultsWriter | None:
        dsn = environ.get("BENCHWATCH_RESULTS_DSN") or ""
        if not dsn or dsn == results_dsn.OFF:
            return None
        try:
            return cls(runs_dir, dsn, environ.get("BENCHWATCH_HOST") or socket.gethostname())
        except results_dsn.DsnError as e:
            log.error("no results database: %s", e)
            return None

    def run_ended(self, run_path: str) -> None:
        """Called by the run archiver's thread once the run's series and summary are complete."""
        run_id = os.path.basename(run_path.rstrip("/"))
        self.pending.mark(run_id)
        if self._write(run_id):
            self._wake.set()  # the database is up: what waited goes now, not in RETRY_S

    def _write(self, run_id: str) -> bool:
        path = os.path.join(self.runs_dir, run_id)
        with self._lock:
            try:
                run = rundir.RunDir(path)
                entry = index.read_entry(run)
                if entry is None:  # a damaged meta.json: nothing a reader could use; the directory keeps it
                    log.error("run %s not written to the results database: its meta.json is damaged", run_id)
                    self.pending.clear(run_id)
                    return True
                meta = run.read_meta()
                host = str(meta.get("hostname") or self.host)
                self.store.write_run(path, host, entry, workload.pooled_id(entry["key"]))
                self._write_history_state()
            except Exception as e:  # psycopg.OperationalError (down), anything else: the marker stays
                self.failed += 1
                self.store.close()
                self.pending.mark(run_id, f"{type(e).__name__}: {str(e).strip()[:300]}")
                log.warning("run %s not written to the results database yet (%s: %s); kept pending, tried again "
                            "every %gs", run_id, type(e).__name__, str(e).strip()[:300], self.retry_s)
                return False
            self.pending.clear(run_id)
            self.written += 1
            log.info("run %s written to the results database", run_id)
            return True

    def _write_history_state(self) -> None:
        hdir = events.history_dir(os.path.dirname(os.path.abspath(self.runs_dir)))
        for kind, content in events.state(hdir):
            self.store.write_history_state(self.host, kind, content)

    def write_pending(self) -> int:
        """Writes through every pending run, oldest first, then every sweep's pending row (a sweep that ran
        while the database was down); stops at the first failure (the database is still away). Returns how
        many runs and sweeps are still pending."""
        left = self.pending.run_ids()
        for i, run_id in enumerate(left):
            if not self._write(run_id):
                return len(left) - i + len(self.sweeps.names())
        names = self.sweeps.names()
        for i, name in enumerate(names):
            if not self._write_sweep(name):
                return len(names) - i
        return 0

    def _write_sweep(self, name: str) -> bool:
        with self._lock:
            row = self.sweeps.row(name)
            if row is None:  # unreadable (cut by a crash): the sweep writes a whole one with its next event
                return True
            try:
                self.store.write_sweep(row)
            except Exception as e:  # the database is down: the marker stays
                self.failed += 1
                self.store.close()
                log.warning("sweep %s not written to the results database yet (%s: %s); kept pending", name,
                            type(e).__name__, str(e).strip()[:300])
                return False
            self.sweeps.clear(row)
            log.info("sweep %s written to the results database", name)
            return True

    def _retry_loop(self) -> None:
        while True:
            self._wake.wait(self.retry_s)
            self._wake.clear()
            try:
                self.write_pending()
            except Exception:  # never let the loop die: the markers stay for the next turn
                log.exception("writing pending runs to the results database")

    def collect(self):
        return self._families(self.written, self.failed, len(self.pending.run_ids()))

    @staticmethod
    def idle_families():
        return ResultsWriter._families(0, 0, 0)

    @staticmethod
    def _families(written: int, failed: int, pending: int):
        out = []
        for name, value in ((sm.RESULTS_WRITTEN, written), (sm.RESULTS_WRITE_FAILURES, failed),
                            (sm.RESULTS_PENDING, pending)):
            f = sm.family(name)
            f.add_metric([], value)
            out.append(f)
        return out
