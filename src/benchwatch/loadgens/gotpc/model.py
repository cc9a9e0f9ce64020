"""One go-tpc TPC-C run as Prometheus series, by the rules of every run model (benchwatch.model.run)
and of one whose reports are placed at their arrival (benchwatch.model.arrival).

go-tpc prints, every ``--interval``, one ``[Current]`` line per transaction type
that finished a transaction in the interval (a *report*), and nothing at all for
an interval without any. Its lines carry no time, and each type's figures run
from that type's first transaction in the interval (go-tpc's measure.go), so:

- a report is placed at the wrapper's clock: the arrival of its first line, as
  ``benchwatch run`` recorded it in the run directory (``arrivals.log``); a saved
  output without it (``import``, ``attach``) is placed one interval per report;
- ``benchmark_progress_tps`` is the sum of ``Count`` over the types of the
  report (``_ERR`` lines, failed transactions, excluded) divided by the
  interval; ``benchmark_transactions_total`` adds those counts exactly;
- a silent interval is a stall: the tool-neutral stall series and alerts see
  it as they see pgbench's (``tick``);
- a report is complete when a line of the next report or any other line
  arrives, when the run ends, or (live) ``GROUP_GRACE_S`` after its first line:
  go-tpc prints a report's lines one after the other in microseconds.

What only go-tpc prints is named ``gotpc_*``: tpmC, per-type rate, latency
percentiles and errors, and the summary's figures per type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from benchwatch.loadgens.gotpc import output as gt
from benchwatch.model import arrival, run
from benchwatch.model.samples import Sample

# go-tpc's percentiles, and Max as quantile 1.
QUANTILES = (("0.5", "p50_s"), ("0.9", "p90_s"), ("0.95", "p95_s"), ("0.99", "p99_s"), ("0.999", "p999_s"),
             ("1", "max_s"))
NEW_ORDER = "NEW_ORDER"
REPORT_PREFIX = b"[Current] "

GOTPC_METRICS: dict[str, tuple[str, str]] = {
    "gotpc_progress_tps": ("gauge", "Transactions committed per second over the last report interval, by transaction type (txn: NEW_ORDER, PAYMENT, ORDER_STATUS, DELIVERY, STOCK_LEVEL): Count / interval; 0 for a type seen before that finished none (go-tpc runs only)."),
    "gotpc_progress_error_tps": ("gauge", "Transactions that failed per second over the last report interval, by type (go-tpc's *_ERR lines), once any failed."),
    "gotpc_progress_tpmc": ("gauge", "NEW_ORDER transactions committed per minute over the last report interval (TPC-C's tpmC, per minute as TPC-C defines it)."),
    "gotpc_progress_latency_seconds": ("gauge", "Latency percentile of the last report interval, by type and quantile (0.5, 0.9, 0.95, 0.99, 0.999; 1 is go-tpc's Max), as go-tpc printed it."),
    "gotpc_progress_latency_average_seconds": ("gauge", "Average latency of the last report interval, by type (go-tpc's Avg)."),
    "gotpc_progress_wait_seconds": ("gauge", "--wait: the mean keying or thinking time of the last report interval, by type and kind (keying, thinking)."),
    "gotpc_transactions_total": ("counter", "Transactions committed, by type: the sum of the reports' Count; the summary's figure at the end when larger."),
    "gotpc_errors_total": ("counter", "Transactions that failed, by type: the sum of the reports' *_ERR Count; the summary's at the end (which also counts those cut off by the end of the run)."),
    "gotpc_result_tpmc": ("gauge", "tpmC of the whole run from go-tpc's summary (NEW_ORDER per minute)."),
    "gotpc_result_efficiency_ratio": ("gauge", "go-tpc's efficiency of the whole run as a ratio: tpmC / (12.86 x warehouses)."),
    "gotpc_result_tps": ("gauge", "Transactions committed per second of the whole run, by type, from go-tpc's summary (TPM / 60)."),
    "gotpc_result_transactions": ("gauge", "Transactions committed in the whole run, by type, from go-tpc's summary."),
    "gotpc_result_errors": ("gauge", "Transactions failed in the whole run, by type, from go-tpc's summary (*_ERR)."),
    "gotpc_result_latency_seconds": ("gauge", "Latency percentile of the whole run, by type and quantile (1: Max), from go-tpc's summary."),
    "gotpc_result_latency_average_seconds": ("gauge", "Average latency of the whole run, by type, from go-tpc's summary."),
}

_COUNTERS = ("benchmark_transactions_total", "benchmark_progress_lines_total", "benchmark_unparsed_lines_total")


def _report_problem(report: gt.Report) -> str | None:
    """Why a report or summary line's figures cannot be counted (the parser already refuses nan and inf)."""
    if report.count > run.MAX_RATE:  # an int of any size: compared before any float() could overflow
        return "Count is absurd (over 1e12)"
    if report.count < 0:
        return f"Count is negative ({report.count})"
    return run.figure_problem("TPM", report.tpm) or run.figure_problem("Takes(s)", report.takes_s, run.MAX_TIME_S)


