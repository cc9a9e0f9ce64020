"""Each port is written once, in benchwatch.stack.config.DEFAULT_PORTS: Python reads it from there, and
the files that cannot import it (Alertmanager's YAML, compose's targets JSON, the Dockerfile,
docker-compose.yml) are checked against it here, so that a port changed in one place and not the
others fails a test instead of a stack."""

from __future__ import annotations

import ast
import json
import os
import shlex

import yaml

import benchwatch
from benchwatch.exporter.server import build_parser
from benchwatch.stack.config import COMPOSE_EXPORTER, DEFAULT_PORTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.dirname(benchwatch.__file__)
EXPORTER_PORT = DEFAULT_PORTS["benchwatch_exporter"]


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _listen_port(argv: list[str]) -> int | None:
    for i, arg in enumerate(argv):
        if arg.startswith("--listen="):
            return int(arg.rsplit(":", 1)[1])
        if arg == "--listen":
            return int(argv[i + 1].rsplit(":", 1)[1])
    return None


def test_compose_exporter_address_is_the_default_port():
    assert COMPOSE_EXPORTER == f"benchwatch:{EXPORTER_PORT}"


def test_alertmanager_sends_to_the_exporter_compose_runs():
    config = yaml.safe_load(_read("alertmanager", "alertmanager.yml"))
    urls = [w["url"] for r in config["receivers"] for w in r.get("webhook_configs", [])]
    ours = [u for u in urls if "benchwatch" in u]
    assert ours and all(u == f"http://{COMPOSE_EXPORTER}/alerts" for u in ours), urls


def test_compose_scrapes_the_exporter_at_its_port():
    with open(os.path.join(ROOT, "docker", "targets", "benchwatch.json"), encoding="utf-8") as f:
        entries = json.load(f)
    assert [t for e in entries for t in e["targets"]] == [COMPOSE_EXPORTER]


def test_the_image_listens_on_the_exporter_port():
    cmd = [line for line in _read("Dockerfile").splitlines() if line.startswith("CMD ")]
    assert len(cmd) == 1
    argv = json.loads(cmd[0][len("CMD "):])
    assert argv[0] == "exporter" and _listen_port(argv) == EXPORTER_PORT, argv


def test_compose_runs_the_image_as_built():
    """docker-compose's benchwatch service keeps the image's command, or listens on the same port."""
    service = yaml.safe_load(_read("docker-compose.yml"))["services"]["benchwatch"]
    command = service.get("command")
    if command is not None:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        assert _listen_port(argv) in (None, EXPORTER_PORT), argv
    for key in ("ports", "expose"):
        for spec in service.get(key, []):
            assert str(spec).rsplit(":", 1)[-1].split("/")[0] == str(EXPORTER_PORT), spec


def test_daemons_listen_on_their_default_ports():
    args = build_parser().parse_args(["--runs-dir", "x", "--remote-write-url", "http://127.0.0.1:1/api/v1/write"])
    assert _listen_port(["--listen", args.listen]) == EXPORTER_PORT


def test_no_python_module_writes_a_default_port_but_the_config():
    """A default port as a number or inside a string (``127.0.0.1:19188``) anywhere but stack/config.py."""
    ports = {p: c for c, p in DEFAULT_PORTS.items()}
    found = []
    for root, _dirs, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(root, name)
            if not name.endswith(".py") or os.path.relpath(path, PACKAGE) == os.path.join("stack", "config.py"):
                continue
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            # An engine brings its components' ports (Engine.default_ports), which DEFAULT_PORTS composes.
            engine_ports = {id(n) for a in ast.walk(tree) if isinstance(a, (ast.Assign, ast.AnnAssign))
                            and any(isinstance(t, ast.Name) and t.id == "default_ports"
                                    for t in (a.targets if isinstance(a, ast.Assign) else [a.target]))
                            and a.value is not None for n in ast.walk(a.value)}
            for node in ast.walk(tree):
                if id(node) in engine_ports:
                    continue
                if isinstance(node, ast.Constant) and type(node.value) is int and node.value in ports:
                    found.append(f"{os.path.relpath(path, PACKAGE)}:{node.lineno}: {node.value}")
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found += [f"{os.path.relpath(path, PACKAGE)}:{node.lineno}: {node.value!r}"
                              for p in ports if f":{p}" in node.value]
    assert not found, "ports written outside benchwatch.stack.config.DEFAULT_PORTS:\n" + "\n".join(found)


# -- the scrape configuration: prometheus/prometheus.yml, which agents read ------------------------

