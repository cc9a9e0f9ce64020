"""The host collector: what node_exporter's cpu, diskstats and pressure collectors give, read by the exporter itself.

The stack scraped node_exporter every second for `iostat -x 1`'s figures and explain's host signals: about
3 ms of node_exporter's CPU a second during a watched run. The same reading here, from descriptors kept open,
costs the exporter about 0.8 ms a second and its remote write about 0.3 more (issue 32: ``bench_watch_cost.py
--variants ours,hostread``); the exporter wakes every second anyway and remote-writes a batch.

It reads ``/proc/stat``, ``/proc/diskstats`` and ``/proc/pressure/{cpu,io,memory}`` once a second, on the
second (its own thread: the daemon's loop wakes on the run's files, not on a clock), and remote-writes,
under node_exporter 1.5's names, units and device filter, so that every rule, panel and explain query
reads them as they read the scraped ones:

- ``node_cpu_seconds_total{cpu, mode}`` (user, nice, system, idle, iowait, irq, softirq, steal);
- ``node_disk_*_total{device}`` (and the gauge ``node_disk_io_now``), ``node_disk_info{device, major, minor}``;
- ``node_pressure_{cpu,io,memory}_waiting_seconds_total`` and ``node_pressure_{io,memory}_stalled_seconds_total``.

They carry ``job="node"`` (what queries of node_exporter's series select by) and the exporter's ``target``
and ``host``. Off by default (``--collector.host``): the stack turns it on with ``BENCHWATCH_HOST_READER=exporter``
and then no longer scrapes node_exporter every second (docs/metrics.md).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from benchwatch.collector import ORDER_BEFORE_DIPS, ExporterOptions, MetricsDoc, Outbox, register_collector
from benchwatch.model.samples import Sample, sample

EVERY_S = 1.0
READ_CHUNK = 1 << 16
USER_HZ = 100  # /proc/stat counts in USER_HZ, 100 on every Linux architecture node_exporter reads it on
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# node_exporter 1.5's --collector.diskstats.device-exclude default: partitions, RAM disks, loop devices.
DEVICE_EXCLUDE = re.compile(r"^(ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$")
# /proc/diskstats fields after major, minor and name (Documentation/admin-guide/iostats.rst), by index from 0,
# as node_exporter names them, with the factor to its unit (sectors of 512 bytes; milliseconds).
DISK_FIELDS = (
    ("node_disk_reads_completed_total", 0, 1.0), ("node_disk_reads_merged_total", 1, 1.0),
    ("node_disk_read_bytes_total", 2, 512.0), ("node_disk_read_time_seconds_total", 3, 0.001),
    ("node_disk_writes_completed_total", 4, 1.0), ("node_disk_writes_merged_total", 5, 1.0),
    ("node_disk_written_bytes_total", 6, 512.0), ("node_disk_write_time_seconds_total", 7, 0.001),
    ("node_disk_io_now", 8, 1.0), ("node_disk_io_time_seconds_total", 9, 0.001),
    ("node_disk_io_time_weighted_seconds_total", 10, 0.001),
    # Linux 4.18+
    ("node_disk_discards_completed_total", 11, 1.0), ("node_disk_discards_merged_total", 12, 1.0),
    ("node_disk_discarded_sectors_total", 13, 1.0), ("node_disk_discard_time_seconds_total", 14, 0.001),
    # Linux 5.5+
    ("node_disk_flush_requests_total", 15, 1.0), ("node_disk_flush_requests_time_seconds_total", 16, 0.001),
)
# (file under /proc/pressure, its "some" line's metric, its "full" line's; None: node_exporter 1.5 gives none)
PRESSURE = (("cpu", "node_pressure_cpu_waiting_seconds_total", None),
            ("io", "node_pressure_io_waiting_seconds_total", "node_pressure_io_stalled_seconds_total"),
            ("memory", "node_pressure_memory_waiting_seconds_total", "node_pressure_memory_stalled_seconds_total"))

METRICS: dict[str, tuple[str, str]] = {
    "node_cpu_seconds_total": ("counter", "Seconds the CPUs spent in each mode (cpu, mode), from /proc/stat."),
    "node_disk_*_total": ("counter", "A block device's /proc/diskstats counters (device) in node_exporter's names and "
                                     "units: completed, merged, bytes, time; discards and flushes where the kernel has them."),
    "node_disk_io_now": ("gauge", "I/Os in flight on a block device (device)."),
    "node_disk_info": ("gauge", "1 per block device read (device, major, minor)."),
    "node_pressure_*_seconds_total": ("counter", "/proc/pressure's totals: time some tasks waited for a CPU, for I/O, "
                                                 "for memory (waiting), and all tasks waited (stalled; io, memory)."),
}

METRICS_DOC_SECTION = """
## The host, read by the exporter (`host` collector, off by default)

