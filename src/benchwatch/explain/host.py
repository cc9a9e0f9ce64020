"""The host's causes of a dip, whatever the engine: a disk's measures rose (disk), other processes took
the CPUs (cpu_contention), the database's own processes filled them (database_cpu_bound), tasks stalled
on I/O (io_pressure). Registered by benchwatch.explain.causes; node_exporter's and the exporter's
processes collector's series."""

from __future__ import annotations

import statistics
from typing import Any

from benchwatch.causes import (
    MIN_SCORE,
    Candidate,
    Dip,
    Registry,
    Scorer,
    Signals,
    Timeline,
    active_seconds,
    clean,
    deviation,
    host_of,
    rates,
    spacing,
    sum_by_time,
    window_values,
)
from benchwatch.query.frames import prefer_pushed
from benchwatch.record.host import NOT_DISKS

# How far above its run median a disk measure must rise (as well as doubling) to count:
# %util as a share, await in seconds, writes in bytes per second.
DISK_FLOORS = {"util": 0.2, "await": 0.001, "written": 8 * 2**20}
# await counts only in seconds the disk was at least this busy (%util / 100).
AWAIT_MIN_UTIL = 0.05
# cpu_contention: other processes (or new ones alone) must use this many CPUs more than usual;
# a rise of half the machine's CPUs is full strength.
OTHER_CPU_FLOOR = 0.3
# ... and it hurt the run only if the database and the load generator got less CPU than usual
# (below this share of their median); otherwise (a VACUUM FULL working beside a CPU hog) it weighs half.
SQUEEZED = 0.9
# Pressure stall information: the share of the second some task waited, above its usual by this much.
PRESSURE_FLOOR = 0.1
IO_PRESSURE_FLOOR = 0.2
# database_cpu_bound: the database's processes must use this many CPUs more than usual and at least this
# share of the host's CPUs (the machine's main user: the load generator on the same host needs its share,
# so 'all of them' is out of reach), while the CPUs are full: tasks waited for one (PSI at PRESSURE_FLOOR),
# or, without PSI, every process together used this share of them.
DATABASE_CPU_FLOOR = 0.3
DATABASE_CPU_SHARE = 0.5
FULL = 0.9
BUSIEST = 5  # processes named in cpu_contention's evidence (a few busy loops are each a small share)

# The host's causes: symptoms as much as causes (listed after the engine's in a run's signals).
HOST = ("cpu_contention", "database_cpu_bound", "io_pressure")
DISK_SERIES = ("node_disk_io_time_seconds_total", "node_disk_read_time_seconds_total",
               "node_disk_write_time_seconds_total", "node_disk_reads_completed_total",
               "node_disk_writes_completed_total", "node_disk_written_bytes_total")
CPU_SERIES = ("node_pressure_cpu_waiting_seconds_total", "benchmark_host_cpu_seconds_total",
              "benchmark_host_top_process_cpu_ratio", "benchmark_host_cpus")


# -- the host's timelines, once per run -----------------------------------------------------------

