"""One benchmark run as Prometheus series: a load generator's events in, timestamped samples out.

The tool-neutral part of every run model: where a progress line lands in time,
how transactions are counted, stalls, the end of the run and its staleness
markers. Each load generator (benchwatch.loadgens.<tool>) subclasses
:class:`RunModel` with its parser and the events only it prints; the same
model serves a live run (the exporter follows the run directory and
remote-writes what ``feed``/``tick``/``finish`` return) and an import of a
saved output, so a backfilled run is the same series as a live one.

Rules that make the stored curve trustworthy:
- each progress line is exactly one sample of each progress series, at
  the tool's own time (start of its clock + elapsed);
- timestamps are strictly increasing per run: a line whose time is not after
  the previous sample (old pgbench's catch-up bursts repeat the elapsed time)
  is placed 1 ms after it;
- transactions are counted as tps x the time the line covers, so catch-up lines
  that cover no time add nothing (no double counting);
- while a run is active and no line arrived for 1.5 intervals, ``tick`` writes
  TPS 0 once per interval (a stall is a drop, not a flat line);
- a bad line (not understood, or with a figure that is nan, inf, negative or
  absurd) costs that line only: no sample of its figures, counted in
  ``benchmark_unparsed_lines_total`` with its line number and reason
  (``bad_lines``), never an exception; and it is a sign of life, placed at its
  own time when it shows one (else at its arrival), so it opens no stall.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from benchwatch.model.samples import STALE_NAN, Sample, sample
from benchwatch.util import bounds

# Series every load generator's run writes: name -> (type, help). With each tool's own
# catalogue (benchwatch.loadgens.<tool>), the source of exposition, OpenMetrics and docs.
METRICS: dict[str, tuple[str, str]] = {
    "benchmark_progress_tps": ("gauge", "Transactions per second over the last progress interval, as the load generator printed it; 0 while the run is stalled."),
    "benchmark_progress_latency_seconds": ("gauge", "Average transaction latency over the last progress interval."),
    "benchmark_progress_interval_seconds": ("gauge", "The progress reporting interval of the run (pgbench -P, sysbench --report-interval)."),
    "benchmark_progress_last_line_timestamp_seconds": ("gauge", "Load generator time of the last progress line received, as a Unix timestamp (a line benchwatch could not read counts too: it is a sign of life)."),
    "benchmark_progress_lines_total": ("counter", "Progress lines received."),
    "benchmark_progress_stalled": ("gauge", "1 while an active run has printed no progress line for more than 1.5 intervals."),
    "benchmark_transactions_total": ("counter", "Transactions completed: tps times the time each progress line covers; the exact figure from the summary at the end."),
    "benchmark_aborted_clients_total": ("counter", "Clients that aborted."),
    "benchmark_running": ("gauge", "1 while the run is active, 0 once it ended."),
    "benchmark_exit_code": ("gauge", "The load generator's exit code, once the run ended."),
    "benchmark_run_ended_early": ("gauge", "Once the run ended: 1 when it ended early or badly (a non-zero exit code, aborted clients, or its last progress line more than two intervals before its -T/--time), else 0; benchwatch explain says why."),
    "benchmark_run_info": ("gauge", "Run metadata in labels; always 1."),
    "benchmark_run_start_timestamp_seconds": ("gauge", "Start of the load generator's clock for the run, as a Unix timestamp."),
    "benchmark_result_tps": ("gauge", "TPS of the whole run from the load generator's summary."),
    "benchmark_result_latency_seconds": ("gauge", "Average latency of the whole run from the load generator's summary."),
    "benchmark_result_transactions": ("gauge", "Transactions actually processed, from the load generator's summary."),
    "benchmark_unparsed_lines_total": ("counter", "Output lines benchwatch could not parse (malformed, truncated, not UTF-8, or a figure nan, inf, negative or absurd); they are kept in the raw output."),
}

# The names the base model writes (one place, so a rename is one edit).
TPS = "benchmark_progress_tps"
LATENCY = "benchmark_progress_latency_seconds"
INTERVAL = "benchmark_progress_interval_seconds"
LAST_LINE = "benchmark_progress_last_line_timestamp_seconds"
LINES = "benchmark_progress_lines_total"
STALLED = "benchmark_progress_stalled"
TRANSACTIONS = "benchmark_transactions_total"
ABORTED = "benchmark_aborted_clients_total"
RUNNING = "benchmark_running"
EXIT_CODE = "benchmark_exit_code"
ENDED_EARLY = "benchmark_run_ended_early"
RUN_INFO = "benchmark_run_info"
START = "benchmark_run_start_timestamp_seconds"
UNPARSED = "benchmark_unparsed_lines_total"

STALL_FACTOR = 1.5
# A run whose last progress line came more than this many intervals before its -T/--time ended early.
EARLY_INTERVALS = 2.0


def ended_short(last_elapsed_s: float | None, planned_s: float | None, interval_s: float | None) -> bool:
    """Whether a run's last progress line (seconds into it) came too early for the length it asked for."""
    return (last_elapsed_s is not None and planned_s is not None
            and last_elapsed_s < planned_s - EARLY_INTERVALS * (interval_s or 1.0))


