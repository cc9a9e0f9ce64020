"""The target/host contract without a running stack: the agent's Prometheus config, the central
stack's scrape targets, the exporter's --label, run metadata's targets."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest

from benchwatch.exporter.server import Exporter, build_parser
from benchwatch.query import targets
from benchwatch.stack import agent as agent_mod
from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack, StackError
from tests.helpers.tools import require_tool

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_LOG = os.path.join(HERE, "fixtures", "pglog", "pg15_a.log")


def _agent(tmp_path, auth=None) -> agent_mod.Agent:
    cfg = agent_mod.AgentConfig(state_dir=str(tmp_path), name="db2", central_url="http://bench:19090", host="hostB",
                                instances=[agent_mod.Instance("db2a", "/var/log/a.log", "127.0.0.1:5433"),
                                           agent_mod.Instance("db2b", None, "/run/postgresql:5434")],
                                auth=auth or agent_mod.CentralAuth())
    a = agent_mod.Agent(cfg)
    cfg.ports = {c: 20000 + i for i, c in enumerate(a.components())}
    return a


def test_agent_config_is_valid_for_prometheus_agent_mode_and_labels_every_target(tmp_path):
    promtool = require_tool("promtool")
    token = tmp_path / "token"
    token.write_text("secret-token\n")
    token.chmod(0o600)
    a = _agent(tmp_path, agent_mod.CentralAuth(bearer_token_file=str(token)))
    config = a.prometheus_config()
    path = tmp_path / "agent.yml"
    path.write_text(json.dumps(config))
    r = subprocess.run([promtool, "check", "config", "--agent", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    jobs = {sc["job_name"]: sc for sc in config["scrape_configs"]}
    # node_exporter once per host, whatever the number of targets: its series carry the host, no target.
    assert [s["labels"] for s in jobs["node"]["static_configs"]] == [{"host": "hostB", "component": "node_exporter"}]
    # The same split of node_exporter's collectors as the central prometheus.yml.
    from benchwatch.stack.native import NODE_FAST_COLLECTORS, NODE_SLOW_COLLECTORS
    assert jobs["node"]["params"]["collect[]"] == list(NODE_FAST_COLLECTORS)
    assert jobs["node_inventory"]["params"]["collect[]"] == list(NODE_SLOW_COLLECTORS)
    assert jobs["node_inventory"]["static_configs"] == jobs["node"]["static_configs"]
    assert [s["labels"]["target"] for s in jobs["postgres"]["static_configs"]] == ["db2a", "db2b"]
    assert [s["labels"]["target"] for s in jobs["benchwatch"]["static_configs"]] == ["db2a"]  # only db2a has a log
    for sc in config["scrape_configs"]:
        assert all(s["labels"]["host"] == "hostB" for s in sc["static_configs"])
    remote = config["remote_write"][0]
    assert remote["url"] == "http://bench:19090/api/v1/write"
    assert remote["authorization"]["credentials_file"] == str(token)
    assert "secret-token" not in path.read_text()


def test_agent_refuses_credentials_readable_by_others(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("x\n")
    pw.chmod(0o644)
    with pytest.raises(StackError, match="chmod 600"):
        agent_mod.CentralAuth("user", str(pw)).check()
    with pytest.raises(StackError, match="both"):
        agent_mod.CentralAuth("user").check()


def test_instance_names_pair_in_order(tmp_path):
    part = _agent(tmp_path).part  # PostgreSQL's: a DSN's port tells instances apart

    def names(*args):
        return agent_mod.instance_names(*args, part=part)
    assert names("db1", ["port=5432"]) == ["db1"]
    assert names("db1", ["port=5432", "port=5433"]) == ["db1-5432", "db1-5433"]
    assert names("db1", ["host=/x", "host=/y"]) == ["db1-1", "db1-2"]
    assert names("db1", ["a", "b"], ["x", "y"]) == ["x", "y"]
    with pytest.raises(StackError, match="one per instance"):
        names("db1", ["a", "b"], ["x"])
    with pytest.raises(StackError, match="must differ"):
        names("db1", ["a", "b"], ["x", "x"])


def test_agent_components_keep_their_names(tmp_path):
    """Pid files, logs, ports and the supervisor's records go by these names: an agent started by an earlier
    version is stopped and restarted through them."""
    assert _agent(tmp_path).components() == ["node_exporter", "postgres_exporter-db2a", "postgres_exporter-db2b",
                                             "prometheus", "checkpoints-db2a", "supervisor"]
    a = _agent(tmp_path)
    assert a.health_url("checkpoints-db2a").endswith("/healthz")
    assert a.health_url("postgres_exporter-db2b").endswith("/metrics")
    assert a.health_url("prometheus").endswith("/-/ready")


def test_down_leaves_a_layout_of_another_engine_alone():
    from benchwatch import engines

    layout = {"engine": "other", "bindir": "/nowhere", "instances": [{"name": "x", "port": 1, "directory": "/nowhere/x"}]}
    assert [e.stop_local_instances(layout) for e in engines.load_engines().values()] == [[], []]


def test_an_agent_without_instances_names_its_host_series_after_itself(tmp_path):
    cfg = agent_mod.AgentConfig(state_dir=str(tmp_path), name="lonely", central_url="http://bench:19090", host="hostC")
    a = agent_mod.Agent(cfg)
    cfg.ports = {c: 20000 + i for i, c in enumerate(a.components())}
    node = {sc["job_name"]: sc for sc in a.prometheus_config()["scrape_configs"]}["node"]
    assert node["static_configs"][0]["labels"] == {"host": "hostC", "component": "node_exporter", "target": "lonely"}


def test_agent_down_stops_the_components_agents_of_earlier_versions_started(tmp_path):
    # The upgrade path: node_exporter scraped once per host changed the agent's Prometheus configuration
    # only; an agent started before it keeps its components' names (its pid files), which down stops.
    assert _agent(tmp_path).components() == ["node_exporter", "postgres_exporter-db2a", "postgres_exporter-db2b",
                                             "prometheus", "checkpoints-db2a", "supervisor"]


def test_start_agent_refuses_unpaired_server_logs(tmp_path):
    with pytest.raises(StackError, match="one per instance"):
        agent_mod.start_agent(str(tmp_path), name="db1", central_url="http://x:1", postgres=["port=1", "port=2"],
                              server_logs=["/a.log"])


def test_central_stack_labels_its_own_database_series_target_local(tmp_path, monkeypatch):
    monkeypatch.delenv("BENCHWATCH_TARGET_NAME", raising=False)
    stack = Stack(load_config(str(tmp_path)))
    stack._write_prometheus_config()
    for name in ("node", "postgres"):
        with open(tmp_path / "prometheus" / "etc" / "targets" / f"{name}.json", encoding="utf-8") as f:
            labels = json.load(f)[0]["labels"]
        assert labels["target"] == "local" and labels["host"] == socket.gethostname(), (name, labels)
    monkeypatch.setenv("BENCHWATCH_TARGET_NAME", "bench1")
    assert load_config(str(tmp_path)).database_labels()["target"] == "bench1"


def test_exporter_labels_checkpoint_series(tmp_path):
    args = build_parser().parse_args(["--runs-dir", str(tmp_path), "--remote-write-url", "http://127.0.0.1:1/api/v1/write",
                                      "--label", "target=db1", "--label", "host=hostA"])
    assert dict(args.label) == {"target": "db1", "host": "hostA"}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--runs-dir", "x", "--remote-write-url", "y", "--label", "__name__=x"])
    e = Exporter(runs_dir=str(tmp_path), remote_write_url="http://127.0.0.1:1/api/v1/write", server_log=SERVER_LOG,
                 collectors={"pgbench_runs": False}, database_labels=dict(args.label))
    sent = []
    e.collectors["checkpoints"].sink = sent.extend  # what would be remote-written
    e.collectors["checkpoints"].poll()
    assert sent and all(dict(s.labels).get("target") == "db1" and dict(s.labels).get("host") == "hostA" for s in sent)


def test_merge_watched_is_a_union_by_target():
    a = [{"target": "local", "host": "h"}, {"target": "db1", "host": "x"}]
    b = [{"target": "db1", "host": "hostA"}, {"target": "db2", "host": "hostB"}]
    assert targets.merge_watched(a, b) == [{"target": "db1", "host": "hostA"}, {"target": "db2", "host": "hostB"},
                                           {"target": "local", "host": "h"}]
    assert targets.engine_of("postgres") == "postgresql" and targets.engine_of("node") is None


@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_stack_loads_the_recording_rules_of_its_own_engine(tmp_path, monkeypatch, engine):
    """mysql.yml's 1 s group only where MariaDB is watched; every other rule file everywhere, as links."""
    from benchwatch import resources

    stack = Stack(load_config(str(tmp_path), engine=engine))
    rules = tmp_path / "prometheus" / "etc" / "rules"
    rules.parent.mkdir(parents=True)
    rules.symlink_to(resources.path("prometheus", "rules"))  # how a state dir from before links them
    stack._write_prometheus_config()
    assert rules.is_dir() and not rules.is_symlink()
    repo = sorted(n for n in os.listdir(resources.path("prometheus", "rules")) if n.endswith(".yml"))
    expected = repo if engine == "mariadb" else [n for n in repo if n != "mysql.yml"]
    assert sorted(os.listdir(rules)) == expected
    assert all(os.path.realpath(rules / n) == os.path.join(resources.path("prometheus", "rules"), n) for n in expected)


