"""One sysbench run as Prometheus series, by the rules of the pgbench run model.

The series keep pgbench's names where they mean the same thing
(``benchmark_progress_tps``, ``benchmark_transactions_total``, ``benchmark_running``,
``benchmark_run_info``, ...; every one labelled ``tool="sysbench"``), so the
TPS-drop alert, the stall alert and the run dashboard need no second copy.
What only sysbench prints gets a name of the same family: queries per second
split by ``type`` (read/write/other), the latency percentile of each interval
with its ``quantile``, threads, errors and reconnects as counters.

sysbench prints rates; counters are rate x the seconds each line covers
(rounded), and the summary's exact totals replace them at the end.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import ClassVar

from benchwatch.loadgens.sysbench import output as sb
from benchwatch.model import run
from benchwatch.model.histogram import DEFAULT_BUCKETS
from benchwatch.model.run import RunModel
from benchwatch.model.samples import Sample

QUERY_TYPES = ("read", "write", "other")

SYSBENCH_METRICS: dict[str, tuple[str, str]] = {
    "benchmark_progress_qps": ("gauge", "Queries per second over the last progress interval, by type (read, write, other), as sysbench printed them (sysbench runs only)."),
    "benchmark_progress_latency_quantile_seconds": ("gauge", "The latency percentile sysbench printed for the last progress interval (lat (ms,95%); quantile label 0.95), sysbench runs only."),
    "benchmark_progress_threads": ("gauge", "Threads running in the last progress interval (sysbench thds)."),
    "benchmark_queries_total": ("counter", "Queries completed, by type (read, write, other): qps times the time each progress line covers; the exact figure from the summary at the end (sysbench runs only)."),
    "benchmark_errors_total": ("counter", "Query errors sysbench ignored and retried (err/s times the time each line covers; the summary's 'ignored errors' at the end)."),
    "benchmark_reconnects_total": ("counter", "Reconnects to the server (reconn/s times the time each line covers; the summary's 'reconnects' at the end)."),
    "benchmark_result_qps": ("gauge", "Queries per second of the whole run from sysbench's summary."),
    "benchmark_result_latency_quantile_seconds": ("gauge", "The latency percentile of the whole run from sysbench's summary (quantile label)."),
    "benchmark_result_latency_min_seconds": ("gauge", "Minimum latency of the whole run from sysbench's summary."),
    "benchmark_result_latency_max_seconds": ("gauge", "Maximum latency of the whole run from sysbench's summary."),
    "benchmark_result_latency_histogram_events": ("gauge", "sysbench --histogram at the end of the run, cumulative: events with a latency of at most le seconds (le on the same ladder as benchmark_latency_seconds, +Inf all events); histogram_quantile reads it."),
}

# Counters kept per query type by this model, not in RunModel._counters.
_TYPED = ("benchmark_queries_total",)
# Counters a sysbench run writes (pgbench's failure counters mean nothing here).
_COUNTERS = ("benchmark_transactions_total", "benchmark_progress_lines_total", "benchmark_errors_total",
             "benchmark_reconnects_total", "benchmark_unparsed_lines_total")


def _quantile(percentile: float) -> str:
    return f"{percentile / 100:g}"


class SysbenchRunModel(RunModel):
    tool = "sysbench"
    catalogue: ClassVar[Mapping[str, tuple[str, str]]] = {**run.METRICS, **SYSBENCH_METRICS}
    summary_gauges: ClassVar[Mapping[str, str]] = {"tps": "benchmark_result_tps", "qps": "benchmark_result_qps",
                      "latency_avg_s": "benchmark_result_latency_seconds",
                      "latency_min_s": "benchmark_result_latency_min_seconds",
                      "latency_max_s": "benchmark_result_latency_max_seconds",
                      "transactions": "benchmark_result_transactions"}
    ended_with_the_run = run.ENDED_WITH_THE_RUN + ("benchmark_progress_qps", "benchmark_progress_latency_quantile_seconds",
                                                "benchmark_progress_threads")
    exact_transactions_key = "transactions"
    line_time_re = re.compile(r"\[ *([0-9]+(?:\.[0-9]+)?)s ?\] ")

    def __init__(self, run_id: str, **kw) -> None:
        super().__init__(run_id, **kw)
        self._counters = {name: 0.0 for name in _COUNTERS}
        self._queries = {t: 0.0 for t in QUERY_TYPES}
        self.histogram: list[sb.HistogramBucket] = []

    def new_parser(self) -> sb.SysbenchOutputParser:
        return sb.SysbenchOutputParser()

    def feed(self, event: object, arrival_epoch: float | None = None) -> list[Sample]:
        if isinstance(event, sb.Progress):
            return self._sysbench_progress(event, arrival_epoch)
        if isinstance(event, sb.Unparsed):
            return self.unparsed(arrival_epoch, text=event.text)
        if isinstance(event, sb.Summary):
            return self.summary_figure(event.key, event.value, arrival_epoch)
        if isinstance(event, sb.HistogramBucket):
            problem = run.figure_problem("histogram count", event.count, math.inf) or run.figure_problem(
                "histogram value", event.value_s, math.inf)
            if problem is not None:
                return self.unparsed(arrival_epoch, problem)
            self.histogram.append(event)
        elif isinstance(event, sb.ErrorLine):
            self.errors.append(f"{event.severity}: {event.message}")
        return []

    def _sysbench_progress(self, event: sb.Progress, arrival_epoch: float | None) -> list[Sample]:
        if self.interval_s is None and not self.interval_from_args and "report_interval_s" in self.summary:
            self.interval_s = float(self.summary["report_interval_s"])  # type: ignore[arg-type]
        rates = {"read": event.read_qps, "write": event.write_qps, "other": event.other_qps}
        # Queries are counted like transactions: one unusable rate makes the line bad (tps, err/s and
        # reconn/s are checked by progress()).
        problem = run.figure_problem("tps", event.tps) or next(filter(None, (
            run.figure_problem(f"{kind} qps", value) for kind, value in (("total", event.qps), *rates.items()))), None) \
            or run.figure_problem("thds", event.threads)
        if problem is not None:
            return self.unparsed(arrival_epoch, problem, time_s=event.time_s, absolute=False)
        gauges: list[tuple[str, float | None, Mapping[str, str] | None]] = [
            ("benchmark_progress_qps", value, {"type": kind}) for kind, value in rates.items()]
        if event.percentile is not None:
            gauges.append(("benchmark_progress_latency_quantile_seconds", event.latency_s,
                           {"quantile": _quantile(event.percentile)}))
        gauges.append(("benchmark_progress_threads", float(event.threads), None))

        def queries(ts: int, covered: float) -> list[Sample]:
            out = []
            for kind, value in rates.items():
                if value is not None:
                    self._queries[kind] += round(value * covered)
                    out.append(self._set("benchmark_queries_total", self._queries[kind], ts, {"type": kind}))
            return out

        return self.progress(event.time_s, False, arrival_epoch, event.tps, gauges=gauges,
                             rates=(("benchmark_errors_total", event.errors_ps),
                                    ("benchmark_reconnects_total", event.reconnects_ps)), after=queries)

    def summary_counters(self, ts: int) -> list[Sample]:
        # The summary's exact totals, where they are not below what was already written (counters never go down).
        for key, name in (("ignored_errors", "benchmark_errors_total"), ("reconnects", "benchmark_reconnects_total")):
            value = self.summary.get(key)
            if isinstance(value, int) and value >= self._counters[name]:
                self._counters[name] = float(value)
        out = []
        for kind in QUERY_TYPES:
            value = self.summary.get(f"queries_{kind}")
            if isinstance(value, int) and value >= self._queries[kind]:
                self._queries[kind] = float(value)
            if self._queries[kind] or isinstance(value, int):
                out.append(self._set("benchmark_queries_total", self._queries[kind], ts, {"type": kind}))
        return out

    def finish_extra(self, ts: int) -> list[Sample]:
        out = []
        value = self.summary.get("latency_percentile_s")
        percentile = self.summary.get("percentile")
        if isinstance(value, float) and isinstance(percentile, float):
            out.append(self._set("benchmark_result_latency_quantile_seconds", value, ts, {"quantile": _quantile(percentile)}))
        return out + self._histogram(ts)

    def _histogram(self, ts: int) -> list[Sample]:
        """--histogram's table (hundreds of rows) folded onto the pgbench latency ladder: a few
        dozen series once per run, enough for histogram_quantile."""
        if not self.histogram:
            return []
        out = []
        for le in DEFAULT_BUCKETS:
            count = sum(b.count for b in self.histogram if b.value_s <= le)
            out.append(self._set("benchmark_result_latency_histogram_events", float(count), ts, {"le": f"{le:g}"}))
        total = sum(b.count for b in self.histogram)
        out.append(self._set("benchmark_result_latency_histogram_events", float(total), ts, {"le": "+Inf"}))
        return out


def info_from_summary(summary: dict[str, object]) -> dict[str, str]:
    """run_info labels of a saved sysbench output, which has no argv."""
    labels: dict[str, str] = {}
    for key, label in (("threads", "threads"), ("rate_limit_tps", "rate_limit_tps"), ("sysbench_version", "sysbench_version")):
        if key in summary:
            value = summary[key]
            labels[label] = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return labels