def ended_early(exit_code: int | None, aborted: float, last_elapsed_s: float | None, planned_s: float | None,
                interval_s: float | None) -> bool:
    """Early or badly: a non-zero exit code, aborted clients, or an end short of the planned length
    (runs without an exit code, attach and import, are judged by the rest)."""
    return exit_code not in (None, 0) or aborted > 0 or ended_short(last_elapsed_s, planned_s, interval_s)


def planned_length(info_labels: Mapping[str, str]) -> float | None:
    """The run's -T/--time as its run info says (the tool's argv read), else None."""
    try:
        value = float(info_labels.get("duration_seconds") or "nan")
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None

# Beyond these a figure is no measurement but a damaged line, like nan or inf (benchwatch.util.bounds:
# the same limits for import, attach, run and the exporter).
MAX_RATE = bounds.MAX_RATE
MAX_TIME_S = bounds.MAX_TIME_S
figure_problem = bounds.figure_problem
# Bad lines remembered with their number and reason (all of them are counted).
BAD_LINES_KEPT = 1000
# How far after the previous line a bad line's own time may place it (in intervals); beyond, or
# before it, the time is as damaged as the rest, and the line is alive at its arrival only.
BAD_LINE_REACH = 60

# Progress series that end with the run (staleness markers after its last line).
ENDED_WITH_THE_RUN = (TPS, LATENCY, STALLED)


@dataclass
class _Series:
    name: str
    labels: dict[str, str]
    pairs: tuple[tuple[str, str], ...] = ()   # labels as a Sample carries them
    value: float = 0.0
    seen: bool = False
    ts: int = 0  # newest sample written, in ms


