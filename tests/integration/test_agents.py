"""Agents on "other hosts" (loopback, their own state dirs, ports and host names) pushing to a central stack.

Agent db1 (host hostA, started by the CLI) watches one PostgreSQL instance;
agent db2 (host hostB, started by benchwatch.stack.agent.start_agent, as the
sharded demo does) watches two, named db2a and db2b. The central stack's own
instance is target="local".
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from benchwatch.engines.postgresql import dsn
from benchwatch.engines.postgresql.local import start_instances
from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.query.prometheus import query
from benchwatch.stack import agent as agent_mod
from benchwatch.stack import supervisor
from benchwatch.util import net, processes
from tests.helpers import throwaway

OUTAGE_S = 60
AGENT_TARGETS = {"db1": "hostA", "db2a": "hostB", "db2b": "hostB"}


def _psql(inst, sql: str) -> str:
    params = inst.params()
    env = dict(os.environ, **dsn.libpq_env(params, None), PGPASSWORD=params["password"])
    r = subprocess.run([os.path.join(pg_bindir(), "psql"), "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture(scope="module")
def world():
    central = throwaway.start(scale=1)
    base = throwaway.make_state_dir()
    instances, agents = [], []
    try:
        instances = start_instances(os.path.join(base, "pg"), [net.free_port() for _ in range(3)],
                                    ["db1", "db2a", "db2b"], pg_bindir())
        by_name = {i.name: i for i in instances}
        # db1 through the real command line, DSN with its password (kept in a 0600 file, not argv of any child).
        a1_dir = os.path.join(base, "agent1")
        r = subprocess.run([throwaway.BENCHWATCH, "agent", "up", "--state-dir", a1_dir, "--central", central.prometheus,
                            "--name", "db1", "--host", "hostA", "--postgres", by_name["db1"].dsn(),
                            "--server-log", by_name["db1"].server_log, "--json"],
                           capture_output=True, text=True, timeout=180)
        agents.append(a1_dir)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["targets"][0]["target"] == "db1"
        a2 = agent_mod.start_agent(os.path.join(base, "agent2"), name="db2", central_url=central.prometheus,
                                   postgres=[by_name["db2a"].dsn(), by_name["db2b"].dsn()],
                                   server_logs=[by_name["db2a"].server_log, by_name["db2b"].server_log],
                                   targets=["db2a", "db2b"], host="hostB")
        agents.append(a2.cfg.state_dir)
        yield {"central": central, "instances": by_name, "agent_dirs": agents, "base": base}
    finally:
        for d in agents:
            cfg = agent_mod.load_agent_config(d)
            if cfg:
                a = agent_mod.Agent(cfg)
                a.down()
                assert not [c for c in a.components() if a.pid(c) is not None]
        for inst in instances:
            inst.stop()
        central.close()
        shutil.rmtree(base, ignore_errors=True)


def _labels_by_target(prom: str, promql: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for r in query(prom, promql):
        out.setdefault(r["metric"].get("target", ""), set()).add(r["metric"].get("host", ""))
    return out


def test_every_target_has_node_postgres_and_checkpoint_series_with_its_labels(world):
    prom = world["central"].prometheus
    for inst in world["instances"].values():
        _psql(inst, "CHECKPOINT")
    world["central"].psql("CHECKPOINT")
    expected = dict(AGENT_TARGETS, local=socket.gethostname())
    queries = {"postgres": "count by (target, host) (pg_up == 1)",
               "checkpoints": "count by (target, host) (last_over_time(pg_checkpoints_completed_total[10m]) > 0)"}
    seen: dict[str, dict] = {}

    def arrived() -> bool:
        for kind, q in queries.items():
            seen[kind] = _labels_by_target(prom, q)
        return all(seen[k].get(t) == {h} for k in queries for t, h in expected.items())

    assert processes.wait_until(arrived, 90, interval=1.0), f"expected {expected}, got {seen}"
    # Nothing database-side without the two labels.
    for metric in ("pg_up", "pg_checkpoints_completed_total", "pg_stat_database_xact_commit"):
        bare = query(prom, f'count({metric}{{target=""}}) or count({metric}{{host=""}})')
        assert not bare, f"{metric} without target/host: {bare}"
    # node_exporter once per host: an agent's host series carry its host and no target (hostB's two
    # instances share them); the central stack's own keep target="local".
    node_expected = {"": {"hostA", "hostB"}, "local": {socket.gethostname()}}

    def node_arrived() -> bool:
        seen["node"] = _labels_by_target(prom, 'count by (target, host) (node_cpu_seconds_total{job="node"})')
        return seen["node"] == node_expected

    # (Polled as the rest: the first scrape of each host's node_exporter comes when it comes.)
    assert processes.wait_until(node_arrived, 60, interval=1.0), seen["node"]

    def all_healthy() -> bool:
        r = world["central"].benchwatch("targets", "--json", "--series")
        seen["targets"] = json.loads(r.stdout) if r.returncode in (0, 1) and r.stdout else r.stderr
        return r.returncode == 0 and {t["target"] for t in seen["targets"]["targets"]} == set(expected)

    assert processes.wait_until(all_healthy, 60, interval=1.0), json.dumps(seen.get("targets"), indent=1)
    listed = {t["target"]: t for t in seen["targets"]["targets"]}
    for name, host in expected.items():
        t = listed[name]
        assert t["healthy"] and t["host"] == host and t["engine"] == "postgresql", t
        assert t["last_sample_age_s"] < 30, t
    assert listed["db2a"]["instance"] == f"127.0.0.1:{world['instances']['db2a'].port}"
    # The series budget: a PostgreSQL target <= 1,000 series with the default collectors.
    series = seen["targets"]["series"]["targets"]
    for name in expected:
        assert 0 < series[name]["series"] <= 1000, series


def test_statements_of_an_agents_instance_reach_the_central_stack(world):
    """The agent's follower of db1 reads its pg_stat_statements (preloaded, the extension created by its
    owner) and the central stack gets the statement's time per call with db1's target and host."""
    db1 = world["instances"]["db1"]
    _psql(db1, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    _psql(db1, "CREATE TABLE IF NOT EXISTS bw_agent_calls (n int)")
    statement = 'pg_statement_calls_total{target="db1",host="hostA",statement=~"INSERT INTO bw_agent_calls.*"}'

    def arrived() -> bool:
        _psql(db1, "INSERT INTO bw_agent_calls SELECT g FROM generate_series(1, 1000) g")  # time spent since the last reading
        return bool(query(world["central"].prometheus, f"{statement} > 0"))

    log = os.path.join(world["agent_dirs"][0], "logs", "checkpoints-db1.log")
    assert processes.wait_until(arrived, 90, interval=1.0), open(log, encoding="utf-8", errors="replace").read()[-3000:]


def _checkpoints_completed(prom: str, at: float) -> dict[str, float]:
    result = query(prom, 'sum by (target) (last_over_time(pg_checkpoints_completed_total{target=~"db.*"}[1h]))', at)
    return {r["metric"]["target"]: float(r["value"][1]) for r in result}


def test_central_down_for_a_minute_during_a_run_loses_nothing_the_agents_collected(world):
    central = world["central"]
    stack = central.stack
    prom = central.prometheus
    # The run is the outage and 20 s: about 6 s of it come before the outage and Prometheus is healthy again
    # about 1 s after it, so the run still goes on ~13 s when the series flow again. The test waits for the run's
    # own end (the SIGINT below reaches benchwatch alone, which leaves the tool to the terminal's Ctrl-C): a
    # longer run (+45 s) only made the test wait ~30 s more once every assertion on the outage was made.
    run = subprocess.Popen([throwaway.BENCHWATCH, "run", "--", "pgbench", "-n", "-c", "1", "-R", "20",
                            "-T", str(OUTAGE_S + 20), "-P", "1"], env=central.env(),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert processes.wait_until(lambda: bool(query(prom, 'benchmark_progress_tps')), 60, interval=0.5)
        time.sleep(3)  # a few seconds of the run before the outage
        before = _checkpoints_completed(prom, time.time())
        # The central supervisor would start Prometheus again at once: it pauses for the outage.
        with supervisor.paused(stack.path("supervisor")):
            stop_at = time.time()
            stack.stop("prometheus")
            assert stack.pid("prometheus") is None
            # Checkpoints while the central side is down: their series must arrive too.
            for inst in world["instances"].values():
                _psql(inst, "CHECKPOINT")
            # The outage itself is the scenario (not a wait for readiness).
            time.sleep(OUTAGE_S)
            start_at = time.time()
            stack.start_component("prometheus")
            assert stack.wait_healthy("prometheus", 60.0), stack.log_tail("prometheus")
        window = int(start_at - stop_at)
        # Three postgres scrapes (one per target), two node scrapes (one per host).
        gap_query = f'up{{job=~"node|postgres", host=~"host[AB]"}}[{window}s]'

        def caught_up() -> bool:
            return len(query(prom, 'count_over_time(' + gap_query + ') >= ' + str(window - 3), start_at)) >= 5
        assert processes.wait_until(caught_up, 90, interval=1.0), query(prom, 'count_over_time(' + gap_query + ')', start_at)
        # Every scraped series of the agents: a sample every second through the outage, no hole.
        for metric in ("up", "pg_up", "node_cpu_seconds_total", "pg_stat_database_xact_commit"):
            result = query(prom, f'{{__name__="{metric}", job=~"node|postgres", host=~"host[AB]"}}[{window}s]', start_at)
            if metric == "node_cpu_seconds_total":
                assert {r["metric"]["host"] for r in result} == {"hostA", "hostB"}, result
            else:
                targets = {r["metric"]["target"] for r in result if r["metric"]["job"] == "postgres"}
                assert targets == set(AGENT_TARGETS), (metric, targets)
            for r in result:
                ts = [float(t) for t, _ in r["values"]]
                gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
                assert len(ts) >= window - 3 and max(gaps) <= 2.5, (metric, r["metric"], len(ts), max(gaps))
        # Every checkpoint logged during the outage reached the central side, per target.
        after = _checkpoints_completed(prom, start_at)
        for name in AGENT_TARGETS:
            assert after.get(name, 0) >= before.get(name, 0) + 1, (name, before, after)
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=OUTAGE_S + 120)
    assert run.returncode == 0, err.decode(errors="replace")
    from benchwatch.record import rundir
    meta = rundir.find_run(stack.cfg.runs_dir, None).read_meta()
    recorded = {t["target"]: t["host"] for t in meta["targets"]}
    assert recorded == dict(AGENT_TARGETS, local=socket.gethostname()), meta["targets"]
    # The series budget of a run: <= 200 series (pgbench -P 1, no latency log: the common case).
    r = central.benchwatch("targets", "--json", "--series")
    runs = json.loads(r.stdout)["series"]["runs"]
    assert 0 < runs[meta["run_id"]]["series"] <= 200, runs


@pytest.mark.parametrize("agent_index, component", [(0, "node_exporter"), (0, "postgres_exporter-db1"),
                                                     (1, "prometheus"), (1, "checkpoints-db2b")])
def test_a_killed_agent_component_is_started_again_by_the_agents_supervisor(world, agent_index, component):
    state_dir = world["agent_dirs"][agent_index]
    cfg = agent_mod.load_agent_config(state_dir)
    assert cfg is not None
    a = agent_mod.Agent(cfg)
    assert a.pid("supervisor") is not None and a.healthy("supervisor"), a.status()
    assert processes.wait_until(lambda: a.healthy(component), 60, 0.2), a.status()
    old_pid = a.pid(component)
    before = a.restarts().get(component, {}).get("restarts", 0)
    os.kill(old_pid, signal.SIGKILL)
    back = processes.wait_until(lambda: a.pid(component) not in (None, old_pid) and a.healthy(component), 60, 0.2)
    assert back, (old_pid, a.status(), a.log_tail("supervisor"))
    # Counted, and shown by the real `agent status --json`.
    r = subprocess.run([throwaway.BENCHWATCH, "agent", "status", "--state-dir", state_dir, "--json"],
                       capture_output=True, text=True, timeout=60)
    status = json.loads(r.stdout)
    assert status["components"][component]["restarts"] == before + 1, status["components"]
    assert status["components"][component]["pid"] == a.pid(component)
