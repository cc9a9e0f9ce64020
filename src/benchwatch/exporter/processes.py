"""The processes collector: CPU time of the database's, the load generator's and every other process.

Linux's pressure stall information (node_exporter's ``pressure`` collector) says when runnable
tasks waited for a CPU, not whose tasks ran instead: a database that is CPU-bound on its own and
a busy loop beside it look the same there. This collector reads ``/proc/<pid>/stat`` of every
process it can see (about 1 ms of CPU per 100 processes): every ``LIVE_EVERY_S`` seconds while a followed
run is live and steady, every ``EVERY_S`` from a possibly low TPS line on and ``FAST_HOLD_S`` after,
every ``IDLE_EVERY_S`` between runs, and always every ``EVERY_S`` where the daemon follows no runs (an
agent's), and
remote-writes

- ``benchmark_host_cpu_seconds_total{group}``: CPU time of the ``database`` (the engines' server
  processes), the ``load_generator`` (every load generator's programs), ``new`` processes (any
  other started less than ``NEW_S`` ago) and ``other`` processes, counted from the exporter's
  start (a process that exits keeps what it used);
- ``benchmark_host_top_process_cpu_ratio{comm, pid, group}``: for the few busiest ``new`` and
  ``other`` processes only (CPU seconds per second since the last scan, at least
  ``TOP_MIN_RATIO``), so that ``explain``'s cpu_contention can name them without a series per
  process on the host;
- ``benchmark_host_cpus``: CPUs the host has, what a share of the machine is counted against.

Processes are told apart by name (``comm``), as ps shows them: every engine's server process
(``Engine.server_processes``) on the host counts as the database, every load generator's program
as the load generator.

Why ``new`` apart: on a machine whose CPUs are already all in use, a busy process that starts
takes its CPU from everyone, the other processes too, so the others' total hardly moves while
the database's share falls; what does move is the CPU of processes that were not there before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping

from benchwatch.collector import ORDER_AFTER_DIPS, ExporterOptions, MetricsDoc, register_collector
from benchwatch.model.samples import Sample, sample

# A scan costs ~1 ms of CPU per 100 processes. While a run is live and steady a scan every LIVE_EVERY_S
# gives the dips their baseline; from a possibly low TPS line on (ExporterOptions.on_possibly_low, the
# dips collector's judgement, the statements collector's pace too) and FAST_HOLD_S after, every EVERY_S,
# so a CPU hog of a few seconds still gets 2-4 samples (issue 32: 5 s instead of 2 s on a steady run
# halves the collector's cost where watching is measured).
EVERY_S = 2.0
LIVE_EVERY_S = 5.0
FAST_HOLD_S = 10.0
# While no followed run is live (ExporterOptions.run_live): what other processes do matters only against a
# run, so the scan is this far apart (the counters stay right: a rate over the gap is its mean).
IDLE_EVERY_S = 30.0
TOP = 3                # busiest other processes named per scan
TOP_MIN_RATIO = 0.1    # below a tenth of a CPU a process explains nothing
NEW_S = 30.0           # a process younger than this is "new"
GROUPS = ("database", "load_generator", "new", "other")

METRICS: dict[str, tuple[str, str]] = {
    "benchmark_host_cpu_seconds_total": (
        "counter", "CPU time (user + system) used by the host's processes of a group (database, load_generator, "
                   "new: any other started in the last 30 s, other) since the exporter started, from /proc every 5 s while a run is live, every 2 s from a possibly low line on "
                   "(every 30 s between runs)."),
    "benchmark_host_top_process_cpu_ratio": (
        "gauge", "CPU seconds per second of one of the 3 busiest new and 3 busiest other processes (comm, pid, group) "
                 "since the scan before (2-5 s), written only when at least 0.1."),
    "benchmark_host_cpus": ("gauge", "CPUs of the host (what a share of the machine is counted against)."),
}

METRICS_DOC_SECTION = """
## The host's processes (benchwatch exporter, `processes` collector)

CPU time of the database's processes (the engines' servers: {servers}, ...), the load
generators' ({tools}) and every other process the exporter can see, read from
`/proc/<pid>/stat` every 5 s while a run is live and steady, every 2 s from a possibly low TPS line on (every 30 s
between runs) and remote-written: `benchwatch explain` tells "something else used the
CPU" (`cpu_contention`) from the database being busy (`database_cpu_bound`, [explain.md](explain.md)). They carry the
exporter's `target` and `host` labels; the processes are told apart by name.

| metric | type | meaning |
| --- | --- | --- |
"""

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


Proc = tuple[str, float, float]  # comm, CPU seconds used so far (user + system), start (seconds after boot)


def uptime(root: str = "/proc") -> float:
    """Seconds since boot, what a process's start time counts from."""
    try:
        with open(os.path.join(root, "uptime"), "rb") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def read_proc(root: str = "/proc") -> dict[int, Proc]:
    """pid -> (comm, CPU seconds used so far, start in seconds after boot), for every process readable now."""
    out: dict[int, Proc] = {}
    try:
        names = os.listdir(root)
    except OSError:
        return out
    # os.open/os.read rather than open(): a third less CPU per scan (no file object, no buffer).
    prefix = root + "/"
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = os.open(prefix + name + "/stat", os.O_RDONLY)
        except OSError:
            continue  # gone between the listing and the read
        try:
            data = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        # comm is in parentheses and may itself hold spaces or parentheses: split at the last ")".
        close = data.rfind(b")")
        fields = data[close + 2:].split(None, 20)
        if close < 0 or len(fields) < 20:
            continue
        comm = data[data.find(b"(") + 1:close].decode("utf-8", "replace")
        out[int(name)] = (comm, (int(fields[11]) + int(fields[12])) / CLK_TCK, int(fields[19]) / CLK_TCK)
    return out