class RunModel:
    """The run of one load generator. Subclasses (one per tool) set ``tool``, their catalogue
    and parser, and turn their parser's events into calls of :meth:`progress`,
    :meth:`unparsed` and :meth:`client_aborted`, keeping what the summary says in ``summary``.

    Every series carries ``run_id`` and ``tool``, so one query, alert or panel
    on a shared name serves every tool.
    """

    tool: ClassVar[str] = ""
    catalogue: ClassVar[Mapping[str, tuple[str, str]]] = METRICS
    # summary key -> gauge written from it at the end of the run
    summary_gauges: ClassVar[Mapping[str, str]] = {}
    ended_with_the_run: ClassVar[tuple[str, ...]] = ENDED_WITH_THE_RUN
    exact_transactions_key: ClassVar[str] = "transactions"  # the summary's exact count of transactions
    # The time a progress line shows, read from a line the parser refused (group 1: seconds,
    # elapsed or above 1e8 epoch): a bad line with one is a sign of life at that time.
    line_time_re: ClassVar[re.Pattern[str] | None] = None

    def __init__(self, run_id: str, *, info_labels: Mapping[str, str] | None = None,
                 interval_s: float | None = None, start_epoch: float | None = None):
        self.run_id = run_id
        self.info_labels = {k: v for k, v in (info_labels or {}).items() if k not in ("run_id", "tool")}
        self.interval_s = interval_s
        self.interval_from_args = self.interval_s is not None
        # Start of the tool's clock; None until known (or when what was recorded is no time: a damaged meta.json).
        self.start_epoch = bounds.epoch_or_none(start_epoch)
        self.active = True
        self.stalled = False
        self.last_ts_ms: int | None = None        # newest sample written for this run
        self.last_line_ts_ms: int | None = None   # tool time of the last real progress line
        self.last_line_time_s: float | None = None
        self.last_epoch_line_s: float | None = None  # the Unix time of the last progress line that showed one
        self.last_stall_sample_ms: int | None = None
        self.last_life_ms: int | None = None      # the last sign of life: a line's time, or a bad line's arrival
        self.line_number = 0                      # lines fed so far (the number of the current one)
        # Where each file of a run directory began: (line_number before its first line, file name), for
        # telling a bad line by its own file's line number (a run's stderr and stdout are fed one after the other).
        self.sources: list[tuple[int, str]] = []
        self.bad_lines: list[tuple[int, str]] = []  # (line number, reason), the first BAD_LINES_KEPT
        self.summary: dict[str, object] = {}
        self.errors: list[str] = []
        self.values: dict[tuple[str, tuple[tuple[str, str], ...]], _Series] = {}
        self._by_given: dict[object, _Series] = {}   # _set's cache: (name, extra labels as given) -> series
        # Live, the heartbeat series (running, run info, start, interval, last line) go with every line: they say
        # the run is alive now. A run read from a file is over, and a query finds them within Prometheus' 5-minute
        # lookback: there (replay) they go at most this often, with the first line and at the end; a 12-hour
        # import then writes 28 % fewer samples.
        self.heartbeat_every_ms: int | None = None
        self._last_heartbeat_ms: int | None = None
        self.parser = self.new_parser()
        # Arrival epochs of progress lines whose tool prints no time (benchwatch.record.rundir.ARRIVALS), in order.
        self.arrivals: list[float] = []
        self._counters = {name: 0.0 for name in self.catalogue if name.endswith("_total")}

    @property
    def interval_s(self) -> float | None:
        """The progress interval (seconds), None until known."""
        return self._interval_s

    @interval_s.setter
    def interval_s(self, seconds: float | None) -> None:
        # From the argv, a summary or the spacing of lines: a damaged one (0, nan, 1e309) is none, not
        # a stall threshold or a reach of many years (benchwatch.util.bounds).
        self._interval_s = bounds.interval_or_none(seconds)

    # -- what a tool's model provides ------------------------------------------

    def new_parser(self) -> Any:
        """The tool's output parser: ``feed(line) -> events`` and ``flush() -> events``."""
        raise NotImplementedError

    def feed(self, event: object, arrival_epoch: float | None = None) -> list[Sample]:
        """One parser event in, its samples out."""
        raise NotImplementedError

    def heartbeat_extra(self, ts: int) -> list[Sample]:
        """Hook: the tool's own series repeated with every heartbeat (e.g. statements per transaction)."""
        return []

    def summary_counters(self, ts: int) -> list[Sample]:
        """Hook: counters the summary gives exactly (written before the other counters' final values)."""
        return []

    def finish_extra(self, ts: int) -> list[Sample]:
        """Hook: the tool's own end-of-run series."""
        return []

    def add_arrivals(self, epochs: Iterable[float]) -> None:
        """The wrapper's arrival times of the next progress lines (a tool whose lines carry no time uses them)."""
        self.arrivals.extend(epochs)

    # -- counts -------------------------------------------------------------------

    @property
    def progress_lines(self) -> int:
        return int(self._counters[LINES])

    @property
    def unparsed_lines(self) -> int:
        return int(self._counters[UNPARSED])

    # -- inputs ---------------------------------------------------------------

    def feed_line(self, line: bytes | str, arrival_epoch: float | None = None,
                  events: Iterable[object] | None = None) -> list[Sample]:
        """One line of the tool's output. ``events``: what ``self.parser`` made of it, when the
        caller fed the parser already (an import reads a file once to cut it into runs)."""
        self.line_number += 1
        if arrival_epoch is not None and not 0.0 <= arrival_epoch <= bounds.MAX_EPOCH_S:
            arrival_epoch = None  # a damaged meta.json's end, which a rebuild gives as the lines' arrival
        out: list[Sample] = []
        try:
            for event in (self.parser.feed(line) if events is None else events):
                out.extend(self.feed(event, arrival_epoch))
        except Exception as e:  # a line this model fails on costs that line, never the run
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
            out.extend(self.unparsed(arrival_epoch, f"not read ({type(e).__name__}: {e})", text=text))
        return out

    def unparsed(self, arrival_epoch: float | None, reason: str = "not understood", *, text: str | None = None,
                 time_s: float | None = None, absolute: bool | None = None) -> list[Sample]:
        """A bad line: counted, remembered by number with its reason, and a sign of life: at the time it
        shows (``time_s``, else read from ``text`` by ``line_time_re``) or, live, at its arrival."""
        if reason == "not understood" and text is not None and "\ufffd" in text:
            reason = "not UTF-8"
        self.count_bad_line(reason)
        if time_s is None and text is not None and self.line_time_re is not None:
            m = self.line_time_re.match(text)
            if m:
                try:
                    time_s = float(m.group(1))
                except ValueError:
                    time_s = None
        if time_s is not None and not (math.isfinite(time_s) and 0 <= time_s <= MAX_TIME_S):
            time_s = None
        if absolute is None:
            absolute = time_s is not None and time_s > 1e8
        elapsed: float | None = None
        if time_s is not None and self.start_epoch is not None:
            # A bad line never sets the run's clock, nor moves it far: its time is trusted only
            # after the previous line's and within BAD_LINE_REACH intervals of it.
            elapsed = time_s - self.start_epoch if absolute else time_s
            previous = self.last_line_time_s if self.last_line_time_s is not None else 0.0
            if not previous < elapsed <= previous + BAD_LINE_REACH * (self.interval_s or 1.0):
                elapsed = None
        if time_s is not None and elapsed is not None and self.placement_problem(time_s, bool(absolute), arrival_epoch):
            elapsed = None
        if time_s is not None and elapsed is not None:
            line_ms, _ = self._line_ms(time_s, absolute, arrival_epoch)
            self.last_line_time_s = elapsed  # its interval is lost, not counted by the next line
            ts = self._next_ts(line_ms)
            self.last_line_ts_ms = ts
            life = ts
        elif arrival_epoch is not None and self.last_line_ts_ms is not None:
            # Alive when it arrived; its samples go right after the newest, not at its arrival, which
            # in a backlog read late is after the tool's time of the lines that follow it.
            ts = self._next_ts(self.last_ts_ms or 0)
            life = int(arrival_epoch * 1000)
        else:
            return self._emit_counters([UNPARSED], arrival_epoch)  # counted; no run clock to be alive on yet
        self.last_life_ms = max(self.last_life_ms or life, life)
        self.last_stall_sample_ms = None
        out = self._emit_counters([UNPARSED], None, ts=ts)
        out.extend(self._unstall(ts))
        out.extend(self._heartbeat(ts))
        return out

    def summary_figure(self, key: str, value: object, arrival_epoch: float | None) -> list[Sample]:
        """A figure of the summary, kept in ``summary`` unless it is nan, inf, negative or beyond a float:
        then its line is bad (a figure written at the end must not be one that cannot be)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = figure_problem(key, value, math.inf)
            if problem is not None:
                return self.unparsed(arrival_epoch, f"summary: {problem}")
        self.summary[key] = value
        return []

    def count_bad_line(self, reason: str) -> None:
        """A bad line counted and remembered, its samples left to the caller (a go-tpc report it was part of)."""
        self._counters[UNPARSED] += 1
        if len(self.bad_lines) < BAD_LINES_KEPT:
            self.bad_lines.append((self.line_number, reason))

    def where(self, number: int) -> tuple[str | None, int]:
        """The file (when the lines came from several) and line in it of the ``number``-th line fed."""
        name, first = None, 0
        for offset, source in self.sources:
            if number > offset:
                name, first = source, offset
        return name, number - first

    def bad_line_notes(self, limit: int = 5) -> list[str]:
        """The bad lines in short, for ``benchwatch:`` lines on stderr: the first ``limit`` by number and reason."""
        notes = [f"line {number}: {reason}; not read (kept in the raw output)" for number, reason in self.bad_lines[:limit]]
        rest = self.unparsed_lines - len(notes)
        if rest > 0:
            notes.append(f"... and {rest} more line{'s' if rest > 1 else ''} not read")
        return notes

    def client_aborted(self, message: str, arrival_epoch: float | None) -> list[Sample]:
        self._counters[ABORTED] += 1
        self.errors.append(message)
        return self._emit_counters([ABORTED], arrival_epoch)

    def progress(self, time_s: float, absolute: bool, arrival_epoch: float | None, tps: float, *,
                 gauges: Iterable[tuple[str, float | None, Mapping[str, str] | None]] = (),
                 counters: Iterable[tuple[str, float | None]] = (),
                 rates: Iterable[tuple[str, float | None]] = (),
                 after: Callable[[int, float], list[Sample]] | None = None) -> list[Sample]:
        """One progress line: TPS and the tool's gauges at the line's own time, transactions counted
        over the time the line covers. ``gauges``: (name, value or None, extra labels);
        ``counters``: (name, increment); ``rates``: (counter name, per-second rate) counted
        like transactions; ``after(ts, covered)``: the tool's own samples of the line, written
        after the counters.

        A figure that is counted (tps, counters, rates) and is nan, inf, negative or absurd
        makes the line bad (:meth:`unparsed`: pgbench prints "NaN tps" for a zero-length
        interval, sysbench "nan" where it divided by zero). A gauge alone that is inf, negative
        or nan is left out, but for nan in an interval without transactions (0 tps), which has
        no latency to show: pgbench before 12 prints ``lat -nan`` there, kept as nan."""
        counters, rates = list(counters), list(rates)
        problem = (figure_problem("time", time_s, MAX_TIME_S) or figure_problem("tps", tps)
                   or next(filter(None, (figure_problem(n.removesuffix("_total"), v) for n, v in (*counters, *rates))), None))
        if problem is None:
            problem = self.placement_problem(time_s, absolute, arrival_epoch)
        if problem is not None:
            usable_time = figure_problem("time", time_s, MAX_TIME_S) is None
            return self.unparsed(arrival_epoch, problem, time_s=time_s if usable_time else None,
                                 absolute=absolute if usable_time else None)
        ts, covered = self.place_line(time_s, absolute, arrival_epoch)
        if absolute:
            self.last_epoch_line_s = time_s
        self.last_life_ms = max(self.last_life_ms or ts, ts)
        out = [self._set(TPS, tps, ts)]
        out.extend(self._unstall(ts))
        for name, value, labels in gauges:
            if value is not None and (0 <= value < math.inf or (math.isnan(value) and tps == 0)):
                out.append(self._set(name, value, ts, labels or None))
        done = tps * covered
        if math.isfinite(done):
            self._counters[TRANSACTIONS] += round(done)
        self._counters[LINES] += 1
        changed = [TRANSACTIONS, LINES]
        for name, increment in counters:
            if increment is not None:
                self._counters[name] += increment
                changed.append(name)
        for name, rate in rates:
            if rate is not None:
                done = rate * covered
                if math.isfinite(done):
                    self._counters[name] += round(done)
                changed.append(name)
        out.extend(self._emit_counters(changed, None, ts=ts))
        if after is not None:
            out.extend(after(ts, covered))
        out.extend(self._heartbeat(ts))
        return out

    def tick(self, now_epoch: float) -> list[Sample]:
        """Called by a live follower several times per interval: writes stall zeros."""
        if not self.active or self.start_epoch is None or self.last_line_ts_ms is None:
            return []
        interval_ms = (self.interval_s or 1.0) * 1000.0
        now_ms = int(now_epoch * 1000)
        last_life_ms = max(self.last_line_ts_ms, self.last_life_ms or 0)
        if now_ms - last_life_ms <= STALL_FACTOR * interval_ms:
            return []
        if self.last_stall_sample_ms is not None and now_ms - self.last_stall_sample_ms < interval_ms:
            return []
        self.stalled = True
        # At the time the stall became due (1.5 intervals after the last sign of life, then one interval
        # after the previous zero), not at the follower's now: a line that arrived just before this tick
        # and is not read yet keeps its own time instead of going 1 ms after a zero written later than it.
        due_ms = (self.last_stall_sample_ms + interval_ms if self.last_stall_sample_ms is not None
                  else last_life_ms + STALL_FACTOR * interval_ms)
        ts = self._next_ts(int(min(now_ms, max(due_ms, now_ms - interval_ms))))
        self.last_stall_sample_ms = ts
        out = [self._set(TPS, 0.0, ts), self._set(STALLED, 1.0, ts)]
        out.extend(self._heartbeat(ts))
        return out

    def finish(self, end_epoch: float | None, exit_code: int | None) -> list[Sample]:
        """The run ended: flush the parser, write the summary, running=0."""
        out: list[Sample] = []
        end_epoch = bounds.epoch_or_none(end_epoch)  # a damaged meta.json's ended_at ends the run at its last sample
        if type(exit_code) is not int or not -(1 << 31) <= exit_code < 1 << 31:
            exit_code = None  # as damaged (meta.json): no exit code known
        for event in self.parser.flush():
            out.extend(self.feed(event, end_epoch))
        flushed = len(out)
        if self.start_epoch is None:
            # Nothing placed the run in time (no progress line): anchor it at its end.
            self.start_epoch = end_epoch if end_epoch is not None else 0.0
        end_ms = int(end_epoch * 1000) if end_epoch is not None else (self.last_ts_ms or int(self.start_epoch * 1000))
        ts = self._next_ts(end_ms)
        self.active = False
        processed = self.summary.get(self.exact_transactions_key)
        if isinstance(processed, (int, float)) and processed >= self._counters[TRANSACTIONS]:
            self._counters[TRANSACTIONS] = float(processed)
        if self.stalled:
            out.append(self._set(STALLED, 0.0, ts))
        out.extend(self.summary_counters(ts))
        out.extend(self._emit_counters(list(self._counters), None, ts=ts))
        for key, name in self.summary_gauges.items():
            value = self.summary.get(key)
            if isinstance(value, (int, float)):
                out.append(self._set(name, float(value), ts))
        out.extend(self.finish_extra(ts))
        if exit_code is not None:
            out.append(self._set(EXIT_CODE, float(exit_code), ts))
        early = ended_early(exit_code, self._counters.get(ABORTED, 0.0), self.last_line_time_s,
                            planned_length(self.info_labels), self.interval_s)
        out.append(self._set(ENDED_EARLY, 1.0 if early else 0.0, ts))  # the BenchmarkEndedEarly alert's
        out.extend(self._heartbeat(ts, running=0.0))
        # A summary figure that is nan or inf (a damaged summary line) is no figure: left out.
        return out[:flushed] + [s for s in out[flushed:] if math.isfinite(s.value)]

    def end_markers(self) -> list[Sample]:
        """For Prometheus only, after finish(): staleness markers that end the progress curves with the run.

        A marker goes one progress interval after the curves' newest sample, as
        Prometheus's scrape staleness would put it: a range query looks up each
        step's latest sample, so a marker 1 ms after the last line hid that line
        from every step not falling in that millisecond. Prometheus needs it only
        after the series' own samples, so it may precede finish()'s when the run
        ended late; the run's clock (last_ts_ms, an import's saved end) is untouched.
        """
        ended = [s for s in self.values.values() if s.name in self.ended_with_the_run]
        if not ended:
            return []
        interval_ms = int(round((self.interval_s or 1.0) * 1000))
        stale_ts = max(s.ts for s in ended) + interval_ms
        return [Sample(name, labels, STALE_NAN, stale_ts)
                for (name, labels) in self.values if name in self.ended_with_the_run]

    # -- internals ------------------------------------------------------------

    def _unstall(self, ts: int) -> list[Sample]:
        if not self.stalled:
            return []
        self.stalled = False
        return [self._set(STALLED, 0.0, ts)]

    def _line_ms(self, time_s: float, absolute: bool, arrival_epoch: float | None) -> tuple[int, float]:
        """Where a line's time falls (ms, at the tool's own time) and its elapsed seconds; the clock set by the first."""
        if absolute:
            if self.start_epoch is None:
                self.start_epoch = time_s - (self.interval_s or 1.0)
            return int(round(time_s * 1000)), time_s - self.start_epoch
        if self.start_epoch is None:
            # Calibrate the tool's clock from the first line's arrival.
            self.start_epoch = (arrival_epoch if arrival_epoch is not None else 0.0) - time_s
        return int(round((self.start_epoch + time_s) * 1000)), time_s

    def placement_problem(self, time_s: float, absolute: bool, arrival_epoch: float | None) -> str | None:
        """Why a line's time cannot place it (its Unix time, or the run's start it would set, before 1970 or
        past 2286): the same number that makes a run id and a sample's int64 timestamp."""
        start: float | None
        if absolute:
            at = time_s
            start = self.start_epoch if self.start_epoch is not None else time_s - (self.interval_s or 1.0)
        else:
            start = self.start_epoch
            if start is None:
                if arrival_epoch is None:
                    return None  # placed later (import anchors the run where it is told)
                start = arrival_epoch - time_s
            at = start + time_s
        problem = bounds.epoch_problem("the line's time", at)
        if problem is None and absolute:
            problem = bounds.future_problem("the line's time", at)
        if problem is None and start is not None and self.start_epoch is None:
            problem = bounds.epoch_problem("the run's start", start)
        if problem is None:
            # A jump of years is a damaged number: from the line's arrival (live: a tool prints no time it has
            # not reached; a backlog read late arrives after its time, never before), else from the run's
            # previous line that showed a Unix time, or, elapsed, from its previous line (or start). A clock
            # going back is not judged here: a saved output's runs are cut there (record.replay.split_runs).
            if arrival_epoch is not None:
                step, since = at - arrival_epoch, "its arrival"
            elif absolute:
                step = at - self.last_epoch_line_s if self.last_epoch_line_s is not None else 0.0
                since = "the run's previous line"
            else:
                step, since = time_s - max(self.last_line_time_s or 0.0, 0.0), "the run's previous line"
            if step > bounds.MAX_STEP_S:
                problem = f"the line's time is {step:.0f} s after {since} (more than a week: damaged)"
        return problem

    def place_line(self, time_s: float, absolute: bool, arrival_epoch: float | None) -> tuple[int, float]:
        """A progress line's timestamp (ms, at the tool's own time) and the seconds it covers."""
        line_ms, elapsed = self._line_ms(time_s, absolute, arrival_epoch)
        previous = self.last_line_time_s
        covered = elapsed - previous if previous is not None else (self.interval_s if absolute else elapsed)
        covered = max(covered or 0.0, 0.0)
        if not self.interval_from_args and previous is not None and elapsed > previous:
            # Learn the interval from the first spacing seen (attach, import).
            if self.interval_s is None:
                self.interval_s = round(elapsed - previous, 3)
        self.last_line_time_s = elapsed
        ts = self._next_ts(line_ms)
        self.last_line_ts_ms = ts
        self.last_stall_sample_ms = None
        return ts, covered

    def _heartbeat(self, ts: int, running: float = 1.0) -> list[Sample]:
        if self.heartbeat_every_ms is not None and running and self._last_heartbeat_ms is not None \
                and ts - self._last_heartbeat_ms < self.heartbeat_every_ms:
            return []
        self._last_heartbeat_ms = ts
        out = [self._set(RUNNING, running, ts),
               self._set(RUN_INFO, 1.0, ts, self.info_labels),
               self._set(START, float(self.start_epoch or 0.0), ts)]
        if self.interval_s:
            out.append(self._set(INTERVAL, float(self.interval_s), ts))
        out.extend(self.heartbeat_extra(ts))
        if self.last_line_ts_ms is not None:
            out.append(self._set(LAST_LINE, max(self.last_line_ts_ms, self.last_life_ms or 0) / 1000.0, ts))
        return out

    def _emit_counters(self, names: Iterable[str], arrival_epoch: float | None, ts: int | None = None) -> list[Sample]:
        if ts is None:
            epoch = arrival_epoch if arrival_epoch is not None else self.start_epoch
            if epoch is None:
                return []  # placed in time later, with the next progress line or at finish
            ts = self._next_ts(int(epoch * 1000))
        return [self._set(name, self._counters[name], ts) for name in names]

    def _next_ts(self, wanted_ms: int) -> int:
        ts = wanted_ms if self.last_ts_ms is None or wanted_ms > self.last_ts_ms else self.last_ts_ms + 1
        self.last_ts_ms = ts
        return ts

    def _set(self, name: str, value: float, ts: int, extra: Mapping[str, str] | None = None) -> Sample:
        # A run writes the same few dozen series line after line (a 12-hour import: 400,000 samples of
        # 18 series): find the series by the labels as given, and build its label tuple once.
        given: object = (name, tuple(extra.items())) if extra else name
        try:
            entry = self._by_given.get(given)
        except TypeError:  # an unhashable label value: normalised (str) below, not cached
            entry, given = None, None
        if entry is None:
            labels = {"run_id": self.run_id, "tool": self.tool, **(extra or {})}
            pairs = sample(name, labels, value, ts).labels
            entry = self.values.get((name, pairs))
            if entry is None:
                entry = self.values[(name, pairs)] = _Series(name, labels, pairs)
            if given is not None:
                self._by_given[given] = entry
        entry.value = value
        entry.seen = True
        entry.ts = ts
        return Sample(name, entry.pairs, float(value), int(ts))

    def current(self) -> list[_Series]:
        """Latest value of every series, for /metrics."""
        return list(self.values.values())
