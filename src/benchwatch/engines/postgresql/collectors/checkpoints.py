"""The checkpoints collector: follows the PostgreSQL server log (log_checkpoints=on), and its
autovacuum runs (log_autovacuum_min_duration) and other events while it is at it.

Records are read as the log grows (stderr, csvlog or jsonlog, rotation
followed) and fed to the checkpoint model (benchwatch.engines.postgresql.checkpoints),
whose samples go to the sink at the log's own timestamps.

The log is read from its start when the exporter starts: checkpoints already
in it are sent again at their old timestamps, the very same samples, which
Prometheus (out_of_order_time_window, set by the stack) takes as duplicates;
in exchange a checkpoint under way when the exporter (re)starts is known, with
its reason.  /metrics shows the latest values, for scrapers without remote write.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import tzinfo

from benchwatch.collector import ORDER_BEFORE_DIPS, ExporterOptions, MetricsDoc, register_collector
from benchwatch.collector.follow import LineFollower
from benchwatch.engines.postgresql import autovacuum as autovacuum_model
from benchwatch.engines.postgresql import checkpoints as checkpoint_model
from benchwatch.engines.postgresql import server_log as pg_log
from benchwatch.engines.postgresql.autovacuum import AutovacuumModel
from benchwatch.engines.postgresql.checkpoints import CheckpointModel
from benchwatch.model import catalogue
from benchwatch.model.samples import Sample, sample

# Catching up on a big log is done in slices: a poll holds the exporter's lock
# (about 40 ms per MiB of stderr log), and other collectors and /metrics wait.
READ_BYTES_PER_POLL = 2 << 20

_SELF = "benchwatch_exporter_checkpoints_"
EXPORTER_METRICS = {
    _SELF + "log_present": ("gauge", "1 if the followed server log exists."),
    _SELF + "log_records_total": ("counter", "Server log records read."),
    _SELF + "malformed_records_total": ("counter", "Server log records that could not be read (skipped)."),
    _SELF + "foreign_lines_total": ("counter", "stderr log lines without a PostgreSQL severity (skipped)."),
    _SELF + "log_rotations_total": ("counter", "Times the server log was replaced or truncated."),
    _SELF + "clock_timestamps_total": ("counter", "Checkpoint records timed by the read clock (no timestamp in log_line_prefix)."),
    _SELF + "late_ends_total": ("counter", "Checkpoint ends logged before a heartbeat already sent (written 1 ms after it)."),
    _SELF + "unmatched_total": ("counter", "Checkpoint starts without a complete, and completes without a start."),
}

# The server log's other events (server_log.SERVER_EVENTS: deadlocks, lock timeouts, terminated
# sessions, out of memory, failed writes), counted at the log's own times for explain.
EVENT_METRICS = {
    "pg_server_log_events_total": ("counter", "Server log records of an event (event: deadlock, lock_timeout, "
                                              "connection_terminated, out_of_memory, write_error) since the log began, "
                                              "written at each record's own time."),
}
EVENTS = "pg_server_log_events_total"

METRICS_DOC_SECTION = """
## Checkpoints (benchwatch exporter, `checkpoints` collector)

From the PostgreSQL server log (`log_checkpoints = on`; stderr, csvlog or jsonlog). They reach
Prometheus by remote write at the log's own timestamps, so a checkpoint shorter than the scrape
interval keeps its exact start and end; the exporter's /metrics shows their latest values. `kind` is
`checkpoint` or `restartpoint`. `pg_checkpoint_in_progress`, `pg_checkpoints_completed_total` and
`pg_checkpoint_info` also carry `reason` as PostgreSQL prints it (`time`, `wal`, `immediate force wait`,
...; `unknown` when the starting line was not seen); `pg_checkpoint_info` carries the checkpoint's
figures as `total_seconds`, `write_seconds`, `sync_seconds` and `buffers`;
`pg_checkpoint_last_duration_seconds` carries `phase` (`write`, `sync`, `total`). The two
too-frequent series have no `kind`. The same collector counts the log's other events that can explain
a TPS dip, `pg_server_log_events_total{event}`, at each record's own time, and autovacuum's runs
(`log_autovacuum_min_duration`, 0 on the embedded server) as `pg_autovacuum_*`, by `database`,
`table` (`schema.table`) and `kind` (`vacuum`, `analyze`): a run is logged when it ends, with its
elapsed time, so its region is written then, from end − elapsed to end; only the counters are on
/metrics.