def disks(signals: Signals) -> dict[str, dict[str, Timeline]]:
    """Per device: util (share of the second busy, iostat %util / 100), await (seconds per I/O) and
    written (bytes per second: a fast or cached disk may absorb a write burst without queueing)."""
    by_dev: dict[str, dict[str, Any]] = {}
    for s in prefer_pushed(signals.series):
        if s.name.startswith("node_disk_") and not NOT_DISKS.match(s.labels.get("device", "")):
            key = f"{s.labels.get('instance', '')}|{s.labels.get('device', '')}"
            by_dev.setdefault(key, {})[s.name] = s
    out = {}
    for key, m in by_dev.items():
        dev = key.split("|", 1)[1]
        util = rates(m["node_disk_io_time_seconds_total"]) if "node_disk_io_time_seconds_total" in m else []
        names = ("node_disk_read_time_seconds_total", "node_disk_write_time_seconds_total",
                 "node_disk_reads_completed_total", "node_disk_writes_completed_total")
        if all(n in m for n in names):
            rt, wt, rc, wc = (dict((round(t), v) for t, v in rates(m[n])) for n in names)
            # Only the seconds the disk was busy enough for its I/O to hold anyone up: a few writes of an
            # idle disk taking 1 ms instead of 0.1 is no cause (a point-select run beside busy loops).
            busy = {round(t): v for t, v in util}
            await_ = [(float(t), (rt[t] + wt.get(t, 0.0)) / (rc.get(t, 0.0) + wc.get(t, 0.0)))
                      for t in sorted(rt) if rc.get(t, 0.0) + wc.get(t, 0.0) > 0
                      and (not busy or busy.get(t, 0.0) >= AWAIT_MIN_UTIL)]
        else:
            await_ = []
        written = rates(m["node_disk_written_bytes_total"]) if "node_disk_written_bytes_total" in m else []
        if util or await_ or written:
            out[dev] = {"util": util, "await": await_, "written": written}
    return out


class Cpu:
    """Per host: pressure stall information (share of each second some task waited) and the processes
    collector's CPU by group (CPUs used), its busiest other processes and CPU count."""

    def __init__(self, signals: Signals):
        self.pressure = {host_of(s): rates(s) for s in signals.named("node_pressure_cpu_waiting_seconds_total")}
        self.io_pressure = {host_of(s): rates(s) for s in signals.named("node_pressure_io_waiting_seconds_total")}
        self.groups: dict[str, dict[str, Timeline]] = {}
        for s in signals.named("benchmark_host_cpu_seconds_total"):
            self.groups.setdefault(host_of(s), {})[s.labels.get("group", "?")] = rates(s)
        self.top_processes: dict[str, list[tuple[float, str, str, float]]] = {}
        for s in signals.named("benchmark_host_top_process_cpu_ratio"):
            name = f"{s.labels.get('comm', '?')} (pid {s.labels.get('pid', '?')})"
            group = s.labels.get("group", "other")
            self.top_processes.setdefault(host_of(s), []).extend((t, name, group, v) for t, v in clean(s))
        self.cpus = {host_of(s): v for s in signals.named("benchmark_host_cpus") for _, v in clean(s)[-1:]}

    def waited(self, host: str, lo: float, end: float) -> float | None:
        """The highest share of a second some task waited for a CPU on the host in [lo, end] (PSI; the only
        host's when the processes collector and node_exporter name it apart), None without PSI."""
        psi = self.pressure.get(host) or (next(iter(self.pressure.values())) if len(self.pressure) == 1 else None)
        waited = window_values(psi, lo, end) if psi else []
        return min(1.0, max(waited)) if waited else None

    def busiest(self, host: str, lo: float, hi: float, first: str) -> list[tuple[str, float]]:
        """The processes that used most CPU in [lo, hi], with their mean CPUs over the scans there:
        new ones first when it is the newcomers' rise that is the evidence."""
        seen = [(t, name, g, v) for t, name, g, v in self.top_processes.get(host, []) if lo < t <= hi]
        scans = len({round(t) for t, *_ in seen}) or 1
        used: dict[str, float] = {}
        newcomer: set[str] = set()  # new in any scan: a process ages from new to other mid-window, one entry
        for _, name, g, v in seen:
            used[name] = used.get(name, 0.0) + v
            if g == first:
                newcomer.add(name)
        ahead = newcomer if first == "new" else set(used)
        return [(n, v / scans) for n, v in sorted(used.items(), key=lambda x: (x[0] not in ahead, -x[1]))[:BUSIEST]]