@dataclass
class _Report(arrival.Report):
    """The lines of one report, as they arrive."""

    tick: int
    current: list[gt.Current] = field(default_factory=list)
    waits: list[gt.WaitTime] = field(default_factory=list)


class GotpcRunModel(arrival.ArrivalReportModel[_Report]):
    tool = "gotpc"
    catalogue: ClassVar[Mapping[str, tuple[str, str]]] = {**run.METRICS, **GOTPC_METRICS}
    summary_gauges: ClassVar[Mapping[str, str]] = {"tps": "benchmark_result_tps",
                                                   "latency_avg_s": "benchmark_result_latency_seconds",
                                                   "transactions": "benchmark_result_transactions",
                                                   "tpmc": "gotpc_result_tpmc",
                                                   "efficiency_ratio": "gotpc_result_efficiency_ratio"}
    ended_with_the_run = run.ENDED_WITH_THE_RUN + ("gotpc_progress_tps", "gotpc_progress_error_tps",
                                                "gotpc_progress_tpmc", "gotpc_progress_latency_seconds",
                                                "gotpc_progress_latency_average_seconds", "gotpc_progress_wait_seconds")

    def __init__(self, run_id: str, **kw) -> None:
        super().__init__(run_id, **kw)
        self._counters = {name: 0.0 for name in _COUNTERS}
        self.committed: dict[str, float] = {}   # gotpc_transactions_total by type
        self.failed: dict[str, float] = {}      # gotpc_errors_total by type
        self.results: dict[str, gt.Summary] = {}  # the summary's lines by op (NEW_ORDER, NEW_ORDER_ERR)
        self.finished = False
        self.signals: list[str] = []

    def new_parser(self) -> gt.GotpcOutputParser:
        return gt.GotpcOutputParser()

    # -- lines and events ------------------------------------------------------------

    def is_report_line(self, raw: bytes) -> bool:
        return raw.rstrip(b"\r").startswith(REPORT_PREFIX)

    def feed(self, event: object, arrival_epoch: float | None = None) -> list[Sample]:
        if isinstance(event, (gt.Current, gt.Summary)) and (problem := _report_problem(event)) is not None:
            if isinstance(event, gt.Summary):
                return self._close() + self.unparsed(arrival_epoch, problem)
            return self._bad_report_line(problem, arrival_epoch)
        if isinstance(event, gt.Current):
            return self._report_line(event.tick, arrival_epoch, current=event)
        if isinstance(event, gt.WaitTime) and not event.summary and event.tick is not None:
            return self._report_line(event.tick, arrival_epoch, wait=event)
        if isinstance(event, gt.Unparsed) and event.text.startswith(REPORT_PREFIX.decode()):
            return self._bad_report_line(event.reason, arrival_epoch)
        out = self._close()
        if isinstance(event, gt.Unparsed):
            out += self.unparsed(arrival_epoch, event.reason, text=event.text)
        elif isinstance(event, gt.Summary):
            self.results[event.op] = event
        elif isinstance(event, gt.TpmC):
            out += self.summary_figure("tpmc", event.tpmc, arrival_epoch)
            if "tpmc" in self.summary:
                self.summary["efficiency_ratio"] = event.efficiency_pct / 100.0
        elif isinstance(event, gt.Finished):
            self.finished = True
        elif isinstance(event, gt.Signal):
            self.signals.append(event.name)
        elif isinstance(event, gt.ErrorLine) and event.severity == "error":
            self.errors.append(f"{event.kind}: {event.message}")
        return out

    # -- reports -----------------------------------------------------------------------

    def _report_line(self, tick: int, arrival_epoch: float | None, current: gt.Current | None = None,
                     wait: gt.WaitTime | None = None) -> list[Sample]:
        out: list[Sample] = []
        if self._open is not None and (self._open.tick != tick or self._later_report()):
            out = self._close()
        if self._open is None:
            self._open = _Report(arrival=self._line_arrival, tick=tick)
        if current is not None:
            self._open.current.append(current)
        if wait is not None:
            self._open.waits.append(wait)
        return out

    def report_empty(self, report: _Report) -> bool:
        return not report.current and not report.waits

    def report_samples(self, report: _Report, at: float, interval: float, had_bad_line: bool) -> list[Sample]:
        ok = [c for c in report.current if not c.error]
        bad = [c for c in report.current if c.error]
        committed = sum(c.count for c in ok)
        tps = committed / interval
        seen = {c.txn: c for c in ok}
        for txn in seen:
            self.committed.setdefault(txn, 0.0)
        gauges: list[tuple[str, float | None, Mapping[str, str] | None]] = []
        for txn in sorted(self.committed):
            c = seen.get(txn)
            gauges.append(("gotpc_progress_tps", (c.count if c else 0) / interval, {"txn": txn}))
            if c is not None:
                gauges.append(("gotpc_progress_latency_average_seconds", c.avg_s, {"txn": txn}))
                gauges += [("gotpc_progress_latency_seconds", getattr(c, attr), {"txn": txn, "quantile": q})
                           for q, attr in QUANTILES]
        failed = {c.txn: c.count for c in bad}
        for txn in failed:
            self.failed.setdefault(txn, 0.0)
        for txn in sorted(self.failed):
            gauges.append(("gotpc_progress_error_tps", failed.get(txn, 0) / interval, {"txn": txn}))
        new_order = seen.get(NEW_ORDER)
        gauges.append(("gotpc_progress_tpmc", (new_order.count if new_order else 0) / interval * 60.0, None))
        gauges += [("gotpc_progress_wait_seconds", w.avg_s, {"txn": w.txn, "kind": w.kind}) for w in report.waits]
        counted = sum(c.count * c.avg_s for c in ok)
        if committed:
            gauges.append((run.LATENCY, counted / committed, None))

        def per_type(ts: int, covered: float) -> list[Sample]:
            out = []
            for c in ok:
                self.committed[c.txn] += c.count
            for txn, n in failed.items():
                self.failed[txn] += n
            out += [self._set("gotpc_transactions_total", v, ts, {"txn": t}) for t, v in sorted(self.committed.items())]
            out += [self._set("gotpc_errors_total", v, ts, {"txn": t}) for t, v in sorted(self.failed.items())]
            return out

        return self.progress(at, True, None, tps, gauges=gauges, after=per_type,
                             counters=((run.UNPARSED, 0.0),) if had_bad_line else ())

    def report_interval(self, report: _Report) -> float:
        if not self.interval_s:
            # Not known from the argv (a saved output): the longest Takes of a report is about one interval.
            takes = max((c.takes_s for c in report.current), default=0.0)
            self.interval_s = max(round(takes), 1.0) if takes >= 0.5 else 1.0
        return float(self.interval_s)

    # -- the summary ---------------------------------------------------------------------

    def summarise(self) -> None:
        ok = [s for s in self.results.values() if not s.error]
        if ok:
            total = sum(s.count for s in ok)
            self.summary["transactions"] = total
            takes = max(s.takes_s for s in ok)
            if takes > 0:
                self.summary["tps"] = total / takes
            if total:
                self.summary["latency_avg_s"] = sum(s.count * s.avg_s for s in ok) / total

    def summary_counters(self, ts: int) -> list[Sample]:
        out = []
        for s in self.results.values():
            totals = self.failed if s.error else self.committed
            if s.count >= totals.get(s.txn, 0.0):
                totals[s.txn] = float(s.count)
        out += [self._set("gotpc_transactions_total", v, ts, {"txn": t}) for t, v in sorted(self.committed.items())]
        out += [self._set("gotpc_errors_total", v, ts, {"txn": t}) for t, v in sorted(self.failed.items())]
        return out

    def finish_extra(self, ts: int) -> list[Sample]:
        out = []
        for s in sorted(self.results.values(), key=lambda s: s.op):
            labels = {"txn": s.txn}
            if s.error:
                out.append(self._set("gotpc_result_errors", float(s.count), ts, labels))
                continue
            out.append(self._set("gotpc_result_transactions", float(s.count), ts, labels))
            out.append(self._set("gotpc_result_tps", s.tpm / 60.0, ts, labels))
            out.append(self._set("gotpc_result_latency_average_seconds", s.avg_s, ts, labels))
            out += [self._set("gotpc_result_latency_seconds", getattr(s, attr), ts, {**labels, "quantile": q})
                    for q, attr in QUANTILES]
        return out

