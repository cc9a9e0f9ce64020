"""docker-compose.yml, checked statically (no Docker engine here): valid, pinned, one source of config."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest
import yaml

from tests.helpers.tools import require_tool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "docker", "results-secret.sh")
RESULTS_PASSWORD = "test-only-results:pass\\word"
# The results database's password is a file (a compose secret): its path is given, its content never read by compose.
SECRET_FILE = os.path.join(tempfile.mkdtemp(prefix="benchwatch-test-compose-"), "results_db_password")
with open(SECRET_FILE, "w", encoding="utf-8") as _f:
    _f.write(RESULTS_PASSWORD + "\n")
ENV = dict(os.environ, POSTGRES_PASSWORD="test-only-pg", GRAFANA_ADMIN_PASSWORD="test-only-grafana",
           RESULTS_DB_PASSWORD_FILE=SECRET_FILE)


def compose(*args, env=ENV):
    return subprocess.run([require_tool("docker-compose"), "-f", os.path.join(ROOT, "docker-compose.yml"), *args],
                          capture_output=True, text=True, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def config():
    r = compose("config")
    assert r.returncode == 0, r.stderr
    return yaml.safe_load(r.stdout)


def test_config_is_valid():
    r = compose("config", "-q")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("missing", ["POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD", "RESULTS_DB_PASSWORD_FILE"])
def test_refuses_to_start_without_passwords(missing):
    env = {k: v for k, v in ENV.items() if k != missing}
    r = compose("config", "-q", env=env)
    assert r.returncode != 0 and missing in r.stderr


def test_images_are_pinned(config):
    for name, service in config["services"].items():
        image = service["image"]
        repo, _, tag = image.rpartition(":")
        if name == "benchwatch":
            assert "build" in service
            continue
        assert repo and tag and tag != "latest" and any(c.isdigit() for c in tag), f"{name}: {image}"


def test_only_grafana_and_the_results_database_are_published_on_loopback(config):
    published = {n: s.get("ports") for n, s in config["services"].items() if s.get("ports")}
    assert sorted(published) == ["grafana", "results-db"]
    for ports in published.values():
        for port in ports:
            assert port.get("host_ip") == "127.0.0.1" if isinstance(port, dict) else str(port).startswith("127.0.0.1:")


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    return dict(e.split("=", 1) for e in env) if isinstance(env, list) else {k: str(v) for k, v in env.items()}


def test_the_results_database_is_its_own_server_its_password_a_secret_file(config):
    """docs/results.md: the stack's results database is never the server under test; its password is a file
    given as a compose secret, in no service's environment, and every reader takes it from there."""
    from benchwatch.results import dsn

    services = config["services"]
    assert config["secrets"]["results_db_password"]["file"] == SECRET_FILE
    db = services["results-db"]
    assert db["image"].startswith("postgres:") and db["volumes"] != services["postgres"]["volumes"]
    env = _environment(db)
    assert env["POSTGRES_PASSWORD_FILE"] == "/run/secrets/results_db_password" and "POSTGRES_PASSWORD" not in env
    assert "healthcheck" in db
    for name, service in services.items():
        for value in _environment(service).values():
            assert RESULTS_PASSWORD not in value, f"{name}: the results database's password in its environment"
    bench = services["benchwatch"]
    assert bench["depends_on"]["results-db"]["condition"] == "service_healthy"
    benv = _environment(bench)
    params = dsn._parse(dsn.check(benv["BENCHWATCH_RESULTS_DSN"]))  # no password in it
    assert (params["host"], params["port"], params["dbname"], params["user"]) == \
        ("results-db", "5432", env["POSTGRES_DB"], env["POSTGRES_USER"])
    assert params["passfile"] == benv["BENCHWATCH_RESULTS_PGPASS"]
    assert bench["entrypoint"][1:3] == ["/usr/local/lib/benchwatch/results-secret.sh", "pgpass"]
    grafana = services["grafana"]
    genv = _environment(grafana)
    assert (genv["BENCHWATCH_RESULTS_DB_ADDRESS"], genv["BENCHWATCH_RESULTS_DB_NAME"], genv["BENCHWATCH_RESULTS_DB_USER"]) \
        == ("results-db:5432", env["POSTGRES_DB"], env["POSTGRES_USER"])
    assert grafana["entrypoint"][1:] == ["/usr/local/lib/benchwatch/results-secret.sh", "env", "/run.sh"]
    for name in ("results-db", "benchwatch", "grafana"):
        assert [s if isinstance(s, str) else s["source"] for s in services[name]["secrets"]] == ["results_db_password"]
    for name in ("benchwatch", "grafana"):
        mounts = [v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in services[name]["volumes"]]
        assert any(m.startswith(f"{SCRIPT}:/usr/local/lib/benchwatch/results-secret.sh") for m in mounts), name