def rise(tl: Timeline, run_start: float, run_end: float, lo: float, hi: float,
         floor: float, at_least: float = 0.0) -> tuple[float, float, float] | None:
    """(active seconds, mean while active, baseline) of a level (CPUs used) that rose by at least ``floor``
    above the run's median in [lo, hi], and to ``at_least``; unlike deviation it need not double (a loaded
    machine's CPUs cannot)."""
    base = statistics.median(window_values(tl, run_start, run_end) or [0.0])
    step = spacing(tl)
    threshold = max(base + floor, at_least)
    up = [v for t, v in tl if lo < t <= hi + step and v >= threshold]
    if not up:
        return None
    return active_seconds(tl, lambda v: v >= threshold, lo, hi + step, step), statistics.fmean(up), base


def mean_over(tl: Timeline, a: float, b: float) -> float | None:
    """The time-weighted mean of a rate timeline over [a, b], each sample standing for the time since the
    one before it (the first for the usual spacing); None when no sample covers any of it."""
    step = spacing(tl)
    total = weight = 0.0
    prev = None
    for t, v in tl:
        since = t - step if prev is None else prev
        prev = t
        covered = min(b, t) - max(a, since)
        if covered > 0:
            total += v * covered
            weight += covered
    return total / weight if weight > 0 else None


# -- the disk -------------------------------------------------------------------------------------

def busiest_disk(dip: Dip, signals: Signals) -> tuple | None:
    """(active seconds, strength, peak, baseline, device, measure, the seconds it was up): the device whose
    measures (%util, await, writes) rose most, active whenever any of them was up."""
    def find() -> tuple | None:
        ctx = signals.ctx
        best = None
        for dev, tls in signals.memo("disks", disks).items():
            measures = {what: got for what, tl in tls.items()
                        if (got := deviation(tl, ctx.run_start, ctx.run_end, dip.lo, dip.end, floor=DISK_FLOORS[what]))}
            if not measures:
                continue
            what = max(measures, key=lambda w: measures[w][1])
            up: set[int] = set()
            for w in measures:
                threshold = measures[w][4]
                up |= {round(t) for t, v in tls[w] if v >= threshold and dip.lo < t <= dip.end + 1}
            active_s = float(len(up))
            _, strength, peak, base, _ = measures[what]
            if best is None or active_s * strength > best[0] * best[1]:
                best = (active_s, strength, peak, base, dev, what, up)
        return best
    return dip.memo("busiest_disk", find)


class Disk(Scorer):
    name = "disk"
    needs = DISK_SERIES
    weight = 0.8
    order = 50

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        best = busiest_disk(dip, signals)
        if not best:
            return None
        active_s, strength, peak, base, dev, what, _up = best
        shown = {"util": f"%util {peak * 100:.0f}% ({base * 100:.0f}% usually)",
                 "await": f"await {peak * 1000:.1f} ms ({base * 1000:.1f} ms usually)",
                 "written": f"writes {peak / 2**20:.0f} MiB/s ({base / 2**20:.1f} MiB/s usually)"}[what]
        return self.candidate(dip, active_s, strength, f"disk {dev}: {shown}", device=dev, measure=what,
                              peak=round(peak, 4), baseline=round(base, 4))


def disk_busy(dip: Dip, signals: Signals) -> set[int]:
    """The seconds the busiest disk was up in the dip (each sample stands for the second before it): whether
    a checkpoint wrote then is the checkpoint's to say."""
    best = busiest_disk(dip, signals)
    return set(best[6]) if best else set()


def write_surge(dip: Dip, signals: Signals) -> bool:
    """Whether a disk's measures rose in the dip (whatever weighs the disk): a checkpoint the WAL of that
    surge requested is its consequence."""
    return busiest_disk(dip, signals) is not None


# -- the CPUs -------------------------------------------------------------------------------------

