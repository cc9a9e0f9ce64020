"""The recording rules on the live stack: node rules against `iostat -x 1` on
the same disk at the same time, PostgreSQL rules against SQL and pgbench.

A real pgbench run plus two dd loops with direct I/O (a 1 MiB writer and a
64 KiB reader) keep the disk busy while iostat reports ten one-second
intervals in JSON. iostat is started just after one of Prometheus's scrapes
of node_exporter, so its one-second windows and the scrape-to-scrape windows
the rules use (irate over the last two scrapes) cover the same second, a few
milliseconds apart. For every report each rule, as Prometheus loaded it from
prometheus/rules/node.yml, is evaluated half a second after the scrape that
ends the matching window and compared with iostat's column.

The race this used to lose: iostat and node_exporter read /proc/diskstats at
different instants, iostat 5 to 25 ms after node_exporter, so each of iostat's
windows is shifted against the scrapes' by that much at both ends. Steady
traffic shifts in as much as it shifts out, but the disk is not steady:
writeback merges hundreds of requests at once, and one such burst between the
two readers' reads lands in one window and not the other. Worse, iostat's
first window starts at a read made while iostat itself starts (its own
loading from disk falls in the scrapes' window only). That is how a first
second read "rrqm/s: iostat 0.00, rule 30.0" once and passed on reruns.
So the test
  - runs two reports more and drops the first and the last: every compared
    window starts and ends at a read iostat makes on its one-second alarm
    (the last one is dropped because iostat exits right after it, too fast for
    its read to be seen);
  - reads the same counters (and /proc/stat's CPU time, for avg-cpu) itself
    about every millisecond (DiskTimeline) and sees when iostat reads (its
    rchar in /proc/PID/io goes up), which places each of iostat's reads within
    a millisecond or two;
  - takes what node_exporter read at each scrape from Prometheus (the raw
    node_disk_* and node_cpu_seconds_total counters), so the difference
    between the two readers at each end of a window is known, up to what moved
    within that millisecond or two;
  - moves iostat's figure onto the scrapes' window by that difference and
    compares the rule with the result (a range, from that uncertainty).
What is left is the rule's doing, and it must agree as tightly as before. The
test still fails if most seconds of a column cannot be placed that tightly.

Agreement: the rule is within max(10 % of iostat, floor) of that range. The
floors cover what is not the rule's doing: iostat's two decimals, the kernel's
counters in whole milliseconds (disk) and hundredths of a second (CPU), and
/proc/uptime's centiseconds that iostat divides by:
  r/s, w/s, rrqm/s, wrqm/s   2 per second
  rkB/s, wkB/s               256 kB/s (a quarter of one 1 MiB write)
  r_await, w_await, await    0.05 ms
  rareq-sz, wareq-sz, areq-sz 2 kB
  aqu-sz                     0.05
  %util                      2 points
  avg-cpu columns            2 points (4 jiffies of 200 on two CPUs: the kernel
                             rounds the total line once, the per-CPU lines
                             node_exporter reads one by one)
Per-I/O means (await, request size) are compared only in seconds with at
least 20 I/Os of that kind: with fewer, one I/O more or less on either side
of the window moves the mean more than the rule could be wrong by.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.grafana import rules as grafana_rules
from benchwatch.stack.config import HOST_READERS
from benchwatch.util import processes
from tests.helpers import throwaway
from tests.helpers.prometheus import query
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration

REPORTS = 10
RELATIVE = 0.10
MIN_IOS_FOR_MEANS = 20

# iostat JSON column -> (recording rule, factor from the rule's unit to iostat's, floor in iostat's unit)
DISK_COLUMNS = {
    "r/s": ("instance_device:node_disk_reads_completed:rate1s", 1.0, 2.0),
    "w/s": ("instance_device:node_disk_writes_completed:rate1s", 1.0, 2.0),
    "rrqm/s": ("instance_device:node_disk_reads_merged:rate1s", 1.0, 2.0),
    "wrqm/s": ("instance_device:node_disk_writes_merged:rate1s", 1.0, 2.0),
    "rkB/s": ("instance_device:node_disk_read_bytes:rate1s", 1 / 1024, 256.0),
    "wkB/s": ("instance_device:node_disk_written_bytes:rate1s", 1 / 1024, 256.0),
    "r_await": ("instance_device:node_disk_read_await_seconds:mean1s", 1000.0, 0.05),
    "w_await": ("instance_device:node_disk_write_await_seconds:mean1s", 1000.0, 0.05),
    "rareq-sz": ("instance_device:node_disk_read_request_size_bytes:mean1s", 1 / 1024, 2.0),
    "wareq-sz": ("instance_device:node_disk_write_request_size_bytes:mean1s", 1 / 1024, 2.0),
    "aqu-sz": ("instance_device:node_disk_io_time_weighted_seconds:rate1s", 1.0, 0.05),
    "util": ("instance_device:node_disk_io_time_seconds:rate1s", 100.0, 2.0),
}
# iostat -x without -s prints no combined await / areq-sz: derived from its own
# per-kind columns (computed from the same counters), see combined_figures().
COMBINED_COLUMNS = {
    "await": ("instance_device:node_disk_await_seconds:mean1s", 1000.0, 0.05),
    "areq-sz": ("instance_device:node_disk_request_size_bytes:mean1s", 1 / 1024, 2.0),
}
# Which I/O count a per-I/O mean is taken over.
MEAN_COUNT = {"r_await": ("r/s",), "rareq-sz": ("r/s",), "w_await": ("w/s",), "wareq-sz": ("w/s",),
              "await": ("r/s", "w/s", "d/s"), "areq-sz": ("r/s", "w/s", "d/s")}
CPU_COLUMNS = {
    "user": "instance:node_cpu_user:ratio1s",
    "nice": "instance:node_cpu_nice:ratio1s",
    "system": "instance:node_cpu_system:ratio1s",
    "iowait": "instance:node_cpu_iowait:ratio1s",
    "steal": "instance:node_cpu_steal:ratio1s",
    "idle": "instance:node_cpu_idle:ratio1s",
}
CPU_FLOOR = 2.0  # percentage points

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# Fields of a /proc/diskstats line after the device name (Documentation/admin-guide/iostats.rst).
READS, READS_MERGED, READ_SECTORS, READ_MS, WRITES, WRITES_MERGED, WRITTEN_SECTORS, WRITE_MS = range(8)
IO_MS, WEIGHTED_MS, DISCARDS, DISCARD_SECTORS, DISCARD_MS = 9, 10, 11, 13, 14
# iostat column -> (the counters it counts, factor to the column's unit per second)
COUNT_FIELDS = {
    "r/s": ((READS,), 1.0), "w/s": ((WRITES,), 1.0),
    "rrqm/s": ((READS_MERGED,), 1.0), "wrqm/s": ((WRITES_MERGED,), 1.0),
    "rkB/s": ((READ_SECTORS,), 0.5), "wkB/s": ((WRITTEN_SECTORS,), 0.5),
    "aqu-sz": ((WEIGHTED_MS,), 0.001), "util": ((IO_MS,), 0.1),
}
# iostat per-I/O mean -> (numerator counters, I/O counters, factor to the column's unit)
MEAN_FIELDS = {
    "r_await": ((READ_MS,), (READS,), 1.0), "w_await": ((WRITE_MS,), (WRITES,), 1.0),
    "rareq-sz": ((READ_SECTORS,), (READS,), 0.5), "wareq-sz": ((WRITTEN_SECTORS,), (WRITES,), 0.5),
    "await": ((READ_MS, WRITE_MS, DISCARD_MS), (READS, WRITES, DISCARDS), 1.0),
    "areq-sz": ((READ_SECTORS, WRITTEN_SECTORS, DISCARD_SECTORS), (READS, WRITES, DISCARDS), 0.5),
}
# The same counters as node_exporter exports them: field -> (metric, the field's unit in the metric's)
NODE_COUNTERS = {
    READS: ("node_disk_reads_completed_total", 1), READS_MERGED: ("node_disk_reads_merged_total", 1),
    READ_SECTORS: ("node_disk_read_bytes_total", 512), READ_MS: ("node_disk_read_time_seconds_total", 0.001),
    WRITES: ("node_disk_writes_completed_total", 1), WRITES_MERGED: ("node_disk_writes_merged_total", 1),
    WRITTEN_SECTORS: ("node_disk_written_bytes_total", 512), WRITE_MS: ("node_disk_write_time_seconds_total", 0.001),
    IO_MS: ("node_disk_io_time_seconds_total", 0.001), WEIGHTED_MS: ("node_disk_io_time_weighted_seconds_total", 0.001),
    DISCARDS: ("node_disk_discards_completed_total", 1), DISCARD_SECTORS: ("node_disk_discarded_sectors_total", 1),
    DISCARD_MS: ("node_disk_discard_time_seconds_total", 0.001),
}
# The modes of /proc/stat's cpu lines (in this order), as node_cpu_seconds_total's mode label
# names them; iostat's avg-cpu column -> the modes it adds up (sysstat counts interrupts as system).
CPU_MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
CPU_COLUMN_MODES = {"user": ("user",), "nice": ("nice",), "system": ("system", "irq", "softirq"),
                    "iowait": ("iowait",), "steal": ("steal",), "idle": ("idle",)}
USER_HZ = 100  # /proc/stat's unit; node_exporter divides by it
BURST_GAP_S = 0.3  # iostat's reads of one interval come within a millisecond; intervals are 1 s apart


class DiskTimeline(threading.Thread):
    """A third reader of the disk's counters: /proc/diskstats about every millisecond, and when
    the process ``pid`` (iostat) reads anything (its ``rchar`` in /proc/PID/io goes up).

    Every sample keeps the wall-clock interval its read happened in, so what is derived from
    it holds however late this thread gets scheduled: a slow sample only widens an interval.
    """

    def __init__(self, device: str):
        super().__init__(daemon=True)
        self.device = device
        self.pid: int | None = None
        # (before, after, diskstats counters, jiffies per CPU mode summed over the CPUs)
        self.samples: list[tuple[float, float, tuple[int, ...], tuple[int, ...]]] = []
        self.process_reads: list[tuple[float, float]] = []  # intervals in which pid read something
        self._stop_event = threading.Event()

    def _counters(self) -> tuple[int, ...]:
        with open("/proc/diskstats", encoding="ascii") as f:
            for line in f:
                fields = line.split()
                if fields[2] == self.device:
                    return tuple(int(x) for x in fields[3:])
        raise AssertionError(f"{self.device} not in /proc/diskstats")

    @staticmethod
    def _jiffies() -> tuple[int, ...]:
        # Summed from the per-CPU lines, as node_exporter's series are: the kernel rounds the
        # total line's nanoseconds once, not per CPU.
        total = [0] * len(CPU_MODES)
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("cpu") and line[3].isdigit():
                    for i, x in enumerate(line.split()[1:len(CPU_MODES) + 1]):
                        total[i] += int(x)
        return tuple(total)

    def _rchar(self) -> int | None:
        try:
            with open(f"/proc/{self.pid}/io", encoding="ascii") as f:
                return int(next(line for line in f if line.startswith("rchar:")).split()[1])
        except (OSError, StopIteration, TypeError):
            return None  # not started yet, or gone

    def run(self) -> None:
        last: tuple[float, int] | None = None  # (time before reading rchar, rchar)
        while not self._stop_event.is_set():
            t0 = time.time()
            rchar = self._rchar() if self.pid else None
            t1 = time.time()
            counters = self._counters()
            jiffies = self._jiffies()
            t2 = time.time()
            self.samples.append((t1, t2, counters, jiffies))
            if rchar is not None:
                if last is not None and rchar > last[1]:
                    self.process_reads.append((last[0], t1))
                last = (t0, rchar)
            time.sleep(0.001)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def read_bursts(self) -> list[tuple[float, float]]:
        """(earliest, latest) time of each of the process's bursts of reads."""
        bursts: list[list[float]] = []
        for lo, hi in self.process_reads:
            if bursts and lo - bursts[-1][1] < BURST_GAP_S:
                bursts[-1][1] = hi
            else:
                bursts.append([lo, hi])
        return [(lo, hi) for lo, hi in bursts]

    def between(self, lo: float, hi: float) -> tuple[tuple, tuple]:
        """The samples (disk counters, CPU jiffies) at some time before ``lo`` and at some time
        after ``hi``: whatever another reader read in between lies between the two, field by
        field (counters only grow)."""
        before = [sample[2:] for sample in self.samples if sample[1] <= lo]
        after = [sample[2:] for sample in self.samples if sample[0] >= hi]
        assert before and after, f"[{lo}, {hi}] not within the timeline"
        return before[-1], after[0]


