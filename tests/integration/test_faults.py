"""Fault campaign (issue 12): a component dies mid-run and nobody acts.

For each fault the run's curve in Prometheus is complete (N printed progress
lines -> N samples at their values) within 30 s after the fault, and the
component is healthy again with a new process, brought back by the supervisor
that `up` started. One stack for the module: the faults run one after another
on it, and each test starts from a healthy stack.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from benchwatch.record import rundir
from benchwatch.util import processes
from tests.helpers import throwaway
from tests.helpers.prometheus import query
from tests.integration.test_live_pipeline import PROGRESS

pytestmark = pytest.mark.integration

COMPLETE_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def stack():
    live = throwaway.start(scale=1)
    try:
        yield live
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"


def healthy(live) -> bool:
    st = live.stack
    return all(st.healthy(c) for c in st.components())


def printed(run: rundir.RunDir) -> list[float]:
    """tps of each progress line pgbench printed (saved byte for byte as it reached the terminal)."""
    with open(run.file("stderr.log"), "rb") as f:
        return [float(m.group(2)) for m in map(PROGRESS.match, f) if m]


def stored(live, run_id: str) -> list[float]:
    result = query(live.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}[1h]')
    return [float(v) for _, v in result[0]["values"]] if result else []


def start_run(live, seconds: int) -> tuple[subprocess.Popen, rundir.RunDir]:
    before = {r.run_id for r in rundir.list_runs(live.stack.cfg.runs_dir)}
    proc = subprocess.Popen([throwaway.BENCHWATCH, "run", "--", "pgbench", "-n", "-c", "2", "-T", str(seconds), "-P", "1"],
                            env=live.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    runs: list[rundir.RunDir] = []

    def progressing() -> bool:
        runs[:] = [r for r in rundir.list_runs(live.stack.cfg.runs_dir) if r.run_id not in before]
        return bool(runs) and len(printed(runs[0])) >= 2

    assert processes.wait_until(progressing, 30, 0.1, abort=lambda: proc.poll() is not None), proc.stderr.read()
    return proc, runs[0]


def run_with_fault(live, fault, seconds: int = 8, component: str | None = None):
    assert processes.wait_until(lambda: healthy(live), 60, 0.2), live.stack.status()
    old_pid = live.stack.pid(component) if component else None
    proc, run = start_run(live, seconds)
    fault()
    faulted = time.monotonic()
    proc.wait(timeout=seconds + 90)
    err = proc.stderr.read()
    lines = printed(run)
    assert lines, err
    # Everything printed reaches Prometheus, at its values, without anyone running up.
    remaining = COMPLETE_WITHIN_S - (time.monotonic() - faulted)
    ok = processes.wait_until(lambda: stored(live, run.run_id) == lines, max(remaining, 0.5), 0.25)
    assert ok, f"printed {lines}\nstored  {stored(live, run.run_id)}"
    if component:
        back = processes.wait_until(lambda: live.stack.pid(component) not in (None, old_pid) and live.stack.healthy(component),
                                    COMPLETE_WITHIN_S, 0.2)
        assert back, live.stack.status()
    # The exporter marks the run done once Prometheus acknowledged its end.
    assert processes.wait_until(lambda: os.path.exists(run.file(".ingested")), 10, 0.1)
    return proc.returncode, run


def kill(live, component: str, sig: int = signal.SIGKILL):
    return lambda: os.kill(live.stack.pid(component), sig)


@pytest.mark.parametrize("component", ["prometheus", "benchwatch_exporter", "node_exporter", "postgres_exporter", "alertmanager"])
def test_kill_9(stack, component):
    restarts = stack.stack.restarts().get(component, {}).get("restarts", 0)
    code, _ = run_with_fault(stack, kill(stack, component), component=component)
    assert code == 0
    # Counted, and shown by status.
    status = json.loads(stack.benchwatch("status", "--json").stdout)
    assert status["components"][component]["restarts"] == restarts + 1


def test_postgres_fast_restart(stack):
    # Fast shutdown (SIGINT) of the postmaster: pgbench's clients abort, the supervisor starts it again.
    code, run = run_with_fault(stack, kill(stack, "postgres", signal.SIGINT), component="postgres")
    assert code != 0 and run.read_meta()["exit_code"] == code  # passed through, not hidden
    assert stack.psql("select 1") == "1"


def test_prometheus_down_for_60_s(stack):
    # SIGSTOP: Prometheus accepts connections and answers nothing (remote write times out) for
    # 60 s; the run ends while it is away. The supervisor sees a live process and leaves it be.
    pid = stack.stack.pid("prometheus")
    assert processes.wait_until(lambda: healthy(stack), 60, 0.2)
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        proc, run = start_run(stack, 12)
        proc.wait(timeout=60)
        time.sleep(max(0.0, 60 - (time.monotonic() - stopped)))  # the outage itself, not a wait for readiness
    finally:
        os.kill(pid, signal.SIGCONT)
    resumed = time.monotonic()
    lines = printed(run)
    ok = processes.wait_until(lambda: stored(stack, run.run_id) == lines, COMPLETE_WITHIN_S, 0.25)
    assert ok, f"printed {lines}\nstored  {stored(stack, run.run_id)} ({time.monotonic() - resumed:.1f} s)"
    assert processes.wait_until(lambda: os.path.exists(run.file(".ingested")), 10, 0.1)