With `BENCHWATCH_HOST_READER=exporter` the stack stops scraping node_exporter every second and the
benchwatch exporter reads the same files once a second instead, remote-writing them under node_exporter
1.5's names, units, labels (`cpu`, `mode`, `device`) and device filter, with `job="node"` and its `target`
and `host`: the rules, panels and `benchwatch explain` read them unchanged. node_exporter stays, scraped every
15 s for the host's size and load (the `node_inventory` job). It costs about a third of node_exporter's CPU
during a watched run, with the remote write of its samples (docs/benchmarks.md).

| metric | type | meaning |
| --- | --- | --- |
"""


class HostReader:
    """The three kinds of /proc file, open once and read with pread (a third of open/read/close's CPU)."""

    def __init__(self, root: str = "/proc"):
        self.root = root
        self.fds: dict[str, int] = {}
        for name in ("stat", "diskstats", *(f"pressure/{p}" for p, _, _ in PRESSURE)):
            try:
                self.fds[name] = os.open(os.path.join(root, name), os.O_RDONLY)
            except OSError:
                pass  # no PSI (kernel before 4.20, or psi=0): the pressure series are absent, as node_exporter's

    def text(self, name: str) -> str:
        fd = self.fds.get(name)
        if fd is None:
            return ""
        # 64 KiB at a time, not one large read: os.pread allocates the whole size asked for at every call, and
        # /proc/stat's interrupt line alone can pass 64 KiB on a big host.
        chunks: list[bytes] = []
        offset = 0
        try:
            while True:
                chunk = os.pread(fd, READ_CHUNK, offset)
                chunks.append(chunk)
                offset += len(chunk)
                if len(chunk) < READ_CHUNK:
                    return b"".join(chunks).decode("ascii", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}

    def samples(self, labels: Mapping[str, str], ts_ms: int) -> list[Sample]:
        return [*cpu_samples(self.text("stat"), labels, ts_ms), *disk_samples(self.text("diskstats"), labels, ts_ms),
                *(s for p, some, full in PRESSURE
                  for s in pressure_samples(self.text(f"pressure/{p}"), some, full, labels, ts_ms))]


# The normalised labels of each series, by (labels given, metric, its own labels): built once, as a series keeps
# them for the exporter's life (a reading builds 50-60 samples a second; sample() would sort and check each time).
_LABELS: dict[tuple, tuple[tuple[str, str], ...]] = {}


def _pairs(base: tuple[tuple[str, str], ...], kind: str, *own: str) -> tuple[tuple[str, str], ...]:
    """The labels ``base`` (the collector's) and ``own`` (name, value, ...), normalised; ``kind`` keeps apart
    what has the same own labels but other names (a disk's info and its counters)."""
    key = (base, kind, own)
    pairs = _LABELS.get(key)
    if pairs is None:
        pairs = sample("node_" + kind, {**dict(base), **dict(zip(own[::2], own[1::2]))}, 0.0, 0).labels
        if len(_LABELS) > 10_000:  # devices and CPUs come and go rarely; bounded all the same
            _LABELS.clear()
        _LABELS[key] = pairs
    return pairs


def cpu_samples(text: str, labels: Mapping[str, str], ts_ms: int) -> list[Sample]:
    out = []
    base = tuple(labels.items())
    for line in text.splitlines():
        if not (line.startswith("cpu") and line[3:4].isdigit()):
            continue  # the "cpu" line is the sum; node_exporter gives the CPUs one by one
        fields = line.split()
        cpu = fields[0][3:]
        for mode, value in zip(CPU_MODES, fields[1:9]):
            out.append(Sample("node_cpu_seconds_total", _pairs(base, "cpu", "cpu", cpu, "mode", mode), int(value) / USER_HZ, ts_ms))
    return out


def disk_samples(text: str, labels: Mapping[str, str], ts_ms: int) -> list[Sample]:
    out = []
    base = tuple(labels.items())
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 14 or DEVICE_EXCLUDE.match(fields[2]):
            continue
        major, minor, device = fields[:3]
        values = fields[3:]
        out.append(Sample("node_disk_info", _pairs(base, "disk_info", "device", device, "major", major, "minor", minor), 1.0, ts_ms))
        own = _pairs(base, "disk", "device", device)
        for name, index, factor in DISK_FIELDS:
            if index < len(values):
                out.append(Sample(name, own, int(values[index]) * factor, ts_ms))
    return out


def pressure_samples(text: str, some: str, full: str | None, labels: Mapping[str, str], ts_ms: int) -> list[Sample]:
    out = []
    base = tuple(labels.items())
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        name = some if kind == "some" else full if kind == "full" else None
        total = rest.rpartition("total=")[2]
        if name is None or not total.isdigit():
            continue
        out.append(Sample(name, _pairs(base, "pressure"), int(total) / 1e6, ts_ms))  # microseconds
    return out


class HostCollector:
    def __init__(self, sink: Callable[[list[Sample]], None], clock: Callable[[], float] = time.time,
                 labels: Mapping[str, str] | None = None, root: str = "/proc"):
        self.sink = sink
        self.clock = clock
        self.labels = {**(labels or {}), "job": "node"}
        self.reader = HostReader(root)
        self.thread_cpu_seconds = 0.0
        self._stop = threading.Event()
        self.outbox: Outbox[Sample] = Outbox()
        self.thread: threading.Thread | None = None

    def read_once(self) -> int:
        got = self.reader.samples(self.labels, round(self.clock() * 1000))
        self.outbox.put(got)
        return len(got)

    def next_reading(self, now: float, last: float | None) -> float:
        """When the next reading is due: the next whole second after ``now``, and never within half a second of
        the last one's due time. A wait measured on the monotonic clock can end a little before the wall-clock
        second it aimed at; reading again at once would give a second sample within the same millisecond, which
        Prometheus refuses (a duplicate with another value) together with the whole request it came in (the
        remote-write queue then halves the batch until that sample is alone: sink.queue.split_refused)."""
        due = (now // EVERY_S + 1) * EVERY_S
        if last is not None and due - last < EVERY_S / 2:
            due += EVERY_S
        return due

    def _loop(self) -> None:
        last: float | None = None
        while True:
            # On the second: readings EVERY_S apart whatever a reading took, as node_exporter's scrapes were.
            now = self.clock()
            last = self.next_reading(now, last)
            if self._stop.wait(max(0.0, last - now)):
                return
            cpu0 = time.thread_time()
            self.read_once()
            self.thread_cpu_seconds += time.thread_time() - cpu0

    def poll(self) -> int:
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, daemon=True, name="host")
            self.thread.start()
        return self.outbox.send(self.sink)

    def stop(self) -> None:
        self._stop.set()

    def collect(self) -> Iterable:
        return ()  # remote-written at each reading's time


@register_collector("host", "the host's CPU, disks and pressure as node_exporter's cpu, diskstats and pressure "
                            "collectors give them (/proc), once a second", default=False, order=ORDER_BEFORE_DIPS)
def _build(options: ExporterOptions) -> HostCollector | None:
    if not os.path.isfile("/proc/stat"):
        return None
    return HostCollector(options.sink, clock=options.clock, labels=options.database_labels)


def metrics_doc() -> MetricsDoc:
    return MetricsDoc([(METRICS_DOC_SECTION, METRICS)])