def scraped_counters(prometheus: str, device: str, at: list[float]) -> list[dict[int, int]]:
    """The diskstats counters node_exporter read at each scrape in ``at``, as Prometheus stored them."""
    window = int(at[-1] - at[0]) + 3
    states: list[dict[int, int]] = [{} for _ in at]
    for field, (metric, unit) in NODE_COUNTERS.items():
        [result] = query(prometheus, f'{metric}{{job="node",device="{device}"}}[{window}s]', at[-1] + 0.5)
        by_ms = {round(float(t) * 1000): float(v) for t, v in result["values"]}
        for state, t in zip(states, at):
            state[field] = round(by_ms[round(t * 1000)] / unit)
    return states


def scraped_jiffies(prometheus: str, at: list[float]) -> list[dict[str, int]]:
    """The jiffies per CPU mode, summed over the CPUs, node_exporter read at each scrape in ``at``."""
    window = int(at[-1] - at[0]) + 3
    states: list[dict[str, int]] = [dict.fromkeys(CPU_MODES, 0) for _ in at]
    for series in query(prometheus, f'node_cpu_seconds_total{{job="node"}}[{window}s]', at[-1] + 0.5):
        mode = series["metric"]["mode"]
        if mode in CPU_MODES:
            by_ms = {round(float(t) * 1000): float(v) for t, v in series["values"]}
            for state, t in zip(states, at):
                state[mode] += round(by_ms[round(t * 1000)] * USER_HZ)
    return states


