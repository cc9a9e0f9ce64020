"""Checkpoints as series: the PostgreSQL server log's checkpoint events in, samples out.

Every checkpoint (and restartpoint) becomes samples at the log's own
timestamps (the exporter's checkpoints collector sends them by remote write), so that Prometheus holds
its exact start and end even when it is shorter than the scrape interval:

* at start ``t0``: ``pg_checkpoint_in_progress{kind,reason}`` 0 at t0-1 ms and 1
  at t0 (a 0->1 step that ``changes()`` sees even for the first checkpoint),
  the completed counter unchanged (so ``increase()`` sees the first one) and
  ``pg_checkpoint_last_start_timestamp_seconds``;
* while it runs: ``in_progress`` 1 again at t0+1 s, t0+2 s, ... (a heartbeat on a
  grid anchored at t0, written once the grid point is a second old, so that
  range and instant queries see it, and the same points whether read live or
  from an old log);
* at end ``t1``: ``in_progress`` 0, the counter +1, and the ``last_*`` values.

The "complete" line carries no reason: it takes the one of its "starting"
line.  A "complete" without one (log_checkpoints switched on mid-checkpoint,
log rotated in between) gets reason "unknown" and a start at t1 - total.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from benchwatch.engines.postgresql import server_log as pg_log
from benchwatch.model import catalogue
from benchwatch.model.samples import STALE_NAN, RisingSeries, Sample

HEARTBEAT_MS = 1000
# A grid point is written once it is this old: the "complete" line it must
# precede is in the file by then (a line takes microseconds to reach it).
HEARTBEAT_LAG_MS = 1000
# Beyond this a checkpoint that never completed is taken for a log that stopped
# (server killed and gone): no more heartbeats.  checkpoint_timeout is at most 1 day.
MAX_HEARTBEAT_MS = 86_400_000
MAX_HEARTBEATS_PER_POLL = 3600

IN_PROGRESS = "pg_checkpoint_in_progress"
INFO = "pg_checkpoint_info"
COMPLETED = "pg_checkpoints_completed_total"
TOO_FREQUENT = "pg_checkpoints_too_frequent_total"

# name -> (type, help); every pg_checkpoint_last_* series has the label kind.
METRICS = {
    IN_PROGRESS: ("gauge", "1 while a checkpoint or restartpoint runs, by kind and reason as PostgreSQL prints it."),
    INFO: ("gauge", "1 over a completed checkpoint's span, written when it completes, with its results as labels "
                    "(total/write/sync seconds, buffers): the text of dashboard annotations."),
    COMPLETED: ("counter", "Checkpoints and restartpoints completed, by kind and reason (of the starting line)."),
    TOO_FREQUENT: ("counter", "'checkpoints are occurring too frequently' warnings: max_wal_size is too small for the load."),
    "pg_checkpoint_last_too_frequent_apart_seconds": ("gauge", "Seconds between the checkpoints of the last 'too frequently' warning."),
    "pg_checkpoint_last_start_timestamp_seconds": ("gauge", "Log time of the last checkpoint start, Unix seconds."),
    "pg_checkpoint_last_end_timestamp_seconds": ("gauge", "Log time of the last checkpoint end, Unix seconds."),
    "pg_checkpoint_last_duration_seconds": ("gauge", "Write, sync and total time of the last checkpoint, as logged."),
    "pg_checkpoint_last_buffers_written": ("gauge", "Shared buffers written by the last checkpoint."),
    "pg_checkpoint_last_buffers_written_ratio": ("gauge", "Buffers written by the last checkpoint over shared_buffers (0..1)."),
    "pg_checkpoint_last_slru_buffers_written": ("gauge", "SLRU buffers written by the last checkpoint (PostgreSQL 18+)."),
    "pg_checkpoint_last_wal_files_added": ("gauge", "WAL segment files added by the last checkpoint."),
    "pg_checkpoint_last_wal_files_removed": ("gauge", "WAL segment files removed by the last checkpoint."),
    "pg_checkpoint_last_wal_files_recycled": ("gauge", "WAL segment files recycled by the last checkpoint."),
    "pg_checkpoint_last_sync_files": ("gauge", "Files fsynced by the last checkpoint."),
    "pg_checkpoint_last_sync_longest_seconds": ("gauge", "Longest single file sync of the last checkpoint."),
    "pg_checkpoint_last_sync_average_seconds": ("gauge", "Average file sync time of the last checkpoint."),
    "pg_checkpoint_last_distance_bytes": ("gauge", "WAL written between the last two checkpoints' redo points."),
    "pg_checkpoint_last_estimate_bytes": ("gauge", "PostgreSQL's estimate of the distance between checkpoints."),
    "pg_checkpoint_last_lsn_bytes": ("gauge", "WAL position of the last checkpoint record (PostgreSQL 17+)."),
    "pg_checkpoint_last_redo_lsn_bytes": ("gauge", "Redo WAL position of the last checkpoint (PostgreSQL 17+)."),
}

# parse_complete field -> (metric, extra labels)
_FIELD_METRICS = {
    "write_seconds": ("pg_checkpoint_last_duration_seconds", {"phase": "write"}),
    "sync_seconds": ("pg_checkpoint_last_duration_seconds", {"phase": "sync"}),
    "total_seconds": ("pg_checkpoint_last_duration_seconds", {"phase": "total"}),
    "buffers_written": ("pg_checkpoint_last_buffers_written", {}),
    "buffers_written_ratio": ("pg_checkpoint_last_buffers_written_ratio", {}),
    "slru_buffers_written": ("pg_checkpoint_last_slru_buffers_written", {}),
    "wal_files_added": ("pg_checkpoint_last_wal_files_added", {}),
    "wal_files_removed": ("pg_checkpoint_last_wal_files_removed", {}),
    "wal_files_recycled": ("pg_checkpoint_last_wal_files_recycled", {}),
    "sync_files": ("pg_checkpoint_last_sync_files", {}),
    "sync_longest_seconds": ("pg_checkpoint_last_sync_longest_seconds", {}),
    "sync_average_seconds": ("pg_checkpoint_last_sync_average_seconds", {}),
    "distance_bytes": ("pg_checkpoint_last_distance_bytes", {}),
    "estimate_bytes": ("pg_checkpoint_last_estimate_bytes", {}),
    "lsn": ("pg_checkpoint_last_lsn_bytes", {}),
    "redo_lsn": ("pg_checkpoint_last_redo_lsn_bytes", {}),
}


@dataclass
class _Open:
    kind: str
    reason: str
    start_ms: int
    next_beat: int = 1  # index k of the next heartbeat at start + k s


class CheckpointModel:
    """Checkpoint events in, timestamped samples out; keeps the latest values for /metrics."""

    def __init__(self, labels: Mapping[str, str] | None = None):
        self.rising = RisingSeries(labels)
        self.const = self.rising.const
        self.open: _Open | None = None
        self.completed: dict[tuple[str, str], int] = {}
        self.in_progress_seen: set[tuple[str, str]] = set()
        self.last: dict[tuple[str, tuple], float] = {}  # (name, labels) -> latest value, last_* and too-frequent gauges
        self.too_frequent = 0
        self.unmatched = {"complete_without_start": 0, "start_without_complete": 0}
        self.late_ends = 0  # an end that had to follow a heartbeat already written past it

    # -- sample helpers

    def _emit(self, out: list[Sample], name: str, labels: dict, value: float, ts: int) -> int:
        """Append a sample (its series' timestamps only go up); keeps the last_* figures for /metrics."""
        ts = self.rising.emit(out, name, labels, value, ts)
        if name.startswith("pg_checkpoint_last_"):
            self.last[(name, tuple(sorted(labels.items())))] = float(value)
        return ts

    def _last_ts(self, name: str, labels: dict) -> int | None:
        return self.rising.last(name, labels)

    # -- events

    def feed(self, ev: pg_log.CheckpointEvent, ts_ms: int) -> list[Sample]:
        out: list[Sample] = []
        if ev.event == "start":
            self._start(out, ev.kind, ev.reason, ts_ms)
        elif ev.event == "complete":
            self._complete(out, ev.kind, ev.fields, ts_ms)
        elif ev.event == "too_frequent":
            if self._last_ts(TOO_FREQUENT, {}) is None:
                self._emit(out, TOO_FREQUENT, {}, 0, ts_ms - 1)
            self.too_frequent += 1
            self._emit(out, TOO_FREQUENT, {}, self.too_frequent, ts_ms)
            self._emit(out, "pg_checkpoint_last_too_frequent_apart_seconds", {}, ev.fields["apart_seconds"], ts_ms)
        elif ev.event == "server_restart" and self.open is not None:
            self._abandon(out, ts_ms)
        return out

    def _start(self, out: list[Sample], kind: str, reason: str, t0: int) -> _Open:
        if self.open is not None:
            self._abandon(out, t0 - 1)
        labels = {"kind": kind, "reason": reason}
        prev = self._last_ts(IN_PROGRESS, labels)
        if prev is None or prev < t0 - 1:
            self._emit(out, IN_PROGRESS, labels, 0, t0 - 1)
        t0 = self._emit(out, IN_PROGRESS, labels, 1, t0)
        self.in_progress_seen.add((kind, reason))
        self._emit(out, COMPLETED, labels, self.completed.setdefault((kind, reason), 0), t0)
        self._emit(out, "pg_checkpoint_last_start_timestamp_seconds", {"kind": kind}, t0 / 1000, t0)
        self.open = _Open(kind, reason, t0)
        return self.open

    def _abandon(self, out: list[Sample], at: int) -> None:
        o, self.open = self.open, None
        if o is None:
            return
        self._emit(out, IN_PROGRESS, {"kind": o.kind, "reason": o.reason}, 0, at)
        self.unmatched["start_without_complete"] += 1

    def _heartbeats(self, out: list[Sample], limit_ms: int, inclusive: bool, max_count: int | None = None) -> None:
        o = self.open
        if o is None:
            return
        labels = {"kind": o.kind, "reason": o.reason}
        n = 0
        while max_count is None or n < max_count:
            at = o.start_ms + o.next_beat * HEARTBEAT_MS
            if at > limit_ms or (at == limit_ms and not inclusive):
                break
            self._emit(out, IN_PROGRESS, labels, 1, at)
            o.next_beat += 1
            n += 1

    def _complete(self, out: list[Sample], kind: str, fields: dict, t1: int) -> None:
        o = self.open
        if o is None or o.kind != kind:
            total = fields.get("total_seconds")
            o = self._start(out, kind, "unknown", t1 - (round(total * 1000) if total else 1))
            self.unmatched["complete_without_start"] += 1
        # Bounded like tick's: a garbled time stamp (a year off) must not mean billions of heartbeats.
        self._heartbeats(out, min(t1, o.start_ms + MAX_HEARTBEAT_MS), inclusive=False)
        labels = {"kind": o.kind, "reason": o.reason}
        end = self._emit(out, IN_PROGRESS, labels, 0, t1)
        if end != t1:
            self.late_ends += 1
        self.completed[(o.kind, o.reason)] += 1
        self._emit(out, COMPLETED, labels, self.completed[(o.kind, o.reason)], end)
        self._emit(out, "pg_checkpoint_last_end_timestamp_seconds", {"kind": kind}, end / 1000, end)
        for key, value in fields.items():
            name, extra = _FIELD_METRICS[key]
            self._emit(out, name, {"kind": kind, **extra}, value, end)
        self._info_span(out, o, fields, end)
        self.open = None

    def _info_span(self, out: list[Sample], o: _Open, fields: dict, end: int) -> None:
        """The finished checkpoint as one region carrying its figures, then a staleness marker."""
        def fmt(key: str) -> str:
            value = fields.get(key)
            return "" if value is None else f"{value:g}"
        labels = {"kind": o.kind, "reason": o.reason, "total_seconds": fmt("total_seconds"),
                  "write_seconds": fmt("write_seconds"), "sync_seconds": fmt("sync_seconds"),
                  "buffers": fmt("buffers_written")}
        at = o.start_ms
        while at < min(end, o.start_ms + MAX_HEARTBEAT_MS):
            self._emit(out, INFO, labels, 1, at)
            at += HEARTBEAT_MS
        last = self._emit(out, INFO, labels, 1, end)
        self._emit(out, INFO, labels, STALE_NAN, last + 1)

    def tick(self, now_ms: int) -> list[Sample]:
        """Heartbeats of the checkpoint under way, up to a second ago."""
        out: list[Sample] = []
        if self.open is not None:
            limit = min(now_ms - HEARTBEAT_LAG_MS, self.open.start_ms + MAX_HEARTBEAT_MS)
            self._heartbeats(out, limit, inclusive=True, max_count=MAX_HEARTBEATS_PER_POLL)
        return out

    # -- /metrics

    def families(self) -> list:
        const_names = sorted(self.const)
        const_values = [self.const[k] for k in const_names]
        fams: list[GaugeMetricFamily | CounterMetricFamily] = []
        g = catalogue.family(METRICS, IN_PROGRESS, const_names + ["kind", "reason"])
        for kind, reason in sorted(self.in_progress_seen):
            running = self.open is not None and (self.open.kind, self.open.reason) == (kind, reason)
            g.add_metric(const_values + [kind, reason], 1.0 if running else 0.0)
        fams.append(g)
        c = catalogue.family(METRICS, COMPLETED, const_names + ["kind", "reason"])
        for (kind, reason), n in sorted(self.completed.items()):
            c.add_metric(const_values + [kind, reason], n)
        fams.append(c)
        c = catalogue.family(METRICS, TOO_FREQUENT, const_names)
        c.add_metric(const_values, self.too_frequent)
        fams.append(c)
        by_name: dict[str, list] = {}
        for (name, labels), value in sorted(self.last.items()):
            by_name.setdefault(name, []).append((dict(labels), value))
        for name, members in by_name.items():
            label_names = sorted({k for labels, _ in members for k in labels})
            g = catalogue.family(METRICS, name, const_names + label_names)
            for labels, value in members:
                g.add_metric(const_values + [labels.get(k, "") for k in label_names], value)
            fams.append(g)
        return fams