def _up(target: str, job: str, instance: str, last: float, value: float | None):
    labels = {"target": target, "host": "h", "job": job, "instance": instance}
    key = frozenset(labels.items())
    return key, (labels, last), (None if value is None else (labels, value))


def test_targets_are_judged_on_the_series_watched_now():
    """An earlier incarnation's series (other port) and a job dropped from the scrape (a staleness
    marker: no value now) are history; a current series at 0 and a silent target are not healthy."""
    now = 1000.0
    rows = [_up("a", "postgres", "127.0.0.1:1", now - 90, 1.0),    # the same target on an old port
            _up("a", "postgres", "127.0.0.1:2", now - 1, 1.0),
            _up("a", "mysql", "127.0.0.1:3", now - 5, None),       # dropped: stale-marked
            _up("b", "postgres", "127.0.0.1:4", now - 2, 0.0),
            _up("b", "node", "127.0.0.1:5", now - 1, 1.0),
            _up("c", "node", "127.0.0.1:6", now - 40, 1.0),
            # A follower restarted on another port 20 s ago: its old series ends with the up=0 of the
            # scrape after it stopped.
            _up("d", "benchwatch", "127.0.0.1:7", now - 22, 0.0),
            _up("d", "benchwatch", "127.0.0.1:8", now - 2, 1.0),
            _up("d", "node_inventory", "127.0.0.1:9", now - 14, 1.0)]
    newest = {k: n for k, n, _ in rows}
    values = {k: v for k, _, v in rows if v is not None}
    got = {t["target"]: t for t in targets.summarize(newest, values, now)}
    assert got["a"]["healthy"] and got["a"]["jobs"] == {"postgres": True} and got["a"]["instance"] == "127.0.0.1:2"
    assert got["a"]["engine"] == "postgresql"
    assert not got["b"]["healthy"] and got["b"]["problems"] == ["postgres at 127.0.0.1:4 is down (up=0)"]
    assert not got["c"]["healthy"] and got["c"]["problems"] == ["no sample for 40 s"]
    assert got["d"]["healthy"] and got["d"]["jobs"] == {"benchwatch": True, "node_inventory": True}, got["d"]
    assert targets.engine_of("mysql") == "mysql"