def reachable_share(column: str, percent: float, total: tuple[int, int],
                    shift: tuple[dict[str, int], dict[str, int]]) -> tuple[float, float]:
    """The lowest and highest avg-cpu percentage iostat would have printed over the scrapes'
    window: its ``total`` jiffies (low, high), of which ``percent`` in the column's modes,
    moved by ``shift`` (low, high jiffies per mode)."""
    modes = CPU_COLUMN_MODES[column]
    # The share grows with the column's own jiffies and shrinks with the other modes'.
    own = [sum(bound[m] for m in modes) for bound in shift]
    rest = [sum(v for m, v in bound.items() if m not in modes) for bound in shift]
    shares = [100 * (percent / 100 * t + own[k]) / (t + own[k] + rest[1 - k]) for t in total for k in (0, 1)]
    return min(shares), max(shares)


def reachable(column: str, disk: dict, expected: float, shift: tuple[dict[int, int], dict[int, int]],
              seconds: float) -> tuple[float, float]:
    """The lowest and highest figure iostat would have printed for ``column`` over the window of
    the scrapes instead of its own: the counters moved by ``shift`` (low, high per field) between
    the two windows."""
    low, high = shift
    if column in COUNT_FIELDS:
        fields, factor = COUNT_FIELDS[column]
        return (expected + factor * sum(low[f] for f in fields) / seconds,
                expected + factor * sum(high[f] for f in fields) / seconds)
    numerator, ios, factor = MEAN_FIELDS[column]
    count = sum(disk[c] for c in MEAN_COUNT[column])
    total = expected * count
    total_range = [total + factor * sum(bound[f] for f in numerator) / seconds for bound in (low, high)]
    count_range = [count + sum(bound[f] for f in ios) / seconds for bound in (low, high)]
    assert count_range[0] > 0, (column, disk, shift)
    return max(total_range[0], 0.0) / count_range[1], total_range[1] / count_range[0]