def _contention(dip: Dip, signals: Signals) -> tuple[tuple | None, set[str]]:
    """The strongest rise of other processes' CPU, and the hosts where they rose (theirs is the answer there)."""
    def find() -> tuple[tuple | None, set[str]]:
        cpu = signals.memo("cpu", Cpu)
        r0, r1 = signals.ctx.run_start, signals.ctx.run_end
        best: tuple | None = None
        contended: set[str] = set()
        for host, groups in cpu.groups.items():
            cpus = cpu.cpus.get(host) or 1.0
            # Every process but the database's and the load generator's; and those started lately alone:
            # on a machine already short of CPU a newcomer takes its share from everyone, the others
            # too, so their total hardly moves while the newcomers' does.
            measures = {"all": sum_by_time([groups.get("other") or [], groups.get("new") or []]),
                        "new": groups.get("new") or []}
            for which, tl in measures.items():
                got = rise(tl, r0, r1, dip.lo, dip.end, OTHER_CPU_FLOOR)
                if not got:
                    continue
                active_s, used, base = got
                contended.add(host)
                strength = min(1.0, (used - base) / (0.5 * cpus))
                if best is None or active_s * strength > best[0] * best[1]:
                    best = (active_s, strength, host, which, used, base, cpus)
        return best, contended
    return dip.memo("contention", find)


class CpuContention(Scorer):
    """Processes other than the database and the load generator took CPU time (the processes collector),
    while tasks waited for a CPU (pressure stall information, when there)."""
    name = "cpu_contention"
    needs = CPU_SERIES
    order = 110

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        best, _ = _contention(dip, signals)
        if not best:
            return None
        cpu = signals.memo("cpu", Cpu)
        r0, r1 = signals.ctx.run_start, signals.ctx.run_end
        active_s, strength, host, which, used, base, cpus = best
        who = "processes started lately" if which == "new" else "other processes"
        text = f"{who} used {used:.1f} of {cpus:.0f} CPUs ({base:.1f} usually)"
        groups = cpu.groups[host]
        ours = sum_by_time([groups.get("database") or [], groups.get("load_generator") or []])
        ours_usual = statistics.median(window_values(ours, r0, r1) or [0.0])
        # Over the dip itself: a scan every 2-3 s on a loaded machine, the one just inside the window
        # stands mostly for the seconds before the dip, when they still got their usual CPU.
        got_now = mean_over(ours, dip.start, dip.end)
        if got_now is not None:
            text += f"; the database and the load generator got {got_now:.1f} CPUs ({ours_usual:.1f} usually)"
            if got_now >= SQUEEZED * ours_usual:
                strength *= 0.5  # they got what they usually get: the others did not take it from them
        top = cpu.busiest(host, dip.lo, dip.end + 2.0, first=which)
        if top:
            text += "; busiest: " + ", ".join(f"{name} {r:.2f}" for name, r in top)
        waited = cpu.waited(host, dip.lo, dip.end)
        if waited is not None:
            text += f"; tasks waited for a CPU {waited * 100:.0f}% of the time"
            if waited < PRESSURE_FLOOR:
                strength *= 0.5  # the CPUs had room for both: the others took what was idle
        return self.candidate(dip, active_s, strength, text, host=host, measure=which, other_cpus=round(used, 3),
                              other_cpus_usually=round(base, 3),
                              busiest=[{"process": n, "cpus": round(r, 3)} for n, r in top])