def test_the_benchwatch_service_runs_the_images_command_behind_the_secret(config):
    """An entrypoint given in the compose file replaces the image's command too: the one given is the Dockerfile's,
    and the entrypoint ends in the Dockerfile's."""
    with open(os.path.join(ROOT, "Dockerfile"), encoding="utf-8") as f:
        lines = {w.split(None, 1)[0]: json.loads(w.split(None, 1)[1]) for w in f if w.startswith(("CMD ", "ENTRYPOINT "))}
    bench = config["services"]["benchwatch"]
    assert bench["command"] == lines["CMD"]
    assert bench["entrypoint"][3:] == lines["ENTRYPOINT"]


def _secret_script(tmp_path, mode: str, *command: str, secret: str | None = RESULTS_PASSWORD):
    path = tmp_path / "secret"
    if secret is not None:
        path.write_text(secret + "\n")
    env = dict(os.environ, RESULTS_DB_SECRET=str(path), BENCHWATCH_RESULTS_PGPASS=str(tmp_path / "pgpass"))
    return subprocess.run(["sh", SCRIPT, mode, *command], env=env, capture_output=True, text=True)


def test_the_secret_becomes_a_0600_pgpass_for_libpq(tmp_path):
    from benchwatch.results.dsn import pgpass_password

    r = _secret_script(tmp_path, "pgpass", "sh", "-c", "echo started")
    assert r.returncode == 0 and r.stdout == "started\n", r.stderr
    pgpass = tmp_path / "pgpass"
    assert oct(pgpass.stat().st_mode & 0o777) == "0o600"
    # ":" and "\\" escaped as libpq reads them: the password comes back whole
    assert pgpass_password(str(pgpass), "results-db", "5432", "benchwatch_results", "benchwatch") == RESULTS_PASSWORD


def test_the_secret_becomes_grafanas_environment_alone(tmp_path):
    r = _secret_script(tmp_path, "env", "sh", "-c", 'printf %s "$BENCHWATCH_RESULTS_DB_PASSWORD"')
    assert r.returncode == 0 and r.stdout == RESULTS_PASSWORD, r.stderr
    assert not (tmp_path / "pgpass").exists()


@pytest.mark.parametrize("secret, said", [(None, "cannot read"), ("", "is empty"), ("a\nb", "more than one line")])
def test_a_missing_or_odd_secret_is_refused_saying_why(tmp_path, secret, said):
    r = _secret_script(tmp_path, "pgpass", "sh", "-c", "echo started", secret=secret)
    assert r.returncode == 2 and "started" not in r.stdout and said in r.stderr, r.stderr


def test_bind_mounts_exist_and_are_the_native_stack_files(config):
    sources = set()
    for name, service in config["services"].items():
        for volume in service.get("volumes", []):
            # docker-compose 1.29 prints the short form "source:target[:mode]"; named volumes have no slash.
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith("/"):
                if source == "/":
                    continue  # node-exporter reads the host
                assert os.path.exists(source), f"{name}: {source}"
                sources.add(os.path.relpath(source, ROOT))
    for shared in ("prometheus/prometheus.yml", "prometheus/rules", "prometheus/alerts", "alertmanager/alertmanager.yml",
                   "exporters/postgres_exporter/queries.yaml", "grafana/provisioning", "dashboards"):
        assert shared in sources, shared


def test_every_scrape_job_has_compose_targets(config):
    with open(os.path.join(ROOT, "prometheus", "prometheus.yml"), encoding="utf-8") as f:
        prom = yaml.safe_load(f)
    files = {os.path.basename(p) for job in prom["scrape_configs"] for sd in job.get("file_sd_configs", []) for p in sd["files"]}
    for name in files:
        with open(os.path.join(ROOT, "docker", "targets", name), encoding="utf-8") as f:
            entries = json.load(f)
        hosts = [t.split(":")[0] for e in entries for t in e["targets"]]
        for host in hosts:
            assert host == "localhost" or host in config["services"], f"{name}: {host}"


