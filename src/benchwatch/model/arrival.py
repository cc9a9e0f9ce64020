"""The run model of a tool whose report lines carry no time: reports placed at their arrival.

Some tools print, every interval, a *report* of several lines (one per operation or transaction type) all
at once, and no time on any of them. The wrapper records when each such line arrived (``arrivals.log``);
this model groups the lines into reports and places each report at the arrival of its first line, or,
for a saved output without arrivals (``import``, ``attach``), one interval per report from the start.

A report is complete when a line of the next report or any other line arrives, when the run ends, or,
live, ``GROUP_GRACE_S`` after its first line: a report's lines come out within microseconds of each
other, so a line arriving later belongs to a report of its own. A report line that cannot be read costs
its own figures only: the report it is part of is not cut in two (which would place the rest one interval
late) and carries the count of bad lines; alone, it is a sign of life at its arrival.

A tool's model says which lines are report lines (``is_report_line``), when an event opens a new report
(its ``feed``, with ``_later_report``), how long an interval is (``report_interval``) and what a complete
report writes (``report_samples``); what the reports' figures mean (per interval, or cumulative since the
start and turned into an interval's rate by difference) is its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from benchwatch.model.run import RunModel
from benchwatch.model.samples import Sample

GROUP_GRACE_S = 0.25


@dataclass
class Report:
    """The lines of one report, as they arrive: a tool's model keeps its lines in a subclass."""

    arrival: float | None  # the arrival of its first line, None in a saved output


R = TypeVar("R", bound=Report)


class ArrivalReportModel(RunModel, Generic[R]):
    """A run model whose report lines are placed at their arrival (module docstring)."""

    def __init__(self, run_id: str, **kw) -> None:
        super().__init__(run_id, **kw)
        self.reports = 0                        # reports closed so far
        self._open: R | None = None             # the report whose lines are arriving
        self._line_arrival: float | None = None  # the arrival of the line being fed, if it is a report line
        self._bad_in_report = False             # a line of the open report was bad: its count goes out with it

    # -- what a tool's model provides ------------------------------------------------

    def is_report_line(self, raw: bytes) -> bool:
        """Whether a line is a report line (one the wrapper recorded the arrival of)."""
        raise NotImplementedError

    def report_interval(self, report: R) -> float:
        """The interval of the reports: the argv's, else learned from what the output printed (sets interval_s)."""
        raise NotImplementedError

    def report_empty(self, report: R) -> bool:
        """Whether a report holds nothing to write."""
        raise NotImplementedError

    def report_samples(self, report: R, at: float, interval: float, had_bad_line: bool) -> list[Sample]:
        """The samples of a complete report placed at ``at`` (epoch seconds)."""
        raise NotImplementedError

    def summarise(self) -> None:
        """Hook: the run's summary figures (``self.summary``) from what the output printed at its end."""

    # -- lines ---------------------------------------------------------------------------

    def feed_line(self, line: bytes | str, arrival_epoch: float | None = None,
                  events: Iterable[object] | None = None) -> list[Sample]:
        raw = line.encode("utf-8", "replace") if isinstance(line, str) else line
        self._line_arrival = None
        if self.is_report_line(raw) and self.arrivals:
            self._line_arrival = self.arrivals.pop(0)  # the wrapper's clock: when this line arrived
        return super().feed_line(line, arrival_epoch, events)

    def tick(self, now_epoch: float) -> list[Sample]:
        out: list[Sample] = []
        if self._open is not None and self._open.arrival is not None and now_epoch - self._open.arrival >= GROUP_GRACE_S:
            out = self._close()
        return out + super().tick(now_epoch)

    def finish(self, end_epoch: float | None, exit_code: int | None) -> list[Sample]:
        out = []
        for event in self.parser.flush():
            out.extend(self.feed(event, end_epoch))
        out.extend(self._close())
        self.summarise()
        return out + super().finish(end_epoch, exit_code)

    # -- reports -----------------------------------------------------------------------

    def _later_report(self) -> bool:
        """Whether this line arrived well after the open report's first: a report of its own even when its
        place in the sort order would let it join the open one (a report of only some types after one of
        others, as during a lock), which the order alone cannot tell apart when both reports are read in
        one pass."""
        first, this = self._open.arrival if self._open is not None else None, self._line_arrival
        return first is not None and this is not None and this - first >= GROUP_GRACE_S

    def _bad_report_line(self, reason: str, arrival_epoch: float | None) -> list[Sample]:
        """A report line that cannot be read: counted with the open report, else a sign of life at its arrival."""
        if self._open is not None:
            self.count_bad_line(reason)
            self._bad_in_report = True
            return []
        arrival = self._line_arrival
        return self.unparsed(arrival_epoch, reason, time_s=arrival, absolute=True if arrival is not None else None)

    def _close(self) -> list[Sample]:
        report, self._open = self._open, None
        had_bad_line, self._bad_in_report = self._bad_in_report, False
        if report is None or self.report_empty(report):
            return []
        interval = self.report_interval(report)
        self.reports += 1
        if report.arrival is not None:
            at = report.arrival
        else:  # no arrival recorded (a saved output): one interval per report
            if self.start_epoch is None:
                self.start_epoch = 0.0
            at = self.start_epoch + self.reports * interval
        return self.report_samples(report, at, interval, had_bad_line)

    def place_line(self, time_s: float, absolute: bool, arrival_epoch: float | None) -> tuple[int, float]:
        ts, _ = super().place_line(time_s, absolute, arrival_epoch)
        # A report covers exactly one interval, whatever went silent before it: the transactions it counts
        # are its own figures, tps x interval.
        return ts, float(self.interval_s or 1.0)

    # -- a saved output ------------------------------------------------------------------

    @classmethod
    def saved_output_end(cls, lines: Sequence[bytes], run_id: str, default_interval_s: float) -> float | None:
        """The time of a saved output's last report (elapsed seconds, one interval per report), read by a model
        of its own; None without a report."""
        probe = cls(run_id, start_epoch=0.0)
        for line in lines:
            probe.feed_line(line)
        probe.finish(None, None)
        return probe.reports * (probe.interval_s or default_interval_s) if probe.reports else None
