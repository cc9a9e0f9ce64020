"""One go-ycsb run as Prometheus series, by the rules of every run model (benchwatch.model.run)
and of one whose reports are placed at their arrival (benchwatch.model.arrival).

go-ycsb prints, every ``--interval``, one line per operation type measured so far (a *report*), all
in one write, with figures **cumulative since each type's first operation** (its histograms are
never reset). Its lines carry no time. So:

- a report is placed at the wrapper's clock: the arrival of its first line (``arrivals.log``); a
  saved output without it (``import``, ``attach``) is placed one interval per report;
- an interval's rate is the difference of two reports' counts over the interval:
  ``benchmark_progress_tps`` is TOTAL's (every successful operation: YCSB's operations per second),
  ``benchmark_transactions_total`` is TOTAL's count itself, exactly;
- an interval's mean latency is the difference of the reports' sums (Avg x Count, Avg in whole
  microseconds: within a microsecond times the counts) over the difference of their counts; the
  percentiles, Min and Max can only be the run's so far, as printed (``goycsb_latency_seconds``);
- an interval with no operation prints the same lines again: a TPS of 0, not missing lines;
- a report is complete when a line sorting before the previous one, or any other line, arrives,
  when the run ends, or (live) ``GROUP_GRACE_S`` after its first line.

What only go-ycsb prints is named ``goycsb_*``, labelled ``op`` (``READ``, ``UPDATE``, ``INSERT``,
``SCAN``, ``READ_MODIFY_WRITE``, ``DELETE``, ``TOTAL``; a failed operation's type without its
``_ERROR``, in the error series) and, for latencies, ``quantile`` (0: Min, 1: Max).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from benchwatch.loadgens.goycsb import output as gy
from benchwatch.loadgens.goycsb.args import secret_property
from benchwatch.model import arrival, run
from benchwatch.model.samples import Sample

TOTAL = "TOTAL"

GOYCSB_METRICS: dict[str, tuple[str, str]] = {
    "goycsb_progress_ops": ("gauge", "Operations completed per second over the last report interval, by type (op: READ, UPDATE, INSERT, SCAN, READ_MODIFY_WRITE, DELETE, TOTAL): the difference of two reports' cumulative Count over the interval (go-ycsb runs only)."),
    "goycsb_progress_error_ops": ("gauge", "Operations that failed per second over the last report interval, by type (go-ycsb's <OP>_ERROR lines), once any failed."),
    "goycsb_progress_latency_average_seconds": ("gauge", "Mean latency of the operations of the last report interval, by type: the difference of the reports' Avg x Count over the difference of their counts."),
    "goycsb_latency_seconds": ("gauge", "Latency percentile of the run so far, by type and quantile (0: Min, 0.5, 0.9, 0.95, 0.99, 0.999, 0.9999, 1: Max), as go-ycsb printed it in the last report: cumulative since the type's first operation."),
    "goycsb_latency_average_seconds": ("gauge", "Average latency of the run so far, by type, as go-ycsb printed it in the last report (cumulative)."),
    "goycsb_operations_total": ("counter", "Operations completed, by type: go-ycsb's cumulative Count; the summary's at the end."),
    "goycsb_errors_total": ("counter", "Operations that failed, by type: the cumulative Count of go-ycsb's <OP>_ERROR lines; the summary's at the end."),
    "goycsb_result_ops": ("gauge", "Operations per second of the whole run, by type, from go-ycsb's summary (its OPS: Count / the time since the type's first operation)."),
    "goycsb_result_operations": ("gauge", "Operations completed in the whole run, by type, from go-ycsb's summary."),
    "goycsb_result_errors": ("gauge", "Operations failed in the whole run, by type, from go-ycsb's summary (<OP>_ERROR)."),
    "goycsb_result_latency_seconds": ("gauge", "Latency percentile of the whole run, by type and quantile (0: Min, 1: Max), from go-ycsb's summary."),
    "goycsb_result_latency_average_seconds": ("gauge", "Average latency of the whole run, by type, from go-ycsb's summary."),
    "goycsb_result_duration_seconds": ("gauge", "The run's length as go-ycsb printed it (Run finished, takes ...)."),
}


def _problem(f: gy.Figures) -> str | None:
    if f.count > run.MAX_RATE:
        return "Count is absurd (over 1e12)"
    return run.figure_problem("OPS", f.ops) or run.figure_problem("Takes(s)", f.takes_s, run.MAX_TIME_S)


@dataclass
class _Report(arrival.Report):
    lines: list[gy.Current] = field(default_factory=list)


class GoycsbRunModel(arrival.ArrivalReportModel[_Report]):
    tool = "goycsb"
    catalogue: ClassVar[Mapping[str, tuple[str, str]]] = {**run.METRICS, **GOYCSB_METRICS}
    summary_gauges: ClassVar[Mapping[str, str]] = {"tps": "benchmark_result_tps",
                                                   "latency_avg_s": "benchmark_result_latency_seconds",
                                                   "transactions": "benchmark_result_transactions",
                                                   "duration_s": "goycsb_result_duration_seconds"}
    ended_with_the_run = run.ENDED_WITH_THE_RUN + ("goycsb_progress_ops", "goycsb_progress_error_ops",
                                                "goycsb_progress_latency_average_seconds")

    def __init__(self, run_id: str, **kw) -> None:
        super().__init__(run_id, **kw)
        self.counts: dict[str, int] = {}        # the last report's cumulative Count by op as printed
        self.sums_us: dict[str, float] = {}     # ... and Avg x Count (microseconds)
        self.results: dict[str, gy.Summary] = {}
        self.properties: dict[str, str] = {}    # what go-ycsb printed it was given, secrets left out
        self.failures: list[gy.Failure] = []
        self.finished = False
        self.signals: list[str] = []

    def new_parser(self) -> gy.GoycsbOutputParser:
        return gy.GoycsbOutputParser()

    def is_report_line(self, raw: bytes) -> bool:
        return gy.report_line(raw)

    def feed(self, event: object, arrival_epoch: float | None = None) -> list[Sample]:
        if isinstance(event, gy.Current):
            problem = _problem(event)
            if problem is not None:
                return self._bad_report_line(problem, arrival_epoch)
            out: list[Sample] = []
            report = self._open
            if report is not None and (event.op <= report.lines[-1].op or self._later_report()):
                out = self._close()
            if self._open is None:
                self._open = _Report(arrival=self._line_arrival)
            self._open.lines.append(event)
            return out
        if isinstance(event, gy.Unparsed) and gy.report_line(event.text.encode()):
            return self._bad_report_line(event.reason, arrival_epoch)
        out = self._close()
        if isinstance(event, gy.Unparsed):
            out += self.unparsed(arrival_epoch, event.reason, text=event.text)
        elif isinstance(event, gy.Summary):
            problem = _problem(event)
            if problem is not None:
                return out + self.unparsed(arrival_epoch, f"summary: {problem}")
            self.results[event.op] = event
        elif isinstance(event, gy.Property):
            if not secret_property(event.key):
                self.properties[event.key] = event.value
        elif isinstance(event, gy.Finished):
            self.finished = True
            if event.took_s is not None:
                out += self.summary_figure("duration_s", event.took_s, arrival_epoch)
        elif isinstance(event, gy.Signal):
            self.signals.append(event.name)
        elif isinstance(event, gy.Failure):
            self.failures.append(event)
            self.errors.append(f"{event.kind}: {event.message}")
        return out

    # -- reports -----------------------------------------------------------------------

    def report_empty(self, report: _Report) -> bool:
        return not report.lines

    def report_interval(self, report: _Report) -> float:
        if not self.interval_s:
            # Not known from the argv (a saved output): the property go-ycsb printed, else its default.
            try:
                self.interval_s = float(self.properties.get("measurement.interval", "10"))
            except ValueError:
                self.interval_s = 10.0
            self.interval_s = self.interval_s if self.interval_s > 0 else 10.0
        return float(self.interval_s)

    def report_samples(self, report: _Report, at: float, interval: float, had_bad_line: bool) -> list[Sample]:
        gauges: list[tuple[str, float | None, Mapping[str, str] | None]] = []
        deltas: dict[str, int] = {}
        for line in report.lines:
            before, before_sum = self.counts.get(line.op, 0), self.sums_us.get(line.op, 0.0)
            now_sum = line.avg_s * 1e6 * line.count
            delta = max(line.count - before, 0)  # cumulative: never less, unless go-ycsb restarted its count
            deltas[line.op] = delta
            mean = max(now_sum - before_sum, 0.0) / delta / 1e6 if delta else None
            self.counts[line.op], self.sums_us[line.op] = line.count, now_sum
            labels = {"op": line.base}
            if line.error:
                gauges.append(("goycsb_progress_error_ops", delta / interval, labels))
                continue
            gauges.append(("goycsb_progress_ops", delta / interval, labels))
            gauges.append(("goycsb_progress_latency_average_seconds", mean, labels))
            gauges.append(("goycsb_latency_average_seconds", line.avg_s, labels))
            gauges += [("goycsb_latency_seconds", seconds, {**labels, "quantile": q}) for q, seconds in line.quantiles]
            if line.op == TOTAL and mean is not None:
                gauges.append((run.LATENCY, mean, None))
        tps = deltas.get(TOTAL, 0) / interval

        def totals(ts: int, covered: float) -> list[Sample]:
            return self._totals(ts)

        return self.progress(at, True, None, tps, gauges=gauges, after=totals,
                             counters=((run.UNPARSED, 0.0),) if had_bad_line else ())

    def _totals(self, ts: int) -> list[Sample]:
        out = []
        for op, count in sorted(self.counts.items()):
            name = "goycsb_errors_total" if op.endswith("_ERROR") else "goycsb_operations_total"
            out.append(self._set(name, float(count), ts, {"op": op.removesuffix("_ERROR")}))
        return out

    # -- the summary ---------------------------------------------------------------------

    def summarise(self) -> None:
        total = self.results.get(TOTAL)
        if total is not None:
            self.summary["transactions"] = total.count
            self.summary["tps"] = total.ops
            if total.count:
                self.summary["latency_avg_s"] = total.avg_s
                # Every successful operation's percentiles, for summary.json and sweep's report.
                quantiles = dict(total.quantiles)
                for key, q in (("latency_p50_s", "0.5"), ("latency_p95_s", "0.95"), ("latency_p99_s", "0.99")):
                    self.summary[key] = quantiles[q]

    def summary_counters(self, ts: int) -> list[Sample]:
        for s in self.results.values():
            if s.count >= self.counts.get(s.op, 0):
                self.counts[s.op] = s.count
        return self._totals(ts)

    def finish_extra(self, ts: int) -> list[Sample]:
        out = []
        for s in sorted(self.results.values(), key=lambda s: s.op):
            labels = {"op": s.base}
            if s.error:
                out.append(self._set("goycsb_result_errors", float(s.count), ts, labels))
                continue
            out.append(self._set("goycsb_result_operations", float(s.count), ts, labels))
            out.append(self._set("goycsb_result_ops", s.ops, ts, labels))
            out.append(self._set("goycsb_result_latency_average_seconds", s.avg_s, ts, labels))
            out += [self._set("goycsb_result_latency_seconds", seconds, ts, {**labels, "quantile": q})
                    for q, seconds in s.quantiles]
        return out
