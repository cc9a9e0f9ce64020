"""``run --profile`` on a real stack (issue 30): perf record beside the run, folded into the run directory
once it ended, and ``explain``'s profile of a dip; a perf that refuses leaves the run unprofiled, said once."""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest

from benchwatch.util import processes
from tests.helpers.explain import busy_loops, dip_over, explain_finished
from tests.helpers.throwaway import BackgroundRun
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration


def _progress_lines(run_dir: str) -> int:
    try:
        with open(os.path.join(run_dir, "stderr.log"), "rb") as f:
            return sum(1 for line in f if line.startswith(b"progress:"))
    except FileNotFoundError:
        return 0


def test_a_profiled_run_with_busy_loops_beside_it(live_stack):
    """Four busy loops for 8 s in the middle of an unthrottled profiled run: the run keeps its profile per
    second, by group and process kind; explain shows the dip, and in its profile the database's samples
    fall while the loops' process (sh) takes the CPUs."""
    require_tool("perf")
    run = BackgroundRun(live_stack, "pgbench", "-n", "-c", "4", "-j", "2", "-P", "1", "-T", "24",
                        options=("--profile",))
    run_dir = run.run_dir()
    assert processes.wait_until(lambda: _progress_lines(run_dir) >= 9, 60, 0.1)
    with busy_loops(4):
        began = time.time()
        time.sleep(8)
    ended = time.time()
    assert run.wait(200) == 0, run.out.get("stderr")
    said = run.out["stderr"].decode()
    assert "profiling off" not in said and "benchwatch: profile: " in said, said
    with open(os.path.join(run_dir, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    assert meta["profile"]["state"] == "profiled" and meta["profile"]["samples"] > 200, meta["profile"]
    with open(os.path.join(run_dir, "profile", "profile.json"), encoding="utf-8") as f:
        summary = json.load(f)
    assert summary["event"] == "cpu-clock" and summary["call_graph"].startswith("dwarf")
    assert not os.path.exists(os.path.join(run_dir, "profile", "perf.data"))  # folded, then removed
    assert summary["by_group"]["database"] > 0 and summary["by_group"]["load_generator"] > 0, summary
    assert "client backend" in summary["kinds"].values() and "checkpointer" in summary["kinds"].values()
    assert 0 < summary["unknown_leaf"] < summary["samples"]
    with gzip.open(os.path.join(run_dir, "profile", "slices.tsv.gz"), "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t", 4) for line in f if not line.startswith("#")]
    # Per second slices over the run, the backends' stacks named by DWARF unwinding up to PostgresMain.
    assert len({int(r[0]) for r in rows}) >= 20
    assert any(r[1] == "database" and r[2] == "client backend" and "PostgresMain" in r[4] for r in rows)

    report = explain_finished(live_stack, meta["run_id"], meta["ended_at"])
    dip = dip_over(report, began, ended, run_dir)
    p = dip["profile"]
    by = {g["group"]: g["per_second"] for g in p["groups"]}
    assert by["database"][1] < by["database"][0], json.dumps(p, indent=1)
    sh = [m for m in p["processes"] if m["process"] == "sh"]
    assert sh and sh[0]["group"] == "other" and sh[0]["per_second"][1] > sh[0]["per_second"][0], json.dumps(p, indent=1)
    text = live_stack.benchwatch("explain", meta["run_id"], timeout=120)
    assert text.returncode == 0 and "its CPU profile against the rest of the run" in text.stdout.decode()
    assert "sh (other)" in text.stdout.decode(), text.stdout.decode()


def test_a_perf_that_refuses_leaves_the_run_unprofiled(live_stack, tmp_path):
    refusing = tmp_path / "perf"
    refusing.write_text("#!/bin/sh\necho 'Error: Access to performance monitoring and observability operations is "
                        "limited (perf_event_paranoid).' >&2\nexit 255\n")
    refusing.chmod(0o755)
    run = BackgroundRun(live_stack, "pgbench", "-n", "-c", "1", "-P", "1", "-T", "2", options=("--profile",),
                        env={"BENCHWATCH_PERF": str(refusing)})
    run_dir = run.run_dir()
    assert run.wait(60) == 0, run.out.get("stderr")
    # (the stability profile of issue 32 is another thing: its line is not about perf)
    said = [line for line in run.out["stderr"].decode().splitlines() if "perf" in line or "profiling" in line]
    assert len(said) == 1 and "perf record refused (exit 255)" in said[0] and "perf_event_paranoid" in said[0], said
    with open(os.path.join(run_dir, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    assert meta["profile"]["state"] == "off" and meta["exit_code"] == 0
    assert not os.path.exists(os.path.join(run_dir, "profile", "slices.tsv.gz"))
