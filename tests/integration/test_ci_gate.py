"""The worked CI example (scripts/ci-gate-example, docs/ci.md) run for real: two "builds" of PostgreSQL 15 swept
side by side on a runner's own stack. A build is a bin directory; here each is the installed PostgreSQL's with
a pg_ctl that starts the server with a setting of its own, so the planted regression is exactly one setting
(synchronous_commit on: every commit waits for its WAL flush), on a one-INSERT-per-transaction script whose
cost is that flush. The gate must fail on it (exit 1) with a Markdown comment naming the setting, and pass on
two identical builds (exit 0). Runs of 2 s, 3 per build, each after an uncounted second of the same (a build's
first run after its pgbench -i, cold, was as slow as the regression at a load of 9): the effect is many times
the noise of a busy machine.

The runner writes to a team's shared stores (issue 31's acceptance): one results PostgreSQL and one
VictoriaMetrics started for the module, `up --host` as ci-runner-17 (through the environment, as a CI job
sets it). Once its job is over its state directory is deleted, and another host pointed at the same stores
lists the runner's runs (`history --all-hosts`), explains one from the database, and VictoriaMetrics has its
series: flush had waited for both before the runner went."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from tests.helpers import throwaway
from tests.helpers.stores import ResultsServer, VictoriaMetrics

SCRIPT = os.path.join(throwaway.REPO_ROOT, "scripts", "ci-gate-example")
RUNNER_HOST = "ci-runner-17"


def build(root: str, setting: str) -> str:
    """A bin directory like the installed one whose pg_ctl starts postgres with ``-c setting``."""
    real = pg_bindir()
    bindir = os.path.join(root, "bin")
    os.makedirs(bindir)
    for name in os.listdir(real):
        if name != "pg_ctl":
            os.symlink(os.path.join(real, name), os.path.join(bindir, name))
    path = os.path.join(bindir, "pg_ctl")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec {os.path.join(real, "pg_ctl")} -o "-c {setting}" "$@"\n')
    os.chmod(path, 0o755)
    os.chmod(root, 0o755)
    return bindir


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The team's shared stores (issue 31): one results PostgreSQL and one VictoriaMetrics, which the runner
    writes to and another host reads once the runner is gone."""
    db = ResultsServer()
    vm = None
    try:
        db.start()
        vm = VictoriaMetrics(str(tmp_path_factory.mktemp("vm")))
        yield {"BENCHWATCH_RESULTS_DSN": db.dsn, "BENCHWATCH_LONG_TERM_WRITE_URL": vm.url + "/api/v1/write",
               "BENCHWATCH_LONG_TERM_QUERY_URL": vm.url}, db, vm
    finally:
        if vm is not None:
            vm.close()
        db.close()


@pytest.fixture(scope="module")
def runner(stores):
    state_dir = throwaway.make_state_dir()
    ports = throwaway.free_ports()
    shared, _, _ = stores
    env = dict(os.environ, BENCHWATCH_STATE_DIR=state_dir, BENCHWATCH_HOST=RUNNER_HOST, **shared,
               **{f"BENCHWATCH_{c.upper()}_PORT": str(p) for c, p in ports.items()})
    try:
        yield state_dir, env
    finally:
        stack = Stack(load_config(state_dir, ports), out=lambda m: None)
        stack.down()
        left = [c for c in stack.components() if stack.pid(c) is not None]
        shutil.rmtree(state_dir, ignore_errors=True)
        assert not left, f"still running after down: {left}"


def gate(runner, base: str, candidate: str, name: str, keep: bool) -> tuple[subprocess.CompletedProcess, str]:
    state_dir, env = runner
    comment = os.path.join(state_dir, f"{name}.md")
    script = os.path.join(state_dir, "commit.sql")
    with open(script, "w") as f:
        f.write("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, 1, 1, now());\n")
    os.chmod(script, 0o644)
    env = dict(env, BASE_BINDIR=base, CANDIDATE_BINDIR=candidate, GATE_NAME=name, GATE_COMMENT=comment,
               GATE_REPEAT="3", GATE_CLIENTS="1", GATE_SCALE="1", GATE_MIN_EFFECT="10", GATE_FLUSH_TIMEOUT="60",
               GATE_WARMUP="1",
               BENCHWATCH=throwaway.BENCHWATCH, GATE_KEEP_STACK="1" if keep else "0")
    r = subprocess.run([SCRIPT, "--", "-f", script, "-T", "2"], env=env, capture_output=True, text=True, timeout=600)
    text = ""
    if os.path.exists(comment):
        with open(comment) as f:
            text = f.read()
    return r, text


