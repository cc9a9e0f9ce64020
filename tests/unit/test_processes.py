"""The processes collector: /proc/<pid>/stat read into each group's CPU time and the busiest other processes."""

from __future__ import annotations

import os

import pytest

from benchwatch.exporter import processes
from benchwatch.model.samples import Sample

# A real /proc/<pid>/stat line (cat's own, Debian bookworm), with utime and stime (fields 14 and 15)
# and starttime (22) set.
STAT = "{pid} ({comm}) R 1214 1214 23313 0 -1 4194304 123 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} 3133440 382 " \
       "18446744073709551615 94654344884224 94654344904105 140732150322720 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
TICK = processes.CLK_TCK


def proc_tree(root, procs: dict[int, tuple[str, int]], uptime_s: float = 1000.0, started_s: float = 10.0) -> str:
    """A /proc with one stat file per pid: pid -> (comm, CPU ticks split evenly between user and system),
    each started ``started_s`` after boot, and /proc/uptime."""
    root.mkdir(exist_ok=True)
    (root / "uptime").write_text(f"{uptime_s:.2f} 1234.56\n")
    for pid, (comm, ticks) in procs.items():
        os.makedirs(root / str(pid), exist_ok=True)
        (root / str(pid) / "stat").write_text(STAT.format(pid=pid, comm=comm, utime=ticks // 2, stime=ticks - ticks // 2,
                                                          start=int(started_s * TICK)))
    return str(root)


def test_stat_is_read_with_names_holding_spaces_and_parentheses(tmp_path):
    root = proc_tree(tmp_path, {10: ("postgres", 200), 11: ("tmux: server (1)", 50)})
    (tmp_path / "self").mkdir()  # not a pid
    got = processes.read_proc(root)
    assert got == {10: ("postgres", 200 / TICK, 10.0), 11: ("tmux: server (1)", 50 / TICK, 10.0)}
    assert processes.uptime(root) == 1000.0
    assert processes.read_proc(str(tmp_path / "missing")) == {} and processes.uptime(str(tmp_path / "missing")) == 0.0


def test_groups_count_what_each_process_used_since_the_last_reading():
    g = processes.CpuGroups(database={"postgres"}, load_generator={"pgbench"})
    # Seconds after boot: the machine booted 1000 s ago; pids 1-3 started 10 s after boot, 4 and 5 just now.
    assert g.feed({1: ("postgres", 10.0, 10), 2: ("pgbench", 5.0, 10), 3: ("sh", 1.0, 10)}, 100.0, 1000.0) == []
    assert g.total == {"database": 0.0, "load_generator": 0.0, "new": 0.0, "other": 0.0}  # the start
    top = g.feed({1: ("postgres", 11.0, 10), 2: ("pgbench", 5.5, 10), 3: ("sh", 3.0, 10), 4: ("python3", 0.1, 1001),
                  5: ("sh", 1.2, 1001), 6: ("cc1", 0.3, 1001)}, 102.0, 1002.0)
    # pids 4-6 were born since: all their time is new, and they are new; pid 3 used 2 s in 2 s.
    assert g.total == pytest.approx({"database": 1.0, "load_generator": 0.5, "new": 1.6, "other": 2.0})
    # The busiest new ones, then the busiest other ones; python3 (0.05 CPUs) is below TOP_MIN_RATIO.
    assert top == [("sh", 5, "new", 0.6), ("cc1", 6, "new", 0.15), ("sh", 3, "other", 1.0)]
    # An exited process keeps what it used; a reused pid (less time than before) starts over; a
    # renamed one goes on from before; 30 s on, pid 5 is no longer new.
    g.feed({1: ("postgres", 11.5, 10), 3: ("bash", 0.2, 1003), 5: ("kworker/0:1-events", 1.3, 1001)}, 104.0, 1004.0)
    assert g.total == pytest.approx({"database": 1.5, "load_generator": 0.5, "new": 1.9, "other": 2.0})
    g.feed({5: ("kworker/0:1-events", 2.3, 1001)}, 134.0, 1034.0)
    assert g.total["other"] == pytest.approx(3.0)