class CpuGroups:
    """Turns successive /proc readings into each group's cumulative CPU time and the busiest others."""

    def __init__(self, database: Iterable[str], load_generator: Iterable[str]):
        self.names = {"database": frozenset(database), "load_generator": frozenset(load_generator)}
        self.total = dict.fromkeys(GROUPS, 0.0)
        self.last: dict[int, Proc] | None = None
        self.last_at = 0.0

    def group(self, comm: str, age: float) -> str:
        for group, names in self.names.items():
            if comm in names:
                return group
        return "new" if age < NEW_S else "other"

    def feed(self, procs: Mapping[int, Proc], now: float, booted_s: float) -> list[tuple[str, int, str, float]]:
        """Adds what each process used since the last reading (``booted_s``: seconds since boot now);
        returns the busiest new and other processes as (comm, pid, group, CPU seconds per second).
        The first reading only sets the starting point."""
        first = self.last is None
        last = self.last or {}
        used: list[tuple[str, int, str, float]] = []
        for pid, (comm, cpu, started) in procs.items():
            before = last.get(pid)
            # A pid seen for the first time was born since the last reading: all its time is new; so is a
            # reused pid's (less than before). A changed name is the same process (an exec, or a kernel
            # worker naming its current work queue, "kworker/0:1-events"): counted from before.
            delta = cpu if before is None or cpu < before[1] else cpu - before[1]
            if first or delta <= 0:
                continue
            group = self.group(comm, booted_s - started)
            self.total[group] += delta
            if group in ("new", "other"):
                used.append((comm, pid, group, delta))
        elapsed = now - self.last_at
        self.last, self.last_at = dict(procs), now
        if first or elapsed <= 0:
            return []
        top = [u for g in ("new", "other") for u in sorted((u for u in used if u[2] == g), key=lambda u: -u[3])[:TOP]]
        return [(comm, pid, g, d / elapsed) for comm, pid, g, d in top if d / elapsed >= TOP_MIN_RATIO]


def server_process_names() -> frozenset[str]:
    from benchwatch import engines

    return frozenset(n for e in engines.load_engines().values() for n in e.server_processes)


def load_generator_names() -> frozenset[str]:
    from benchwatch import loadgens

    return frozenset(n for g in loadgens.load_generators().values() for n in g.programs)


class ProcessesCollector:
    def __init__(self, sink: Callable[[list[Sample]], None], clock: Callable[[], float] = time.time,
                 labels: Mapping[str, str] | None = None, root: str = "/proc",
                 database: Iterable[str] | None = None, load_generator: Iterable[str] | None = None,
                 run_live: Callable[[], bool] | None = None,
                 on_possibly_low: Callable[[Callable[[], None]], None] | None = None):
        self.sink = sink
        self.run_live = run_live
        # A daemon that follows no runs (an agent's log follower) has no TPS line to judge: every EVERY_S.
        self.fast_until = float("inf") if on_possibly_low is None or run_live is None else 0.0
        if on_possibly_low is not None:
            on_possibly_low(self.hurry)
        self.clock = clock
        self.labels = dict(labels or {})
        self.root = root
        self.groups = CpuGroups(server_process_names() if database is None else database,
                                load_generator_names() if load_generator is None else load_generator)
        self.cpus = os.cpu_count() or 1
        self.next_at = 0.0

    def hurry(self) -> None:
        """A possibly low TPS line: scan at the fast pace from the next poll, for FAST_HOLD_S."""
        self.fast_until = max(self.fast_until, self.clock() + FAST_HOLD_S)

    def poll(self) -> int:
        now = self.clock()
        live = self.run_live is None or self.run_live()
        step = IDLE_EVERY_S if not live else EVERY_S if now < self.fast_until else LIVE_EVERY_S
        # A run that starts, or a line that turns low, while a slower pace waits: scanned within a second.
        if now < self.next_at and self.next_at - now <= step:
            return 0
        self.next_at = now + step
        first = self.groups.last is None
        top = self.groups.feed(read_proc(self.root), now, uptime(self.root))
        if first:
            return 0  # the starting point: nothing used since yet
        ts = round(now * 1000)
        out = [sample("benchmark_host_cpu_seconds_total", {**self.labels, "group": g}, self.groups.total[g], ts)
               for g in GROUPS]
        out.append(sample("benchmark_host_cpus", self.labels, self.cpus, ts))
        out += [sample("benchmark_host_top_process_cpu_ratio", {**self.labels, "comm": comm, "pid": pid, "group": g},
                       round(r, 3), ts) for comm, pid, g, r in top]
        self.sink(out)
        return len(out)

    def collect(self) -> Iterable:
        return ()  # remote-written at the scan's time, like the dips; the scrape would drop them anyway


@register_collector("processes", "CPU time of the database's, the load generator's and other processes (/proc)",
                    order=ORDER_AFTER_DIPS)
def _build(options: ExporterOptions) -> ProcessesCollector | None:
    if not os.path.isdir("/proc"):
        return None
    return ProcessesCollector(options.sink, clock=options.clock, labels=options.database_labels,
                              run_live=options.run_live, on_possibly_low=options.on_possibly_low)


def metrics_doc() -> MetricsDoc:
    from benchwatch import engines, loadgens

    # One server program per engine, the default engine's first; the tools as the registry has them.
    ordered = sorted(engines.load_engines().values(), key=lambda e: not e.default)
    servers = ", ".join(f"`{min(e.server_processes)}`" for e in ordered if e.server_processes)
    return MetricsDoc([(METRICS_DOC_SECTION.format(servers=servers, tools=", ".join(f"`{t}`" for t in loadgens.titles())),
                        METRICS)])