def flush_refuses_to_pass_while_prometheus_does_not_answer(runner) -> None:
    """flush's own exit code: Prometheus stopped (SIGSTOP: alive, so not restarted, but answering nothing), a short
    run's samples wait in the exporter's queue; flush --timeout 5 exits 3 saying so, and 0 once it answers again."""
    state_dir, env = runner
    stack = Stack(load_config(state_dir, {c: int(env[f"BENCHWATCH_{c.upper()}_PORT"]) for c in throwaway.DEFAULT_PORTS}),
                  out=lambda m: None)
    pid = stack.pid("prometheus")
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        select = os.path.join(state_dir, "select.sql")
        with open(select, "w") as f:
            f.write("SELECT 1;\n")
        os.chmod(select, 0o644)
        # the stack's own server has no pgbench tables (the sweeps ran on the builds' servers): -n, a script of its own
        r = subprocess.run([throwaway.BENCHWATCH, "run", "--", "pgbench", "-n", "-f", select, "-T", "2"], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([throwaway.BENCHWATCH, "flush", "--timeout", "5"], env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 3, r.stderr
        assert "benchwatch: not flushed after 5 s: the exporter's remote-write queue: " in r.stderr, r.stderr
        assert " samples left (deleting this machine now loses it)" in r.stderr
    finally:
        os.kill(pid, signal.SIGCONT)
    r = subprocess.run([throwaway.BENCHWATCH, "flush", "--timeout", "120"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "flushed: nothing left to write" in r.stderr, r.stderr


def test_the_ci_example_fails_on_a_planted_regression_and_passes_without(runner, stores, tmp_path):
    state_dir, _ = runner
    root = os.path.join(state_dir, "builds")
    base = build(os.path.join(root, "base"), "synchronous_commit=off")
    slow = build(os.path.join(root, "slow"), "synchronous_commit=on")

    started = time.monotonic()
    r, comment = gate(runner, base, base, "same", keep=True)
    passed_in = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    assert "gate: passed (--fail-on slower,less-steady" in r.stderr
    assert "flushed: nothing left to write (the exporter's remote-write queue" in r.stderr, r.stderr
    assert "**passed**" in comment and "| candidate | clients=1,scale=1 |" in comment, comment

    flush_refuses_to_pass_while_prometheus_does_not_answer(runner)

    started = time.monotonic()
    r, comment = gate(runner, base, slow, "regressed", keep=False)
    failed_in = time.monotonic() - started
    assert r.returncode == 1, r.stderr
    assert "gate: candidate at clients=1,scale=1 is slower than base: TPS −" in r.stderr, r.stderr
    assert "**failed**" in comment, comment
    # The why: the one setting that differs, as the runs recorded it, and the server measures that moved.
    assert "| candidate | synchronous_commit | off | on |" in comment, comment
    assert "WAL" in comment.split("### Why", 1)[1], comment
    assert "?var-experiment=regressed" in comment and "shares/sweep-regressed/index.html" in comment
    print(f"gate passed in {passed_in:.1f} s, failed in {failed_in:.1f} s")
    runner_gone_another_host_reads_its_runs(runner, stores)


def runner_gone_another_host_reads_its_runs(runner, stores) -> None:
    """The runner's job is over and its machine deleted (its state directory removed; flush had waited for the
    shared stores): another host, pointed at the same stores, lists the runner's runs in history --all-hosts
    and explains one of them from the results database; its series are in VictoriaMetrics."""
    state_dir, _ = runner
    shared, db, vm = stores
    runner_runs = {run_id for run_id, host in db.run_hosts().items() if host == RUNNER_HOST}
    with open(os.path.join(state_dir, "sweeps", "regressed", "state.jsonl"), encoding="utf-8") as f:
        swept = [e["run_id"] for e in map(json.loads, f) if e.get("event") == "finished" and e.get("ok")]
    assert swept and set(swept) <= runner_runs, (swept, sorted(runner_runs))
    shutil.rmtree(state_dir)
    other = throwaway.make_state_dir()
    try:
        env = dict(os.environ, BENCHWATCH_STATE_DIR=other, BENCHWATCH_HOST="bench-a", **shared)
        r = subprocess.run([throwaway.BENCHWATCH, "history", "--all-hosts", "--json"], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        listed = json.loads(r.stdout)["workloads"]
        assert sum(w["runs"] for w in listed) == len(runner_runs), listed
        assert all(w["hosts"] == [RUNNER_HOST] for w in listed), listed
        r = subprocess.run([throwaway.BENCHWATCH, "explain", swept[-1], "--json"], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["run_id"] == swept[-1]
        # A range selector alone: VictoriaMetrics' functions look 30 s in the past (-search.latencyOffset).
        series = vm.query(f'benchmark_progress_tps{{run_id="{swept[-1]}"}}[10m]', time.time())
        assert len(series) == 1 and len(series[0]["values"]) >= 2, series
    finally:
        shutil.rmtree(other, ignore_errors=True)
