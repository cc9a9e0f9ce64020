"""Benchmark: run history at 10,000 runs (issue 22: each ≤ 2 s).

Run from the repository root::

    .venv/bin/python bench/bench_history.py [--runs 10000] [--workloads 20]

Makes --runs run directories in a temporary runs directory, as ``benchwatch run`` leaves them (meta.json
with argv, versions, host facts and every chosen server setting, summary.json), spread over --workloads
workloads, one of which holds half of them with three steps in its TPS. Then times, each cold (no index
yet) and warm (the index of the runs directory written by the cold pass):

* listing the workloads (``benchwatch history --json``'s work: every run directory read or checked);
* the history of a workload of --runs runs, in a second runs directory where every run is of that workload
  (``benchwatch history WORKLOAD --json``: its series, change points, and what changed at each).

The figures are wall-clock seconds of the work itself, in this process (the CLI adds its start-up).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchwatch.history import report
from benchwatch.record import outcome, rundir

SETTINGS = {f"setting_{i}": str(i) for i in range(40)}  # a realistic pg_settings non-default list


def make_runs(runs_dir: str, n: int, workloads: int) -> list[str]:
    """n runs; with one workload all of them are the big one, else every other run is."""
    rng = np.random.default_rng(1)
    big = []
    start = 1_700_000_000.0
    for i in range(n):
        w = 0 if workloads == 1 or i % 2 == 0 else 1 + i % (workloads - 1)
        run_id = rundir.new_run_id(start + i * 600)
        path = os.path.join(runs_dir, run_id)
        os.makedirs(path)
        level = 1000.0 * (0.95 if i > n * 0.2 else 1) * (0.95 if i > n * 0.5 else 1) * (0.95 if i > n * 0.8 else 1)
        settings = dict(SETTINGS, shared_buffers="128MB" if i <= n * 0.5 else "256MB")  # with the middle step
        with open(os.path.join(path, rundir.META), "w") as f:
            json.dump({"run_id": run_id, "mode": "run", "tool": "pgbench", "state": "finished", "engine": "postgresql",
                       "argv": ["pgbench", "-c", str(4 + w), "-T", "60", "-P", "1"], "started_at": start + i * 600,
                       "ended_at": start + i * 600 + 60, "scale": "10", "hostname": "db1", "server_version": "15.4",
                       "pgbench_version": "15.4", "server_settings": settings,
                       "host": {"kernel": "6.1", "cpus": 2, "cpu_model": "x", "memory_bytes": 1 << 33, "disks": []}}, f)
        with open(os.path.join(path, outcome.SUMMARY), "w") as f:
            # as runs keep it since issue 29: version 2, with the stability profile
            json.dump({"version": 2, "tps": level * (1 + 0.02 * rng.standard_normal()), "latency_avg_s": 0.004,
                       "stability": {"intervals": 55, "tps_cov": 0.05 * (1 + 0.1 * rng.standard_normal()),
                                     "tps_p5_ratio": 0.9, "dips": 0, "dip_seconds": 0.0, "stall_seconds": 0.0,
                                     "lost_share": 0.0, "dips_by_cause": {}}}, f)
        if w == 0:
            big.append(run_id)
    return big


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--workloads", type=int, default=20)
    args = p.parse_args(argv)
    print(f"{platform.node()} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    # 1: --runs directories in --workloads workloads (the big one every other run): listing them.
    # 2: --runs directories of one workload: its history (series, change points, what changed at each).
    for workloads in (args.workloads, 1):
        base = tempfile.mkdtemp(prefix="bench-history-")
        try:
            runs_dir = os.path.join(base, "runs")
            big = make_runs(runs_dir, args.runs, workloads)
            hist = report.History(runs_dir, os.path.join(base, "history"))
            print(f"{args.runs} run directories, {workloads} workloads, the big one {len(big)} runs")
            # Cold: the page cache holds the files just written; the index is what differs.
            for label in ("cold (no index)", "warm (index)"):
                t_list, listing = timed(lambda: hist.workloads())
                assert sum(w["runs"] for w in listing) == args.runs
                wid = hist.resolve(big[0], hist.entries())
                assert wid is not None
                t_hist, got = timed(lambda w=wid: report.series(hist, w, "tps", hist.entries()))
                steps = [(c["index"], c["step_pct"], list(c["changed"])) for c in got["change_points"]]
                print(f"  {label}: list {len(listing)} workloads {t_list:.2f} s; history of {len(got['runs'])} runs "
                      f"{t_hist:.2f} s (index included); change points {steps}")
        finally:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