class DatabaseCpuBound(Scorer):
    """The database itself spent the CPUs: its processes used more of them than over the rest of the run
    (one that is CPU-bound all run long explains no particular dip), at least half of the host's, while the
    CPUs were full (tasks waited for one; without PSI, every process together used nearly all of them) and
    the others did not rise (that is cpu_contention: busy loops beside the run take the database's CPU, so
    its own falls)."""
    name = "database_cpu_bound"
    needs = CPU_SERIES
    # The symptom, not why: a checkpoint, a lock or a slow statement in the same dip is the answer to lead
    # with (and ranks above it, see settle); alone, a rise of a fifth of the CPUs makes MIN_SCORE (0.5 x 0.4).
    weight = 0.5
    order = 120
    symptom = True

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        cpu = signals.memo("cpu", Cpu)
        _, contended = _contention(dip, signals)
        r0, r1 = signals.ctx.run_start, signals.ctx.run_end
        bound: tuple | None = None
        for host, groups in cpu.groups.items():
            db = groups.get("database") or []
            cpus = cpu.cpus.get(host) or 1.0
            if host in contended or not db:
                continue
            got = rise(db, r0, r1, dip.lo, dip.end, DATABASE_CPU_FLOOR, at_least=DATABASE_CPU_SHARE * cpus)
            if not got:
                continue
            waited = cpu.waited(host, dip.lo, dip.end)
            if waited is None:
                everyone = mean_over(sum_by_time(groups.values()), dip.start, dip.end)
                if everyone is None or everyone < FULL * cpus:
                    continue
            elif waited < PRESSURE_FLOOR:
                continue  # no task waited for a CPU: it used CPU that was idle, the CPU did not hold it back
            active_s, used, base = got
            strength = min(1.0, (used - base) / (0.5 * cpus))
            if bound is None or active_s * strength > bound[0] * bound[1]:
                bound = (active_s, strength, host, used, base, cpus, db, waited)
        if not bound:
            return None
        active_s, strength, host, used, base, cpus, db, waited = bound
        text = f"the database's processes used {used:.1f} of {cpus:.0f} CPUs ({base:.1f} usually)"
        text += (f"; tasks waited for a CPU {waited * 100:.0f}% of the time" if waited is not None
                 else f"; every process together used nearly all {cpus:.0f}")
        threshold = max(base + DATABASE_CPU_FLOOR, DATABASE_CPU_SHARE * cpus)
        return self.candidate(dip, active_s, strength, text, host=host,
                              usual=signals.usual(db, lambda v: v >= threshold, dip.lo, dip.end, step=spacing(db)),
                              database_cpus=round(used, 3), database_cpus_usually=round(base, 3), cpus=cpus)

    def settle(self, dip: Dip, signals: Signals, found: list[Candidate]) -> None:
        """The server spending its CPUs is how a heavier statement, an autovacuum or a checkpoint shows on
        the host: beside one of the causes that say why (any but the host's and the disk's, which are
        symptoms too) strong enough to be named, it ranks below it whatever its own score."""
        why = max((c.score for c in found if c.cause not in HOST and c.cause != "disk" and c.score >= MIN_SCORE),
                  default=0.0)
        for symptom in found:
            if symptom.cause == self.name and why and symptom.score >= why:
                symptom.score = 0.9 * why
                symptom.details["ranked_below"] = next(o.cause for o in found if o.score == why)


class IoPressure(Scorer):
    """Tasks stalled on I/O far more than usual: what a busy disk does to them, so the disk (or the
    checkpoint) is the more specific answer when its own measures moved."""
    name = "io_pressure"
    needs = ("node_pressure_io_waiting_seconds_total",)
    weight = 0.5
    order = 130

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        cpu = signals.memo("cpu", Cpu)
        r0, r1 = signals.ctx.run_start, signals.ctx.run_end
        io_best: tuple | None = None
        for host, tl in cpu.io_pressure.items():
            io = deviation(tl, r0, r1, dip.lo, dip.end, floor=IO_PRESSURE_FLOOR)
            if io and (io_best is None or io[0] * io[1] > io_best[1][0] * io_best[1][1]):
                io_best = (host, io)
        if not io_best:
            return None
        host, (active_s, strength, peak, base, _) = io_best
        return self.candidate(dip, active_s, strength,
                              f"tasks waited on I/O {peak * 100:.0f}% of the time ({base * 100:.0f}% usually)",
                              host=host, peak=round(peak, 3), baseline=round(base, 3))


def register(registry: Registry) -> None:
    registry.add(Disk())
    registry.add(CpuContention())
    registry.add(DatabaseCpuBound())
    registry.add(IoPressure())
    registry.contribute("write_surge", write_surge)
    registry.contribute("disk_busy", disk_busy)
