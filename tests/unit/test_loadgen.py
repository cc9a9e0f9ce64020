"""The load generator registry: how a program and a recorded run map to what benchwatch knows of them."""

from __future__ import annotations

import os

from benchwatch import loadgens
from benchwatch.model.run import RunModel
from benchwatch.record import replay, rundir
from benchwatch.record.stream import ClockStamper

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "pgbench")


def test_programs_map_to_their_load_generator():
    assert loadgens.for_program("pgbench") is loadgens.by_name("pgbench")
    assert loadgens.for_program("/usr/lib/postgresql/15/bin/pgbench") is loadgens.by_name("pgbench")
    assert loadgens.for_program("./my-pgbench-wrapper.sh") is loadgens.default()  # what benchwatch always did
    assert loadgens.by_name(None) is loadgens.by_name("pgbench")  # runs recorded before "tool" existed
    assert loadgens.default().name == "pgbench"
    assert loadgens.by_name("no such tool") is loadgens.default()


def test_every_load_generator_has_a_run_model_of_its_own_tool():
    assert {"pgbench", "sysbench"} <= set(loadgens.load_generators())
    for name in loadgens.names():
        model = replay.model_for_run("r", {"tool": name})
        assert isinstance(model, RunModel) and model.tool == name


def test_pgbench_progress_lines_give_their_elapsed_time():
    elapsed = loadgens.by_name("pgbench").progress_elapsed
    assert elapsed(b"progress: 5.0 s, 1201.9 tps, lat 3.325 ms stddev 0.741, 0 failed") == 5.0
    assert elapsed(b"progress: 1700000000.123 s, 10.0 tps, lat 1.0 ms stddev 0.1") == 1700000000.123
    assert elapsed(b"transaction type: <builtin: TPC-B (sort of)>") is None
    assert elapsed(b"  progress: 1.0 s") is None


def test_pgbench_progress_is_asked_for_once():
    ensure = loadgens.by_name("pgbench").ensure_progress
    assert ensure(["-c", "4", "-T", "60", "bench"]) == (["-c", "4", "-T", "60", "-P", "1", "bench"], ["-P", "1"])
    assert ensure(["-P", "5", "-T", "60"]) == (["-P", "5", "-T", "60"], [])
    assert ensure(["-i", "-s", "10"]) == (["-i", "-s", "10"], [])


def test_the_clock_is_stamped_from_the_first_progress_line(tmp_path):
    run = rundir.create_run_dir(str(tmp_path))
    run.write_meta({"run_id": run.run_id})
    stamper = ClockStamper(run, loadgens.by_name("pgbench").progress_elapsed, clock=lambda: 1000.0)
    stamper.see(b"starting vacuum...end.")
    assert not stamper.stamped and "clock_start_epoch" not in run.read_meta()
    stamper.see(b"progress: 2.0 s, 100.0 tps, lat 1.0 ms stddev 0.1, 0 failed")
    stamper.see(b"progress: 3.0 s, 100.0 tps, lat 1.0 ms stddev 0.1, 0 failed")
    assert stamper.stamped and run.read_meta()["clock_start_epoch"] == 998.0


def test_pgbench_argv_facts():
    facts = loadgens.by_name("pgbench").read_argv(["-M", "prepared", "-c", "16", "-j", "4", "-P", "2", "-T", "3600", "-S", "db"])
    assert facts.error is None and facts.progress_interval == 2.0 and facts.statements_per_transaction == 1
    assert facts.info_labels["clients"] == "16" and facts.info_labels["script"] == "select-only"
    refused = loadgens.by_name("pgbench").read_argv(["--prog=5"])  # ambiguous to pgbench 15 itself
    assert refused.error and refused.info_labels == {} and refused.progress_interval is None


def test_pgbench_latency_log_goes_into_the_run_directory():
    place = loadgens.by_name("pgbench").latency_log
    assert place is not None
    assert place(["-T", "10", "db"], "/runs/r1/pgbench_log", False) == (["-T", "10", "db"], None, [])
    args, prefix, said = place(["-T", "10", "db"], "/runs/r1/pgbench_log", True)
    assert args == ["-T", "10", "-l", "--log-prefix=/runs/r1/pgbench_log", "db"] and prefix == "/runs/r1/pgbench_log"
    assert said == ["-l", "--log-prefix=/runs/r1/pgbench_log"]
    args, prefix, said = place(["-l", "--log-prefix=/data/mine", "-T", "10"], "/runs/r1/pgbench_log", False)
    assert args == ["-l", "--log-prefix=/data/mine", "-T", "10"] and prefix == "/data/mine" and said == []


def test_versions_are_read_from_what_the_tool_prints():
    assert loadgens.by_name("pgbench").parse_version("pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)") == "15.18"
    assert loadgens.by_name("pgbench").parse_version("no version here") is None
    assert loadgens.by_name("pgbench").version_key == "pgbench_version"  # meta.json's key since the first release