def test_collector_writes_groups_every_scan_and_the_busiest_others(tmp_path):
    sent: list[Sample] = []
    now = [1000.0]
    root = tmp_path / "proc"
    proc_tree(root, {1: ("postgres", 100), 2: ("python3", 0)}, uptime_s=1000, started_s=990)
    c = processes.ProcessesCollector(sent.extend, clock=lambda: now[0], labels={"target": "local", "host": "h"},
                                     root=str(root), database={"postgres"}, load_generator={"pgbench"})
    assert c.poll() == 0 and sent == []  # the starting point
    now[0] += 1.0
    proc_tree(root, {2: ("python3", 100)}, uptime_s=1003, started_s=990)
    assert c.poll() == 0  # not yet: every EVERY_S
    now[0] += processes.EVERY_S
    assert c.poll() > 0
    by_name = {(s.name, dict(s.labels).get("group"), dict(s.labels).get("comm")): s for s in sent}
    other = by_name[("benchmark_host_cpu_seconds_total", "new", None)]
    assert other.value == pytest.approx(100 / processes.CLK_TCK) and dict(other.labels)["host"] == "h"
    assert other.timestamp_ms == round(now[0] * 1000)
    top = by_name[("benchmark_host_top_process_cpu_ratio", "new", "python3")]
    assert dict(top.labels)["pid"] == "2" and top.value == pytest.approx(100 / processes.CLK_TCK / 3.0, abs=0.01)
    assert by_name[("benchmark_host_cpus", None, None)].value == os.cpu_count()


def test_server_and_load_generator_names_come_from_engines_and_loadgens():
    assert {"postgres", "mariadbd"} <= processes.server_process_names()
    assert {"pgbench", "sysbench", "go-tpc"} <= processes.load_generator_names()


def test_between_runs_the_scan_slows_down_and_a_run_that_starts_is_scanned_at_once(tmp_path):
    sent: list[Sample] = []
    now = [1000.0]
    live = [False]
    root = tmp_path / "proc"
    proc_tree(root, {1: ("postgres", 100), 2: ("python3", 0)}, uptime_s=1000, started_s=10)
    c = processes.ProcessesCollector(sent.extend, clock=lambda: now[0], root=str(root), database={"postgres"},
                                     load_generator={"pgbench"}, run_live=lambda: live[0])
    assert c.poll() == 0  # the starting point
    scans = []
    for _ in range(int(processes.IDLE_EVERY_S) - 1):
        now[0] += 1.0
        scans.append(c.poll() > 0)
    assert not any(scans)  # no run: nothing for 29 s
    now[0] += 1.0
    assert c.poll() > 0  # the idle pace
    now[0] += 1.0
    live[0] = True  # a run's line: scanned at once, then every EVERY_S
    assert c.poll() > 0
    now[0] += 1.0
    assert c.poll() == 0
    now[0] += processes.EVERY_S - 1.0
    assert c.poll() > 0
    # A daemon that follows no runs (an agent's log follower) has no run_live: every EVERY_S, always.
    d = processes.ProcessesCollector(sent.extend, clock=lambda: now[0], root=str(root), database={"postgres"},
                                     load_generator={"pgbench"})
    d.poll()
    now[0] += processes.EVERY_S
    assert d.poll() > 0


def test_a_steady_live_run_is_scanned_every_live_every_s_and_a_possibly_low_line_speeds_it_up(tmp_path):
    sent: list[Sample] = []
    now = [1000.0]
    hooks: list = []
    root = tmp_path / "proc"
    proc_tree(root, {1: ("postgres", 100), 2: ("python3", 0)}, uptime_s=1000, started_s=10)
    c = processes.ProcessesCollector(sent.extend, clock=lambda: now[0], root=str(root), database={"postgres"},
                                     load_generator={"pgbench"}, run_live=lambda: True,
                                     on_possibly_low=hooks.append)
    assert len(hooks) == 1  # the collector asked for the dips' judgement

    def scans_over(seconds: int) -> list[bool]:
        out = []
        for _ in range(seconds):
            now[0] += 1.0
            out.append(c.poll() > 0)
        return out

    c.poll()  # the starting point
    steady = scans_over(int(processes.LIVE_EVERY_S) * 3)
    assert sum(steady) == 3 and steady[int(processes.LIVE_EVERY_S) - 1]  # every LIVE_EVERY_S, not EVERY_S
    now[0] += 1.0
    c.poll()  # wherever the slow pace stands, a low line turns it fast at once:
    hooks[0]()
    now[0] += 1.0
    assert c.poll() > 0
    fast = scans_over(int(processes.FAST_HOLD_S) - 2)
    assert sum(fast) >= (processes.FAST_HOLD_S - 2) // processes.EVERY_S - 1  # every EVERY_S while it holds
    scans_over(int(processes.EVERY_S))
    after = scans_over(int(processes.LIVE_EVERY_S) * 2)
    assert sum(after) == 2  # the hold over: the live pace again