def test_healthchecks_and_dependencies(config):
    services = config["services"]
    for name in ("postgres", "results-db", "prometheus", "alertmanager", "grafana"):
        assert "healthcheck" in services[name], name
    assert services["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"
    assert services["benchwatch"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["grafana"]["depends_on"]["results-db"]["condition"] == "service_healthy"


def test_exporter_flags_are_the_native_stacks(config):
    """The compose command lines repeat the native stack's choices: keep the two equal."""
    from benchwatch.engines.postgresql.server import POSTGRES_EXPORTER_FLAGS
    from benchwatch.stack.native import NODE_EXPORTER_FLAGS
    node = config["services"]["node-exporter"]["command"]
    assert [f for f in node if not f.startswith("--path.")] == list(NODE_EXPORTER_FLAGS)
    pg = config["services"]["postgres-exporter"]["command"]
    assert [f for f in pg if not f.startswith("--extend.query-path")] == list(POSTGRES_EXPORTER_FLAGS)


def test_node_jobs_split_the_exporters_collectors_by_resolution():
    """Every collector node_exporter runs is scraped by exactly one job: iostat's each second, the rest every 15 s."""
    from benchwatch.stack.native import NODE_COLLECTORS, NODE_FAST_COLLECTORS, NODE_SLOW_COLLECTORS

    with open(os.path.join(ROOT, "prometheus", "prometheus.yml"), encoding="utf-8") as f:
        prom = yaml.safe_load(f)
    jobs = {job["job_name"]: job for job in prom["scrape_configs"]}
    assert jobs["node"]["params"]["collect[]"] == list(NODE_FAST_COLLECTORS)
    assert "scrape_interval" not in jobs["node"]  # the global 1 s
    assert jobs["node_inventory"]["params"]["collect[]"] == list(NODE_SLOW_COLLECTORS)
    assert jobs["node_inventory"]["scrape_interval"] == "15s"
    assert jobs["node"]["file_sd_configs"] == jobs["node_inventory"]["file_sd_configs"]
    assert sorted(NODE_FAST_COLLECTORS + NODE_SLOW_COLLECTORS) == sorted(NODE_COLLECTORS)


def test_the_benchwatch_scrape_drops_every_remote_written_series_and_keeps_the_self_metrics():
    """Run, dip and checkpoint series reach Prometheus by remote write at their own times: the scrape of the
    exporter's /metrics must drop each of them (else each run series appears twice, once with job/instance),
    and keep the exporter's health."""
    import re

    from benchwatch.engines.postgresql import checkpoints as checkpoint_model
    from benchwatch.engines.postgresql.collectors import checkpoints
    from benchwatch.exporter import dips, processes
    from benchwatch.exporter.self_metrics import SELF_METRICS
    from benchwatch.model.run import METRICS

    with open(os.path.join(ROOT, "prometheus", "prometheus.yml"), encoding="utf-8") as f:
        prom = yaml.safe_load(f)
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "benchwatch")
    drops = [re.compile(r["regex"]) for r in job["metric_relabel_configs"]
             if r.get("action") == "drop" and r.get("source_labels") == ["__name__"]]
    remote_written = {*METRICS, *checkpoint_model.METRICS, *dips.DIP_METRICS, *processes.METRICS,
                      *checkpoints.EVENT_METRICS}
    kept = [n for n in sorted(remote_written) if not any(d.fullmatch(n) for d in drops)]
    assert not kept, f"remote-written series the benchwatch scrape would duplicate: {kept}"
    # A tool's own series (whatever its prefix) come from its run model, which labels every sample with run_id
    # (RunModel._set): the rule that drops every series with a run_id drops them, so a new tool needs no
    # line in prometheus.yml.
    assert {"source_labels": ["run_id"], "regex": ".+", "action": "drop"} in job["metric_relabel_configs"]
    dropped = [n for n in {*SELF_METRICS, *checkpoints.EXPORTER_METRICS} if any(d.fullmatch(n) for d in drops)]
    assert not dropped, f"self-metrics the scrape drops: {dropped}"