def block_device_of(path: str) -> str | None:
    """The whole-disk kernel name (vda, sda, nvme0n1, dm-0) holding ``path``, as iostat and node_exporter name it."""
    st = os.stat(path)
    sys_path = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(sys_path):
        return None  # overlay, tmpfs, ...: no block device of its own
    real = os.path.realpath(sys_path)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def loaded_rules(prometheus: str, file_suffix: str) -> dict[str, str]:
    """record name -> PromQL, as the running Prometheus loaded them from a rule file, once each
    rule has been evaluated (a fresh stack reports health "unknown" until its first evaluation)."""
    found: list[dict] = []

    def evaluated() -> bool:
        with _OPENER.open(f"{prometheus}/api/v1/rules?type=record", timeout=10) as r:
            groups = json.load(r)["data"]["groups"]
        found[:] = [rule for group in groups if group["file"].endswith(file_suffix) for rule in group["rules"]]
        return bool(found) and all(rule["health"] != "unknown" for rule in found)

    assert processes.wait_until(evaluated, 30, 0.2), found
    for rule in found:
        assert rule["health"] == "ok", rule
    return {rule["name"]: rule["query"] for rule in found}


def scrape_times(prometheus: str, device: str, start: float, end: float) -> list[float]:
    """Timestamps of Prometheus's scrapes of node_exporter between start and end."""
    window = max(2, int(end - start) + 2)
    result = query(prometheus, f'node_disk_io_time_seconds_total{{job="node",device="{device}"}}[{window}s]', end)
    assert len(result) <= 1, result
    return [float(t) for t, _ in (result[0]["values"] if result else []) if start <= float(t) <= end]


