"""The processes collector: /proc/<pid>/stat read into each group's CPU time and the busiest other processes."""

from __future__ import annotations

import os

import pytest

from benchwatch.exporter import processes
from benchwatch.model.samples import Sample

# A real /proc/<pid>/stat line (cat's own, Debian bookworm), with utime and stime (fields 14 and 15) set.
STAT = "{pid} ({comm}) R 1214 1214 23313 0 -1 4194304 123 0 0 0 {utime} {stime} 0 0 20 0 1 0 1116500 3133440 382 " \
       "18446744073709551615 94654344884224 94654344904105 140732150322720 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"


def proc_tree(root, procs: dict[int, tuple[str, int]]) -> str:
    """A /proc with one stat file per pid: pid -> (comm, CPU ticks split evenly between user and system)."""
    for pid, (comm, ticks) in procs.items():
        os.makedirs(root / str(pid), exist_ok=True)
        (root / str(pid) / "stat").write_text(STAT.format(pid=pid, comm=comm, utime=ticks // 2, stime=ticks - ticks // 2))
    return str(root)


def test_stat_is_read_with_names_holding_spaces_and_parentheses(tmp_path):
    root = proc_tree(tmp_path, {10: ("postgres", 200), 11: ("tmux: server (1)", 50)})
    (tmp_path / "self").mkdir()  # not a pid
    got = processes.read_proc(root)
    tick = processes.CLK_TCK
    assert got == {10: ("postgres", 200 / tick), 11: ("tmux: server (1)", 50 / tick)}
    assert processes.read_proc(str(tmp_path / "missing")) == {}


def test_groups_count_what_each_process_used_since_the_last_reading():
    g = processes.CpuGroups(database={"postgres"}, load_generator={"pgbench"})
    assert g.feed({1: ("postgres", 10.0), 2: ("pgbench", 5.0), 3: ("sh", 1.0)}, 100.0) == []  # the start
    assert g.total == {"database": 0.0, "load_generator": 0.0, "other": 0.0}
    top = g.feed({1: ("postgres", 11.0), 2: ("pgbench", 5.5), 3: ("sh", 3.0), 4: ("python3", 0.1), 5: ("sh", 1.2)}, 102.0)
    # pid 4 and 5 were born since: all their time is new; pid 3 used 2 s in 2 s.
    assert g.total == pytest.approx({"database": 1.0, "load_generator": 0.5, "other": 3.3})
    assert top == [("sh", 3, 1.0), ("sh", 5, 0.6)]  # python3 (0.05 CPUs) is below TOP_MIN_RATIO
    # An exited process keeps what it used; a pid reused by another program starts over.
    g.feed({1: ("postgres", 11.5), 3: ("bash", 0.2)}, 104.0)
    assert g.total == pytest.approx({"database": 1.5, "load_generator": 0.5, "other": 3.5})


def test_collector_writes_groups_every_scan_and_the_busiest_others(tmp_path):
    sent: list[Sample] = []
    now = [1000.0]
    root = tmp_path / "proc"
    proc_tree(root, {1: ("postgres", 100), 2: ("python3", 0)})
    c = processes.ProcessesCollector(sent.extend, clock=lambda: now[0], labels={"target": "local", "host": "h"},
                                     root=str(root), database={"postgres"}, load_generator={"pgbench"})
    assert c.poll() == 0 and sent == []  # the starting point
    now[0] += 1.0
    proc_tree(root, {2: ("python3", 100)})
    assert c.poll() == 0  # not yet: every EVERY_S
    now[0] += processes.EVERY_S
    assert c.poll() > 0
    by_name = {(s.name, dict(s.labels).get("group"), dict(s.labels).get("comm")): s for s in sent}
    other = by_name[("benchmark_host_cpu_seconds_total", "other", None)]
    assert other.value == pytest.approx(100 / processes.CLK_TCK) and dict(other.labels)["host"] == "h"
    assert other.timestamp_ms == round(now[0] * 1000)
    top = by_name[("benchmark_host_top_process_cpu_ratio", None, "python3")]
    assert dict(top.labels)["pid"] == "2" and top.value == pytest.approx(100 / processes.CLK_TCK / 3.0, abs=0.01)
    assert by_name[("benchmark_host_cpus", None, None)].value == os.cpu_count()


def test_server_and_load_generator_names_come_from_engines_and_loadgens():
    assert {"postgres", "mariadbd"} <= processes.server_process_names()
    assert {"pgbench", "sysbench", "go-tpc"} <= processes.load_generator_names()