def test_node_exporter_collectors_are_those_the_stack_enables():
    from benchwatch.stack.agent import central_scrape_jobs
    from benchwatch.stack.native import NODE_FAST_COLLECTORS, NODE_SLOW_COLLECTORS

    jobs = central_scrape_jobs()
    assert jobs["node"]["params"]["collect[]"] == list(NODE_FAST_COLLECTORS)
    assert jobs["node_inventory"]["params"]["collect[]"] == list(NODE_SLOW_COLLECTORS)


def test_agent_runs_the_central_jobs_as_written(tmp_path):
    """Every job an agent shares with the central stack is prometheus.yml's, targets aside."""
    from benchwatch.engines.postgresql import ENGINE
    from benchwatch.stack import agent as agent_mod

    cfg = agent_mod.AgentConfig(state_dir=str(tmp_path), name="db1", central_url="http://bench:1", host="h",
                                instances=[agent_mod.Instance("db1", "/var/log/a.log", "127.0.0.1:5432")])
    agent = agent_mod.Agent(cfg)
    cfg.ports = {c: 20000 + i for i, c in enumerate(agent.components())}
    central = agent_mod.central_scrape_jobs()
    jobs = {j["job_name"]: j for j in agent.prometheus_config()["scrape_configs"]}
    shared = ["node", "node_inventory", ENGINE.scrape_job]
    assert set(shared) < set(jobs)
    for name in shared:
        ours = {k: v for k, v in jobs[name].items() if k != "static_configs"}
        assert ours == {k: v for k, v in central[name].items() if k != "file_sd_configs"}, name
        assert jobs[name]["static_configs"]


def test_the_postgres_job_drops_only_the_exporters_own_runtime_series():
    """postgres_exporter's Go runtime and process series (45 of its 85 a scrape) are dropped at the scrape,
    centrally and on agents (which run the job as written); every pg_* series, and pg_up, is kept."""
    import re

    from benchwatch.engines.postgresql import ENGINE
    from benchwatch.stack.agent import central_scrape_jobs

    relabel = central_scrape_jobs()[ENGINE.scrape_job]["metric_relabel_configs"]
    dropped = [re.compile(r["regex"]) for r in relabel if r.get("action") == "drop" and r.get("source_labels") == ["__name__"]]
    assert len(dropped) == 1 and len(relabel) == 1
    for name in ("go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "promhttp_metric_handler_requests_total"):
        assert dropped[0].fullmatch(name), name
    queries = yaml.safe_load(_read("exporters/postgres_exporter/queries.yaml"))
    kept = ["pg_up", "pg_exporter_last_scrape_error", "pg_stat_bgwriter_checkpoints_timed_total",
            *(f"{ns}_{col}" for ns, q in queries.items() for m in q["metrics"] for col in m)]
    assert not [n for n in kept if dropped[0].fullmatch(n)]


def test_the_exporter_scrape_drops_every_series_it_remote_writes():
    """Run series reach Prometheus by remote write at their own times; scraped from /metrics as well they
    would be a second series with job/instance labels, which a query picking one series may pick."""
    import re

    from benchwatch.model import names, run
    from benchwatch.stack.agent import central_scrape_jobs

    relabel = central_scrape_jobs()["benchwatch"]["metric_relabel_configs"]
    dropped = [r["regex"] for r in relabel if r.get("action") == "drop" and r.get("source_labels") == ["__name__"]]
    assert len(dropped) == 1
    # Every tool's own series carry run_id, dropped by the run_id rule (tests/unit/test_compose.py): the name
    # rule covers the tool-neutral series and the renamed ones.
    assert {"source_labels": ["run_id"], "regex": ".+", "action": "drop"} in relabel
    written = set(run.METRICS) | set(names.RENAMED) | set(names.RENAMED.values())
    written |= {"pg_checkpoint_info", "pg_checkpoint_in_progress", "pg_checkpoints_completed_total"}
    kept = sorted(n for n in written if not re.fullmatch(dropped[0], n))
    assert not kept, kept
    assert not re.fullmatch(dropped[0], "benchwatch_exporter_collector_success")


def test_the_readme_port_table_says_the_default_ports():
    import re

    rows = re.findall(r"^\|[^|]*\| (\d+) \| `--([a-z-]+)-port` \|$", _read("README.md"), re.M)
    assert len(rows) >= 6
    assert {flag.replace("-", "_"): int(port) for port, flag in rows} == {
        flag.replace("-", "_"): DEFAULT_PORTS[flag.replace("-", "_")] for _port, flag in rows}
