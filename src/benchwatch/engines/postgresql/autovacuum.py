"""Autovacuum runs as series: the server log's autovacuum and autoanalyze records in, samples out.

A run is logged once, when it ends (``log_autovacuum_min_duration``), with how long it took:
it ended at the record's time ``t1`` and began ``elapsed`` seconds before.  Each run becomes,
at those times (sent by the exporter's checkpoints collector, which follows the log):

* ``pg_autovacuum_in_progress{database,table,kind}`` 0 just before ``t0``, 1 at ``t0`` and every
  second after it, 0 at ``t1``: a region over the run, like a checkpoint's, written after the
  fact (Prometheus takes the past samples within its out_of_order_time_window);
* ``pg_autovacuum_runs_total`` and ``pg_autovacuum_duration_seconds_total`` +1 and +elapsed at ``t1``;
* for a vacuum, ``pg_autovacuum_last_tuples_removed`` and ``pg_autovacuum_last_pages_removed`` at ``t1``.

A record cut before its "system usage" line (no elapsed) is counted, without a region.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from benchwatch.engines.postgresql import server_log as pg_log
from benchwatch.model import catalogue
from benchwatch.model.samples import RisingSeries, Sample

IN_PROGRESS = "pg_autovacuum_in_progress"
RUNS = "pg_autovacuum_runs_total"
DURATION = "pg_autovacuum_duration_seconds_total"
TUPLES_REMOVED = "pg_autovacuum_last_tuples_removed"
PAGES_REMOVED = "pg_autovacuum_last_pages_removed"
HEARTBEAT_MS = 1000
# A garbled elapsed (or a run of days) is not drawn as millions of heartbeats.
MAX_REGION_MS = 86_400_000

METRICS = {
    IN_PROGRESS: ("gauge", "1 over an autovacuum or autoanalyze run (kind: vacuum, analyze) of a table, from its start "
                           "(the log time less its elapsed time) to its end (the log time); written when it ends."),
    RUNS: ("counter", "Autovacuum and autoanalyze runs logged (log_autovacuum_min_duration), by table and kind."),
    DURATION: ("counter", "Seconds autovacuum and autoanalyze runs took, as logged (elapsed), by table and kind."),
    TUPLES_REMOVED: ("gauge", "Dead tuples the last autovacuum of the table removed."),
    PAGES_REMOVED: ("gauge", "Pages the last autovacuum of the table truncated off its end."),
}


class AutovacuumModel:
    """Autovacuum runs in, timestamped samples out; keeps the counts for /metrics."""

    def __init__(self, labels: Mapping[str, str] | None = None):
        self.rising = RisingSeries(labels)
        self.const = self.rising.const
        self.runs: dict[tuple[str, str, str], int] = {}  # (database, table, kind) -> runs
        self.seconds: dict[tuple[str, str, str], float] = {}

    def feed(self, run: pg_log.AutovacuumRun, end_ms: int) -> list[Sample]:
        out: list[Sample] = []
        key = (run.database, run.table, run.kind)
        labels = {"database": run.database, "table": run.table, "kind": run.kind}
        first = key not in self.runs
        if run.elapsed_seconds is not None:
            length = min(MAX_REGION_MS, max(1, round(run.elapsed_seconds * 1000)))
            start = end_ms - length
            last = self.rising.last(IN_PROGRESS, labels)
            if last is None or last < start - 1:
                self.rising.emit(out, IN_PROGRESS, labels, 0, start - 1)
            at = start
            while at < end_ms:
                self.rising.emit(out, IN_PROGRESS, labels, 1, at)
                at += HEARTBEAT_MS
            self.rising.emit(out, IN_PROGRESS, labels, 0, end_ms)
        if first:  # a 0 first, so that increase() sees the first run
            before = end_ms - max(1, round((run.elapsed_seconds or 0) * 1000)) - 1
            self.rising.emit(out, RUNS, labels, 0, before)
            self.rising.emit(out, DURATION, labels, 0, before)
        self.runs[key] = self.runs.get(key, 0) + 1
        self.seconds[key] = self.seconds.get(key, 0.0) + (run.elapsed_seconds or 0.0)
        self.rising.emit(out, RUNS, labels, self.runs[key], end_ms)
        self.rising.emit(out, DURATION, labels, round(self.seconds[key], 6), end_ms)
        if run.kind == "vacuum":
            table = {"database": run.database, "table": run.table}
            for field, name in (("tuples_removed", TUPLES_REMOVED), ("pages_removed", PAGES_REMOVED)):
                if field in run.fields:
                    self.rising.emit(out, name, table, run.fields[field], end_ms)
        return out

    def families(self) -> list:
        """The counters (the regions are only known once a run ended: they go by remote write alone)."""
        if not self.runs:
            return []
        const_names = sorted(self.const)
        const_values = [self.const[k] for k in const_names]
        fams: list[GaugeMetricFamily | CounterMetricFamily] = []
        for name, values in ((RUNS, self.runs), (DURATION, self.seconds)):
            c = catalogue.family(METRICS, name, const_names + ["database", "table", "kind"])
            for (database, table, kind), value in sorted(values.items()):
                c.add_metric(const_values + [database, table, kind], value)
            fams.append(c)
        return fams
