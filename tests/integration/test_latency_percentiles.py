"""Percentiles in Prometheus against exact percentiles of the same per-transaction log files."""

from __future__ import annotations

import glob
import json
import os

import pytest

from benchwatch.util import processes
from tests.helpers.prometheus import query

pytestmark = pytest.mark.integration


def exact_quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def test_p50_p95_p99_match_the_log(live_stack):
    r = live_stack.benchwatch("run", "--latency-log", "--", "pgbench", "-n", "-c", "4", "-j", "2", "-T", "8")
    assert r.returncode == 0, r.stderr
    assert b"added -l --log-prefix=" in r.stderr
    run_id = [l.split()[2].rstrip(":") for l in r.stderr.decode().splitlines() if l.startswith("benchwatch: run ")][0]
    run_dir = os.path.join(live_stack.state_dir, "runs", run_id)
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    files = glob.glob(meta["txlog_prefix"] + ".*")
    assert len(files) == 2, files  # one per thread (-j 2)
    latencies = []
    for path in files:
        with open(path) as f:
            latencies += [int(line.split()[2]) / 1e6 for line in f if line.split()[2].isdigit()]
    count_query = f'max(last_over_time(benchmark_latency_seconds_count{{run_id="{run_id}"}}[1h]))'
    assert processes.wait_until(lambda: (lambda res: bool(res) and float(res[0]["value"][1]) == len(latencies))(
        query(live_stack.prometheus, count_query)), 30, 0.2), query(live_stack.prometheus, count_query)
    window = int(meta["ended_at"] - meta["clock_start_epoch"]) + 30
    for q in (0.5, 0.95, 0.99):
        got = float(query(live_stack.prometheus, f'histogram_quantile({q}, sum by (le) '
                          f'(increase(benchmark_latency_seconds_bucket{{run_id="{run_id}"}}[{window}s])))')[0]["value"][1])
        want = exact_quantile(latencies, q)
        # Buckets are at most 4/3 apart: the estimate lies in the exact value's bucket.
        assert want * 0.75 <= got <= want * 4 / 3, (q, got, want)