| metric | type | meaning |
| --- | --- | --- |
"""


class CheckpointCollector:
    """Follows ``server_log`` (stderr, csvlog or jsonlog; "auto" detects) and feeds a :class:`CheckpointModel`."""

    def __init__(self, server_log: str, sink: Callable[[list[Sample]], None],
                 clock: Callable[[], float] = time.time, log_format: str = "auto", *,
                 from_end: bool = False, labels: Mapping[str, str] | None = None, local_tz: tzinfo | None = None):
        self.path = server_log
        self.sink = sink
        self.clock = clock
        self.follower = LineFollower(server_log, from_end=from_end)
        self.reader = pg_log.RecordReader(log_format, path=server_log, local_tz=local_tz,
                                          keep=lambda text: pg_log.mentions_checkpoint(text) or pg_log.mentions_event(text)
                                          or pg_log.mentions_autovacuum(text))
        self.model = CheckpointModel(labels)
        self.autovacuum = AutovacuumModel(labels)
        self.labels = dict(labels or {})
        self.events: dict[str, int] = {}
        self.log_present = False
        self.rotations = 0
        self.clock_timestamps = 0  # records timed by the read clock: no timestamp in the prefix

    def poll(self) -> int:
        now = self.clock()
        self._check_rotation()
        out: list[Sample] = []
        for raw in self.follower.read_lines(READ_BYTES_PER_POLL):
            for rec in self.reader.feed(raw.decode("utf-8", "replace")):
                ev = pg_log.classify(rec)
                event = pg_log.server_event(rec) if ev is None else None
                run = pg_log.autovacuum_run(rec) if ev is None and event is None else None
                if ev is None and event is None and run is None:
                    continue
                ts = rec.timestamp
                if ts is None:
                    ts = now
                    self.clock_timestamps += 1
                if ev is not None:
                    out.extend(self.model.feed(ev, round(ts * 1000)))
                elif run is not None:
                    out.extend(self.autovacuum.feed(run, round(ts * 1000)))
                elif event is not None:
                    self.events[event] = self.events.get(event, 0) + 1
                    out.append(sample(EVENTS, {**self.labels, "event": event}, self.events[event], round(ts * 1000)))
        out.extend(self.model.tick(round(now * 1000)))
        if out:
            self.sink(out)
        return len(out)

    def watch_paths(self) -> list[str]:
        """The server log (by name: a rotation to a new file is seen too)."""
        return [self.path]

    def _check_rotation(self) -> None:
        f = self.follower
        try:
            st = os.stat(f.path)
        except FileNotFoundError:
            self.log_present = False
            return
        self.log_present = True
        if f.inode is not None and (st.st_ino != f.inode or st.st_size < f.offset):
            # The follower starts the new file over; so must the record reader.
            self.rotations += 1
            self.reader.reset()

    def collect(self) -> Iterable:
        yield from self.model.families()
        yield from self.autovacuum.families()
        g = catalogue.family(EXPORTER_METRICS, _SELF + "log_present", ["format"])
        g.add_metric([self.reader.format or ""], 1.0 if self.log_present else 0.0)
        yield g
        for name, value in (
            ("log_records", self.reader.records),
            ("malformed_records", self.reader.malformed),
            ("foreign_lines", self.reader.foreign),
            ("log_rotations", self.rotations),
            ("clock_timestamps", self.clock_timestamps),
            ("late_ends", self.model.late_ends),
        ):
            c = catalogue.family(EXPORTER_METRICS, _SELF + name + "_total")
            c.add_metric([], value)
            yield c
        c = catalogue.family(EXPORTER_METRICS, _SELF + "unmatched_total", ["event"])
        for event, n in sorted(self.model.unmatched.items()):
            c.add_metric([event], n)
        yield c


# Before the dips collector: a dip pass then reads back the checkpoints logged by the same poll.
@register_collector("checkpoints", "follow the PostgreSQL server log for checkpoints", order=ORDER_BEFORE_DIPS)
def _build(options: ExporterOptions) -> CheckpointCollector | None:
    if not options.server_log:
        return None  # nothing to follow (an existing PostgreSQL whose log is elsewhere)
    return CheckpointCollector(options.server_log, options.sink, clock=options.clock, labels=options.database_labels)


def metrics_doc() -> MetricsDoc:
    return MetricsDoc([(METRICS_DOC_SECTION, {**checkpoint_model.METRICS, **EVENT_METRICS,
                                               **autovacuum_model.METRICS})],
                      self_metrics=EXPORTER_METRICS,
                      self_note="How the `checkpoints` collector reads the\nserver log: `log_present` carries the log's "
                                "`format`, `unmatched_total` the `event`.")
