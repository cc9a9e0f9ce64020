"""One pgbench run as Prometheus series: parser events in, timestamped samples out.

The same model serves a live run (the exporter follows the run directory and
remote-writes what ``feed``/``tick``/``finish`` return) and an import of a saved
output (``import`` feeds every line, then writes or prints the samples), so a
backfilled run is the same series as a live one.

Rules that make the stored curve trustworthy:
- each progress line is exactly one sample of each progress series, at
  pgbench's own time (start of pgbench's clock + elapsed);
- timestamps are strictly increasing per run: a line whose time is not after
  the previous sample (old pgbench's catch-up bursts repeat the elapsed time)
  is placed 1 ms after it;
- transactions are counted as tps x the time the line covers, so catch-up lines
  that cover no time add nothing (no double counting);
- while a run is active and no line arrived for 1.5 intervals, ``tick`` writes
  TPS 0 once per interval (a stall is a drop, not a flat line).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from benchwatch.model.samples import STALE_NAN, Sample, sample
from benchwatch.parse import pgbench as po

# name -> (type, help). The single catalogue for exposition, OpenMetrics and docs.
METRICS: dict[str, tuple[str, str]] = {
    "pgbench_progress_tps": ("gauge", "Transactions per second over the last progress interval, as pgbench printed it; 0 while the run is stalled."),
    "pgbench_progress_latency_seconds": ("gauge", "Average transaction latency over the last progress interval."),
    "pgbench_progress_latency_stddev_seconds": ("gauge", "Standard deviation of transaction latency over the last progress interval."),
    "pgbench_progress_lag_seconds": ("gauge", "Average schedule lag over the last progress interval (only with -R)."),
    "pgbench_progress_interval_seconds": ("gauge", "The progress reporting interval of the run (-P)."),
    "pgbench_progress_last_line_timestamp_seconds": ("gauge", "pgbench time of the last progress line received, as a Unix timestamp."),
    "pgbench_progress_lines_total": ("counter", "Progress lines received."),
    "pgbench_progress_stalled": ("gauge", "1 while an active run has printed no progress line for more than 1.5 intervals."),
    "pgbench_transactions_total": ("counter", "Transactions completed: tps times the time each progress line covers; the exact figure from the summary at the end."),
    "pgbench_failed_transactions_total": ("counter", "Failed transactions (pgbench 15+ 'failed')."),
    "pgbench_skipped_transactions_total": ("counter", "Transactions skipped for being too late (-R with -L)."),
    "pgbench_retried_transactions_total": ("counter", "Transactions retried after a serialization or deadlock failure (--max-tries)."),
    "pgbench_retries_total": ("counter", "Retries, all transactions together (--max-tries)."),
    "pgbench_aborted_clients_total": ("counter", "Clients that aborted."),
    "pgbench_running": ("gauge", "1 while the run is active, 0 once it ended."),
    "pgbench_exit_code": ("gauge", "pgbench's exit code, once the run ended."),
    "pgbench_run_info": ("gauge", "Run metadata in labels; always 1."),
    "pgbench_script_sql_statements": ("gauge", "SQL statements per transaction (weighted over the run's scripts); statements per second = TPS x this."),
    "pgbench_run_start_timestamp_seconds": ("gauge", "Start of pgbench's clock for the run, as a Unix timestamp."),
    "pgbench_statement_latency_seconds": ("gauge", "Average latency per script statement, from pgbench -r."),
    "pgbench_statement_failures_total": ("counter", "Failures per script statement, from pgbench -r (pgbench 15+)."),
    "pgbench_statement_retries_total": ("counter", "Retries per script statement, from pgbench -r (pgbench 15+)."),
    "pgbench_summary_tps": ("gauge", "TPS of the whole run from pgbench's summary (without initial connection time, or excluding connections establishing)."),
    "pgbench_summary_latency_seconds": ("gauge", "Average latency of the whole run from pgbench's summary."),
    "pgbench_summary_latency_stddev_seconds": ("gauge", "Latency standard deviation of the whole run from pgbench's summary."),
    "pgbench_summary_initial_connection_time_seconds": ("gauge", "Initial connection time from pgbench's summary (pgbench 14+)."),
    "pgbench_summary_transactions": ("gauge", "Transactions actually processed, from pgbench's summary."),
    "pgbench_exporter_unparsed_lines_total": ("counter", "Output lines benchwatch could not parse (malformed, truncated or not UTF-8); they are kept in the raw output."),
}

# Progress gauges and the Progress field each comes from.
_PROGRESS_GAUGES = (
    ("pgbench_progress_latency_seconds", "latency_s"),
    ("pgbench_progress_latency_stddev_seconds", "stddev_s"),
    ("pgbench_progress_lag_seconds", "lag_s"),
)
_PROGRESS_COUNTERS = (
    ("pgbench_failed_transactions_total", "failed"),
    ("pgbench_skipped_transactions_total", "skipped"),
    ("pgbench_retried_transactions_total", "retried"),
    ("pgbench_retries_total", "retries"),
)
_SUMMARY_GAUGES = {
    "tps": "pgbench_summary_tps",
    "latency_avg_s": "pgbench_summary_latency_seconds",
    "latency_stddev_s": "pgbench_summary_latency_stddev_seconds",
    "initial_connection_time_s": "pgbench_summary_initial_connection_time_seconds",
    "transactions_processed": "pgbench_summary_transactions",
}

STALL_FACTOR = 1.5

_ENDED_WITH_THE_RUN = ("pgbench_progress_tps", "pgbench_progress_latency_seconds",
                       "pgbench_progress_latency_stddev_seconds", "pgbench_progress_lag_seconds",
                       "pgbench_progress_stalled")

_BUILTIN_NAMES = {"TPC-B (sort of)": "tpcb-like", "simple update": "simple-update", "select only": "select-only"}


def script_name(transaction_type: str) -> str:
    """How people name a script: pgbench's builtin names, or a script file's base name."""
    text = transaction_type.strip()
    m = re.fullmatch(r"<builtin: (.*)>", text)
    if m:
        return _BUILTIN_NAMES.get(m.group(1), m.group(1))
    return os.path.basename(text)


@dataclass
class _Series:
    name: str
    labels: dict[str, str]
    value: float = 0.0
    seen: bool = False
    ts: int = 0  # newest sample written, in ms


class RunModel:
    """The run of one load generator; pgbench's here, subclasses for others (benchwatch.model.sysbench_run).

    Every series carries ``run_id`` and ``tool``, so one query, alert or panel
    on a shared name (``pgbench_progress_tps``) serves every tool.
    """

    tool = "pgbench"
    catalogue: ClassVar[dict[str, tuple[str, str]]] = METRICS
    summary_gauges: ClassVar[dict[str, str]] = _SUMMARY_GAUGES
    ended_with_the_run: tuple[str, ...] = _ENDED_WITH_THE_RUN
    exact_transactions_key = "transactions_processed"  # the summary's exact count of transactions

    def __init__(self, run_id: str, *, info_labels: dict[str, str] | None = None,
                 interval_s: float | None = None, start_epoch: float | None = None,
                 sql_statements: float | None = None):
        self.run_id = run_id
        self.info_labels = {k: v for k, v in (info_labels or {}).items() if k not in ("run_id", "tool")}
        self.interval_s = interval_s
        self.interval_from_args = interval_s is not None
        self.start_epoch = start_epoch  # start of pgbench's clock; None until known
        self.sql_statements = sql_statements
        self.active = True
        self.stalled = False
        self.last_ts_ms: int | None = None        # newest sample written for this run
        self.last_line_ts_ms: int | None = None   # pgbench time of the last real progress line
        self.last_line_time_s: float | None = None
        self.last_stall_sample_ms: int | None = None
        self.summary: dict[str, object] = {}
        self.statements: list[po.StatementLatency] = []
        self.script_names: dict[int, str] = {}
        self.errors: list[str] = []
        self.values: dict[tuple[str, tuple[tuple[str, str], ...]], _Series] = {}
        self.parser = self._new_parser()
        self._counters = {name: 0.0 for name in self.catalogue if name.endswith("_total")}
        self._transactions_exact = 0.0

    def _new_parser(self):
        return po.PgbenchOutputParser()

    @property
    def progress_lines(self) -> int:
        return int(self._counters["pgbench_progress_lines_total"])

    @property
    def unparsed_lines(self) -> int:
        return int(self._counters["pgbench_exporter_unparsed_lines_total"])

    # -- inputs ---------------------------------------------------------------

    def feed_line(self, line: bytes | str, arrival_epoch: float | None = None) -> list[Sample]:
        out: list[Sample] = []
        for event in self.parser.feed(line):
            out.extend(self.feed(event, arrival_epoch))
        return out

    def feed(self, event: object, arrival_epoch: float | None = None) -> list[Sample]:
        if isinstance(event, po.Progress):
            return self._progress(event, arrival_epoch)
        if isinstance(event, po.Unparsed):
            self._counters["pgbench_exporter_unparsed_lines_total"] += 1
            return self._emit_counters(["pgbench_exporter_unparsed_lines_total"], arrival_epoch)
        if isinstance(event, po.ClientAborted):
            self._counters["pgbench_aborted_clients_total"] += 1
            self.errors.append(event.message)
            return self._emit_counters(["pgbench_aborted_clients_total"], arrival_epoch)
        if isinstance(event, po.Summary):
            self.summary[event.key] = event.value
        elif isinstance(event, po.StatementLatency):
            self.statements.append(event)
        elif isinstance(event, po.ScriptHeader):
            self.script_names[event.index] = script_name(event.name)
        elif isinstance(event, (po.ErrorLine, po.RunAborted)):
            self.errors.append(event.message)
        return []

    def tick(self, now_epoch: float) -> list[Sample]:
        """Called by a live follower several times per interval: writes stall zeros."""
        if not self.active or self.start_epoch is None or self.last_line_ts_ms is None:
            return []
        interval_ms = (self.interval_s or 1.0) * 1000.0
        now_ms = int(now_epoch * 1000)
        if now_ms - self.last_line_ts_ms <= STALL_FACTOR * interval_ms:
            return []
        if self.last_stall_sample_ms is not None and now_ms - self.last_stall_sample_ms < interval_ms:
            return []
        self.stalled = True
        ts = self._next_ts(now_ms)
        self.last_stall_sample_ms = ts
        out = [self._set("pgbench_progress_tps", 0.0, ts), self._set("pgbench_progress_stalled", 1.0, ts)]
        out.extend(self._heartbeat(ts))
        return out

    def finish(self, end_epoch: float | None, exit_code: int | None) -> list[Sample]:
        """The run ended: flush the parser, write the summary, running=0."""
        out: list[Sample] = []
        for event in self.parser.flush():
            out.extend(self.feed(event, end_epoch))
        if self.start_epoch is None:
            # Nothing placed the run in time (no progress line): anchor it at its end.
            self.start_epoch = end_epoch if end_epoch is not None else 0.0
        end_ms = int(end_epoch * 1000) if end_epoch is not None else (self.last_ts_ms or int(self.start_epoch * 1000))
        ts = self._next_ts(end_ms)
        self.active = False
        processed = self.summary.get(self.exact_transactions_key)
        if isinstance(processed, (int, float)) and processed >= self._counters["pgbench_transactions_total"]:
            self._counters["pgbench_transactions_total"] = float(processed)
        if self.stalled:
            out.append(self._set("pgbench_progress_stalled", 0.0, ts))
        out.extend(self._summary_counters(ts))
        out.extend(self._emit_counters(list(self._counters), None, ts=ts))
        for key, name in self.summary_gauges.items():
            value = self.summary.get(key)
            if isinstance(value, (int, float)):
                out.append(self._set(name, float(value), ts))
        for row in self.statements:
            # A single script's table has index 0: name it as the run's script.
            script = (self.script_names.get(row.script_index) if row.script_index
                      else self.info_labels.get("script") or script_name(str(self.summary.get("transaction_type", ""))))
            labels = {"statement": row.statement, "script": script or str(row.script_index)}
            out.append(self._set("pgbench_statement_latency_seconds", row.latency_s, ts, labels))
            if row.failures is not None:
                out.append(self._set("pgbench_statement_failures_total", float(row.failures), ts, labels))
            if row.retries is not None:
                out.append(self._set("pgbench_statement_retries_total", float(row.retries), ts, labels))
        out.extend(self._finish_extra(ts))
        if exit_code is not None:
            out.append(self._set("pgbench_exit_code", float(exit_code), ts))
        out.extend(self._heartbeat(ts, running=0.0))
        return out

    def _summary_counters(self, ts: int) -> list[Sample]:
        """Hook: counters the summary gives exactly (written before the other counters' final values)."""
        return []

    def _finish_extra(self, ts: int) -> list[Sample]:
        """Hook: the tool's own end-of-run series."""
        return []

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

    def _progress(self, event: po.Progress, arrival_epoch: float | None) -> list[Sample]:
        ts, covered = self._place_line(event.time_s, event.absolute, arrival_epoch)
        out = [self._set("pgbench_progress_tps", event.tps, ts)]
        out.extend(self._unstall(ts))
        for name, attr in _PROGRESS_GAUGES:
            value = getattr(event, attr)
            if value is not None:
                out.append(self._set(name, value, ts))
        done = event.tps * covered
        if math.isfinite(done):  # pgbench prints "NaN tps" / "inf tps" for an empty or zero-length interval
            self._counters["pgbench_transactions_total"] += round(done)
        self._counters["pgbench_progress_lines_total"] += 1
        changed = ["pgbench_transactions_total", "pgbench_progress_lines_total"]
        for name, attr in _PROGRESS_COUNTERS:
            value = getattr(event, attr)
            if value is not None:
                self._counters[name] += value
                changed.append(name)
        out.extend(self._emit_counters(changed, None, ts=ts))
        out.extend(self._heartbeat(ts))
        return out

    def _unstall(self, ts: int) -> list[Sample]:
        if not self.stalled:
            return []
        self.stalled = False
        return [self._set("pgbench_progress_stalled", 0.0, ts)]

    def _place_line(self, time_s: float, absolute: bool, arrival_epoch: float | None) -> tuple[int, float]:
        """A progress line's timestamp (ms, at the tool's own time) and the seconds it covers."""
        if absolute:
            if self.start_epoch is None:
                self.start_epoch = time_s - (self.interval_s or 1.0)
            line_ms = int(round(time_s * 1000))
            elapsed = time_s - self.start_epoch
        else:
            if self.start_epoch is None:
                # Calibrate pgbench's clock from the first line's arrival.
                self.start_epoch = (arrival_epoch if arrival_epoch is not None else 0.0) - time_s
            line_ms = int(round((self.start_epoch + time_s) * 1000))
            elapsed = time_s
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
        out = [self._set("pgbench_running", running, ts),
               self._set("pgbench_run_info", 1.0, ts, self.info_labels),
               self._set("pgbench_run_start_timestamp_seconds", float(self.start_epoch or 0.0), ts)]
        if self.interval_s:
            out.append(self._set("pgbench_progress_interval_seconds", float(self.interval_s), ts))
        if self.sql_statements is not None:
            out.append(self._set("pgbench_script_sql_statements", float(self.sql_statements), ts))
        if self.last_line_ts_ms is not None:
            out.append(self._set("pgbench_progress_last_line_timestamp_seconds", self.last_line_ts_ms / 1000.0, ts))
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

    def _set(self, name: str, value: float, ts: int, extra: dict[str, str] | None = None) -> Sample:
        labels = {"run_id": self.run_id, "tool": self.tool, **(extra or {})}
        s = sample(name, labels, value, ts)
        entry = self.values.get((name, s.labels))
        if entry is None:
            entry = self.values[(name, s.labels)] = _Series(name, labels)
        entry.value = value
        entry.seen = True
        entry.ts = ts
        return s

    def current(self) -> list[_Series]:
        """Latest value of every series, for /metrics."""
        return list(self.values.values())