def spawn_loop(command: str) -> subprocess.Popen:
    # Own process group: the shell and its current dd are ended together, by this group's id.
    return subprocess.Popen(["sh", "-c", f"while :; do {command}; done"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


def combined_figures(disk: dict) -> dict[str, float]:
    """iostat -x -s's await and areq-sz, from the per-kind columns iostat -x prints."""
    ios = disk["r/s"] + disk["w/s"] + disk["d/s"]
    if ios == 0:
        return {"await": 0.0, "areq-sz": 0.0}
    ticks = disk["r_await"] * disk["r/s"] + disk["w_await"] * disk["w/s"] + disk["d_await"] * disk["d/s"]
    return {"await": ticks / ios, "areq-sz": (disk["rkB/s"] + disk["wkB/s"] + disk["dkB/s"]) / ios}


@pytest.fixture(scope="module")
def other_reader_stack(live_stack):
    """A stack whose host is read the other way than the session's (BENCHWATCH_HOST_READER): node_exporter
    scraped every second, or the benchwatch exporter's host collector remote-writing the same series."""
    other = next(r for r in HOST_READERS if r != live_stack.stack.cfg.host_reader)
    live = throwaway.start(scale=2, host_reader=other)
    try:
        yield live
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"


@pytest.fixture(params=HOST_READERS)
def host_stack(request, live_stack):
    """A stack whose host is read by each of HOST_READERS in turn: the session's, and one started for the other."""
    return live_stack if live_stack.stack.cfg.host_reader == request.param else request.getfixturevalue("other_reader_stack")


@pytest.fixture
def busy_disk(host_stack, tmp_path):
    """pgbench and two direct-I/O dd loops on the disk under tmp_path, for the duration of the test;
    yields that disk's kernel name."""
    if shutil.which("dd") is None:
        pytest.fail("dd not found")
    device = block_device_of(str(tmp_path))
    if device is None:
        pytest.skip(f"{tmp_path} is on no block device (overlay or tmpfs): nothing for iostat to report")
    read_file = tmp_path / "read.bin"
    prep = subprocess.run(["dd", "if=/dev/zero", f"of={read_file}", "bs=1M", "count=64", "oflag=direct", "status=none"],
                          capture_output=True, timeout=120)
    assert prep.returncode == 0, prep.stderr
    pgbench = subprocess.Popen([os.path.join(pg_bindir(), "pgbench"), "-n", "-c", "2", "-j", "1", "-T", str(REPORTS + 12)],
                               env=host_stack.pg_env(), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer = spawn_loop(f"dd if=/dev/zero of={tmp_path / 'write.bin'} bs=1M count=32 oflag=direct conv=notrunc status=none")
    reader = spawn_loop(f"dd if={read_file} of=/dev/null bs=64k iflag=direct status=none")
    try:
        yield device
    finally:
        stop_group(writer)
        stop_group(reader)
        if pgbench.poll() is None:
            pgbench.send_signal(signal.SIGINT)
        _out, err = pgbench.communicate(timeout=60)
        for name in ("read.bin", "write.bin"):
            (tmp_path / name).unlink(missing_ok=True)
        assert pgbench.returncode in (0, -signal.SIGINT), err


def test_rules_match_iostat(host_stack, busy_disk):
    require_tool("iostat")
    device = busy_disk
    prom = host_stack.prometheus
    # Who read the host: node_exporter's every-second scrape, or the exporter alone (no node job at all), once
    # Prometheus scrapes its targets (the 15 s inventory job's first scrape is up to 15 s away).
    assert processes.wait_until(lambda: bool(query(prom, 'up{job="node_inventory"}')), 30, 0.2)
    scraped = query(prom, 'up{job="node"}')
    assert bool(scraped) == (host_stack.stack.cfg.host_reader == "node_exporter"), scraped
    rules = loaded_rules(prom, "rules/node.yml")
    for name, _, _ in list(DISK_COLUMNS.values()) + list(COMBINED_COLUMNS.values()):
        assert name in rules, f"{name} not loaded from prometheus/rules/node.yml"
    assert set(CPU_COLUMNS.values()) <= set(rules)

    timeline = DiskTimeline(device)
    timeline.start()
    try:
        # Scrape phase: start iostat a few milliseconds after a scrape of node_exporter.
        assert processes.wait_until(lambda: len(scrape_times(prom, device, time.time() - 5, time.time())) >= 3, 30, 0.2)
        last_scrape = max(scrape_times(prom, device, time.time() - 5, time.time()))
        launch_at = last_scrape + 0.005
        while launch_at < time.time() + 0.2:
            launch_at += 1.0  # scrapes come every second on the second's same fraction
        time.sleep(launch_at - time.time())  # waiting for a point in time, not for readiness
        launched = time.time()
        # Two reports more than compared: the first and the last are dropped (see the module docstring).
        iostat = subprocess.Popen(["iostat", "-x", "-y", "-o", "JSON", "1", str(REPORTS + 2), device],
                                  env=dict(os.environ, LC_ALL="C", S_TIME_FORMAT="ISO"), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        timeline.pid = iostat.pid
        out, err = iostat.communicate(timeout=REPORTS + 30)
        assert iostat.returncode == 0, err
    finally:
        timeline.stop()
    reports = json.loads(out)["sysstat"]["hosts"][0]["statistics"]
    assert len(reports) == REPORTS + 2
    reports = reports[1:-1]
    assert processes.wait_until(lambda: bool(scrape_times(prom, device, launched + REPORTS + 1.2, time.time())), 30, 0.2)

    # iostat's reads of the counters: boundary k (k = 1 .. REPORTS + 1) is its k-th read after the one at
    # start-up; report k (after the drop) covers boundaries k to k + 1.
    iostat_reads = timeline.read_bursts()
    bounds = []
    for k in range(1, REPORTS + 2):
        near = [b for b in iostat_reads if abs(b[0] - (launched + k)) < 0.3]
        assert len(near) == 1, f"iostat's read {k}: {near} among {iostat_reads}"
        bounds.append(near[0])

    scrapes = scrape_times(prom, device, launched - 3, launched + REPORTS + 4)
    matched = []
    for lo, _ in bounds:
        nearest = min(scrapes, key=lambda s: abs(s - lo))
        # Aimed at 5 ms; iostat starting slowly on a loaded machine only shifts more onto the
        # scrapes' window below, which is measured, but the pairing must stay unambiguous.
        assert abs(nearest - lo) < 0.25, f"iostat read at {lo:.3f} but the nearest scrape is {nearest:.3f}"
        matched.append(nearest)
    assert all(abs(b - a - 1.0) < 0.05 for a, b in zip(matched, matched[1:])), matched
    offsets = [round((lo - s) * 1000) for (lo, _), s in zip(bounds, matched)]

    # How far the counters had moved from what node_exporter read at each matched scrape (Prometheus
    # stored it) to what iostat read: at least ``low``, at most ``high`` (our samples around iostat's read).
    ahead, cpu_ahead, around = [], [], []
    for (io_lo, io_hi), scraped, jiffies in zip(bounds, scraped_counters(prom, device, matched),
                                                scraped_jiffies(prom, matched)):
        (before, before_cpu), (after, after_cpu) = timeline.between(io_lo, io_hi)
        around.append((sum(before_cpu), sum(after_cpu)))
        ahead.append(({f: before[f] - v for f, v in scraped.items()}, {f: after[f] - v for f, v in scraped.items()}))
        cpu_ahead.append(({m: before_cpu[i] - jiffies[m] for i, m in enumerate(CPU_MODES)},
                          {m: after_cpu[i] - jiffies[m] for i, m in enumerate(CPU_MODES)}))

    def evaluated(name: str, labels: dict[str, str]) -> list[float]:
        # The rule's own expression, half a second after each scrape that ends a report's window.
        # One query per window: scrapes are a second apart give or take a few milliseconds, so a
        # range query's fixed steps can hold one evaluation fewer than there are windows.
        values = []
        for end in matched[1:]:
            result = query(prom, rules[name], end + 0.5)
            found = [r for r in result if all(r["metric"].get(k) == v for k, v in labels.items())]
            assert len(found) == 1, (name, end, result)
            values.append(float(found[0]["value"][1]))
        return values

    node = {"job": "node", "device": device}
    failures, compared, table, strict = [], 0, [], {}
    disks = []
    for report in reports:
        [disk] = [d for d in report["disk"] if d["disk_device"] == device]
        disks.append(disk)
    for column, (name, factor, floor) in {**DISK_COLUMNS, **COMBINED_COLUMNS}.items():
        values = evaluated(name, node)
        for j, (disk, value) in enumerate(zip(disks, values)):
            expected = combined_figures(disk)[column] if column in COMBINED_COLUMNS else disk[column]
            if column in MEAN_COUNT and sum(disk[c] for c in MEAN_COUNT[column]) < MIN_IOS_FOR_MEANS:
                continue
            seconds = matched[j + 1] - matched[j]
            # The scrapes' window gains what moved at its start and loses what moved at its end.
            shift = ({f: ahead[j][0][f] - ahead[j + 1][1][f] for f in NODE_COUNTERS},
                     {f: ahead[j][1][f] - ahead[j + 1][0][f] for f in NODE_COUNTERS})
            low, high = reachable(column, disk, expected, shift, seconds)
            tolerance = max(RELATIVE * abs(expected), floor)
            compared += 1
            strict.setdefault(column, []).append(high - low <= tolerance)
            table.append((j + 1, column, expected, value * factor, low, high))
            if not low - tolerance <= value * factor <= high + tolerance:
                failures.append(f"second {j + 1} {column}: iostat {expected:.2f} (over the scrapes' window "
                                f"{low:.2f} to {high:.2f}), {name} {value * factor:.4f}")
    for column, name in CPU_COLUMNS.items():
        values = evaluated(name, {"job": "node"})
        for j, (report, value) in enumerate(zip(reports, values)):
            compared += 1
            expected = report["avg-cpu"][column]
            # iostat's own total: what the CPUs ticked between its two reads.
            total = (around[j + 1][0] - around[j][1], around[j + 1][1] - around[j][0])
            shift = ({m: cpu_ahead[j][0][m] - cpu_ahead[j + 1][1][m] for m in CPU_MODES},
                     {m: cpu_ahead[j][1][m] - cpu_ahead[j + 1][0][m] for m in CPU_MODES})
            low, high = reachable_share(column, expected, total, shift)
            strict.setdefault("%" + column, []).append(high - low <= CPU_FLOOR)
            table.append((j + 1, "%" + column, expected, value * 100, low, high))
            if not low - CPU_FLOOR <= value * 100 <= high + CPU_FLOOR:
                failures.append(f"second {j + 1} %{column}: iostat {expected:.2f} (over the scrapes' window "
                                f"{low:.2f} to {high:.2f}), {name} {value * 100:.2f}")

    # Shown by pytest on failure (or with -rP): every pair compared.
    print(f"iostat read {offsets} ms after the scrapes, each read located within "
          f"{[round((hi - lo) * 1000, 1) for lo, hi in bounds]} ms")
    for row in table:
        print("second {:2d} {:<9} iostat {:10.2f} rule {:12.4f}  over the scrapes' window {:.2f} to {:.2f}".format(*row))

    # The load must have reached the disk, or the comparison proves little.
    mean = lambda column: sum(d[column] for d in disks) / len(disks)  # noqa: E731
    assert mean("r/s") > 50 and mean("w/s") > 50, (mean("r/s"), mean("w/s"))
    assert mean("util") > 10, mean("util")
    means_compared = sum(1 for d in disks if d["r/s"] >= MIN_IOS_FOR_MEANS and d["w/s"] >= MIN_IOS_FOR_MEANS)
    assert means_compared >= REPORTS // 2, "too few seconds with enough I/O to compare await and request sizes"
    assert not failures, f"{len(failures)} of {compared} figures disagree (iostat read {offsets} ms after the scrapes):\n" + "\n".join(failures)
    # Where iostat's reads are located must leave most comparisons as tight as the tolerance alone,
    # or a wrong rule could hide in the uncertainty.
    loose = {c: f"{ok.count(False)} of {len(ok)}" for c, ok in strict.items() if ok.count(True) < len(ok) / 2}
    assert not loose, f"seconds where iostat's figure over the scrapes' window is uncertain beyond the tolerance: {loose}"

    # The recorded series are live too, at their group's 15 s interval (docs/rules.md: the
    # dashboards compute the rules' expressions at query time for 1 s resolution).
    def recorded() -> bool:
        return all(query(prom, f'count_over_time({name}{{device="{device}"}}[40s])') for name, _, _ in DISK_COLUMNS.values())
    assert processes.wait_until(recorded, 20, 0.5), [name for name, _, _ in DISK_COLUMNS.values()
                                                     if not query(prom, f'count_over_time({name}{{device="{device}"}}[40s])')]


# -- PostgreSQL rules, live -----------------------------------------------------

def _value(prom: str, promql: str) -> float | None:
    result = query(prom, promql)
    return float(result[0]["value"][1]) if len(result) == 1 else None


def test_postgres_rules_live(live_stack):
    """The custom queries run cleanly on this server, and the unified checkpoint,
    pg_control and server-side TPS rules read what PostgreSQL and pgbench say."""
    prom, live = live_stack.prometheus, live_stack
    server = 'job="postgres"'
    assert processes.wait_until(lambda: _value(prom, f"pg_control_checkpoint_max_wal_size_bytes{{{server}}}") is not None, 30, 0.2)
    # A failing custom query would set this on every scrape (postgres_exporter 0.11.1).
    assert _value(prom, "pg_exporter_last_scrape_error") == 0
    assert _value(prom, f"pg_control_checkpoint_max_wal_size_bytes{{{server}}}") == \
        float(live.psql("SELECT pg_size_bytes(current_setting('max_wal_size'))"))

    # A CHECKPOINT is a requested checkpoint on every version; the unified series follow it.
    v17 = int(live.psql("SHOW server_version_num")) >= 170000
    stats = ("SELECT num_requested, write_time, sync_time, buffers_written FROM pg_stat_checkpointer" if v17 else
             "SELECT checkpoints_req, checkpoint_write_time, checkpoint_sync_time, buffers_checkpoint FROM pg_stat_bgwriter")
    before = int(live.psql(stats).split("|")[0])
    live.psql("CHECKPOINT")
    rows = {}

    def unified_matches() -> bool:
        req, write_ms, sync_ms, buffers = (float(x) for x in live.psql(stats).split("|"))
        rows["sql"] = (req, write_ms / 1000, sync_ms / 1000, buffers)
        rows["rules"] = tuple(_value(prom, f"instance:{n}:total{{{server}}}") for n in (
            "pg_checkpoints_requested", "pg_checkpoint_write_seconds", "pg_checkpoint_sync_seconds",
            "pg_checkpoint_buffers_written"))
        return rows["sql"] == rows["rules"]
    assert processes.wait_until(unified_matches, 30, 0.2), rows
    assert rows["sql"][0] >= before + 1

    control = "SELECT pg_wal_lsn_diff(redo_lsn, '0/0'), extract(epoch FROM checkpoint_time) FROM pg_control_checkpoint()"
    redo, at = (float(x) for x in live.psql(control).split("|"))
    assert processes.wait_until(lambda: _value(prom, f"pg_control_checkpoint_redo_lsn_bytes{{{server}}}") == redo, 30, 0.2)
    assert _value(prom, f"pg_control_checkpoint_timestamp_seconds{{{server}}}") == at

    # Server-side TPS against pgbench. The server's counters trail pgbench's
    # -P lines by up to a second (backends flush them at most once a second)
    # and move in lumps, so compare counts: the rule, evaluated once per scrape
    # pair of the postgres job, times each pair's interval, summed over the run,
    # is every transaction the server ended, pgbench's plus the exporters' own.
    db = live.stack.cfg.pg_database
    labels = {"job": "postgres", "datname": db}
    pg_rules = loaded_rules(prom, "rules/postgres.yml")
    counter = f'pg_stat_database_xact_commit{{job="postgres",datname="{db}"}}'

    def postgres_scrapes(start: float, end: float) -> list[float]:
        result = query(prom, f"{counter}[{int(end - start) + 3}s]", end)
        return [float(t) for t, _ in (result[0]["values"] if result else []) if start <= float(t) <= end]

    # The exporters' own transactions, measured before the run (after the load of
    # any earlier test has drained).
    # The rule's expression, as the dashboards query it: the rule itself is recorded every 15 s only.
    tps_rule = grafana_rules.expr("instance_datname:pg_xact:rate1s", f'job="postgres", datname="{db}"')
    assert processes.wait_until(lambda: (_value(prom, f"max_over_time({tps_rule}[3s:1s])") or 1e9) < 100, 60, 0.2)
    background = _value(prom, f"avg_over_time({tps_rule}[3s:1s])")
    lsn = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
    lsn_before = float(live.psql(lsn))
    launched = time.time()
    run = live.pgbench("-n", "-c", "2", "-j", "1", "-T", "6", timeout=120)
    assert run.returncode == 0, run.stderr
    ended = time.time()
    processed = int(re.search(rb"number of transactions actually processed: (\d+)", run.stdout).group(1))
    assert processes.wait_until(lambda: bool(postgres_scrapes(ended + 2, ended + 5)), 30, 0.2)
    wal_written = float(live.psql(lsn)) - lsn_before
    scrapes = postgres_scrapes(launched - 1.5, ended + 2)
    assert all(0.5 < b - a < 1.5 for a, b in zip(scrapes, scrapes[1:])), scrapes

    def per_pair(record: str, match: dict[str, str]) -> list[float | None]:
        values = []
        for pair_end in scrapes[1:]:  # each pair once: half a second after its second scrape
            found = [r for r in query(prom, pg_rules[record], pair_end + 0.5)
                     if all(r["metric"].get(k) == v for k, v in match.items())]
            assert len(found) <= 1, found
            values.append(float(found[0]["value"][1]) if found else None)
        return values

    def integral(rates: list[float]) -> float:
        return sum(rate * (b - a) for rate, a, b in zip(rates, scrapes, scrapes[1:]))

    rates = per_pair("instance_datname:pg_xact:rate1s", labels)
    counted = integral(rates)
    expected = processed + background * (scrapes[-1] - scrapes[0])
    wal = integral(per_pair("instance:pg_wal_bytes:rate1s", {"job": "postgres"}))
    print(f"server-side {counted:.0f} transactions, pgbench {processed} + background {background:.1f}/s "
          f"over {scrapes[-1] - scrapes[0]:.1f} s; peak {max(rates):.0f}/s; WAL {wal:.0f} B by the rule, "
          f"{wal_written:.0f} B by the insert LSN")
    assert abs(counted - expected) <= 0.05 * processed, (counted, processed, background, rates)
    assert max(rates) > 10 * background
    # WAL: the same integral against how far the WAL insert position moved
    # (which also counts page headers: a fraction of a percent).
    assert abs(wal - wal_written) <= RELATIVE * wal_written, (wal, wal_written)
    fpi = [v for v in per_pair("instance:pg_wal_fpi_per_record:ratio1s", {"job": "postgres"}) if v is not None]
    # a WAL record carries a few block images at most
    assert fpi and all(0 <= v <= 4 for v in fpi), fpi
