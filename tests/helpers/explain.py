"""Inducing a dip beside a real run and finding it in `benchwatch explain --json`: shared by the
explain tests of every engine (tests/integration/test_explain.py on PostgreSQL,
tests/integration/test_sysbench_mariadb.py on MariaDB)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator

from benchwatch.util import processes
from tests.helpers.prometheus import query


@contextlib.contextmanager
def busy_loops(n: int = 4) -> Iterator[list[subprocess.Popen]]:
    """``n`` shell busy loops on the machine while the block runs (each a process of its own, named
    ``sh``), each ended by its PID on the way out, whatever happened."""
    loops: list[subprocess.Popen] = []
    try:
        for _ in range(n):
            loops.append(subprocess.Popen(["sh", "-c", "while :; do :; done"]))
        yield loops
    finally:
        for p in loops:
            p.kill()
            p.wait()


def explain_finished(live, run_id: str, ended_at: float) -> dict:
    """`benchwatch explain RUN_ID --json` once Prometheus has the run's end (benchmark_running 0) and the
    evidence scraped after it (``ended_at``: meta.json's)."""
    assert processes.wait_until(
        lambda: bool(query(live.prometheus, f'benchmark_running{{run_id="{run_id}"}} == 0')), 30, 0.2)
    assert processes.wait_until(lambda: time.time() > ended_at + 2, 5, 0.1)  # the last scrapes of the evidence
    r = live.benchwatch("explain", run_id, "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["run_id"] == run_id and report["source"] == "prometheus"
    return report


def dip_over(report: dict, start: float, end: float, run_dir: str | None = None) -> dict:
    """The dip that overlaps the fault the most (ties: the one that lost more transactions); when there is
    none, the failure shows the report and the run's output (``run_dir``)."""
    def overlap(d):
        return min(d["end"], end) - max(d["start"], start)
    near = [d for d in report["dips"] if overlap(d) > -2]
    assert near, (start, end, json.dumps(report, indent=1), run_dir and _output(run_dir))
    return max(near, key=lambda d: (overlap(d), d["lost_transactions"]))


def _output(run_dir: str) -> str:
    """The tool's output as the run saved it (pgbench writes its progress to stderr, sysbench to stdout)."""
    out = []
    for name in ("stderr.log", "stdout.log"):
        with contextlib.suppress(FileNotFoundError), open(os.path.join(run_dir, name), encoding="utf-8",
                                                          errors="replace") as f:
            out.append(f.read())
    return "\n".join(out)
