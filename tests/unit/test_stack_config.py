"""The stack's configuration: flag > environment > stack.json > default, and what up/demo start
(not what an earlier up started: issue 19's sticky engine)."""

from __future__ import annotations

import json
import os

import pytest

from benchwatch import cli, engines
from benchwatch.commands import Context
from benchwatch.stack.config import DEFAULT_PORTS, load_config
from benchwatch.stack.native import Stack


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("BENCHWATCH_ENGINE", "BENCHWATCH_STATE_DIR", "BENCHWATCH_PG_DSN", "BENCHWATCH_PROMETHEUS_RETENTION",
                 "BENCHWATCH_HOST_READER",
                 "BENCHWATCH_ALERT_WEBHOOK_URL", "BENCHWATCH_GRAFANA_ADMIN_PASSWORD", "BENCHWATCH_GRAFANA_HOME",
                 *(f"BENCHWATCH_{c.upper()}_PORT" for c in DEFAULT_PORTS)):
        monkeypatch.delenv(name, raising=False)


def _save(tmp_path, **data) -> None:
    (tmp_path / "stack.json").write_text(json.dumps(data))


def test_engine_names_are_families_and_old_stack_json_still_reads(tmp_path):
    assert load_config(str(tmp_path)).engine == "postgresql" == engines.default().name
    _save(tmp_path, engine="mariadb", mariadb_instances=4)  # as benchwatch wrote it before
    cfg = load_config(str(tmp_path))
    assert cfg.engine == "mysql" and cfg.option("mariadb_instances") == 4 and not cfg.engine_asked
    _save(tmp_path, engine="postgres")
    assert load_config(str(tmp_path)).engine == "postgresql"
    assert load_config(str(tmp_path), engine="mariadb").engine == "mysql"
    assert load_config(str(tmp_path / "x"), mysql_defaults_file="/etc/mysql/debian.cnf").engine == "mysql"


def test_what_up_starts_is_not_read_from_stack_json(tmp_path, monkeypatch):
    _save(tmp_path, engine="mysql", mariadb_instances=4, mysql_defaults_file=None, ports={"prometheus": 29090})
    cfg = load_config(str(tmp_path), starting=True)
    assert cfg.engine == "postgresql" and cfg.option("mariadb_instances") == 1 and not cfg.engine_asked
    assert cfg.ports["prometheus"] == 29090  # where the stack listens is still its own
    assert load_config(str(tmp_path)).engine == "mysql"  # run, status, down: what up started
    monkeypatch.setenv("BENCHWATCH_ENGINE", "mariadb")
    cfg = load_config(str(tmp_path), starting=True)
    assert cfg.engine == "mysql" and cfg.engine_asked
    assert load_config(str(tmp_path), engine="postgres", starting=True).engine == "postgresql"  # flag > env


def test_ports_flag_over_env_over_saved_over_default(tmp_path, monkeypatch):
    assert load_config(str(tmp_path)).ports["prometheus"] == DEFAULT_PORTS["prometheus"]
    _save(tmp_path, ports={"prometheus": 29090, "mariadb": 23306})
    assert load_config(str(tmp_path)).ports["prometheus"] == 29090
    monkeypatch.setenv("BENCHWATCH_PROMETHEUS_PORT", "39090")
    assert load_config(str(tmp_path)).ports["prometheus"] == 39090
    assert load_config(str(tmp_path), {"prometheus": 49090}).ports["prometheus"] == 49090
    assert load_config(str(tmp_path)).ports["mariadb"] == 23306
    # Every engine's components have a default port (and so a --*-port flag).
    assert {"postgres", "postgres_exporter", "mariadb", "mysqld_exporter"} <= set(DEFAULT_PORTS)


def test_instances_only_for_an_engine_that_runs_several(tmp_path):
    assert load_config(str(tmp_path), engine="mariadb", instances=4).option("mariadb_instances") == 4
    assert load_config(str(tmp_path), instances=4).option("mariadb_instances") == 1  # demo --shards has its own instances


def test_env_only_settings_are_read_here_and_never_saved(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHWATCH_PROMETHEUS_RETENTION", "2d")
    monkeypatch.setenv("BENCHWATCH_GRAFANA_ADMIN_PASSWORD", "s3cret-admin")
    monkeypatch.setenv("BENCHWATCH_ALERT_WEBHOOK_URL", "http://hook/x")
    cfg = load_config(str(tmp_path), engine="mariadb")
    assert (cfg.prometheus_retention, cfg.grafana_admin_password, cfg.alert_webhook_url) == ("2d", "s3cret-admin",
                                                                                           "http://hook/x")
    cfg.save()
    saved = json.loads((tmp_path / "stack.json").read_text())
    assert saved["engine"] == "mysql"
    assert "s3cret-admin" not in (tmp_path / "stack.json").read_text()
    assert not {"prometheus_retention", "grafana_admin_password", "alert_webhook_url", "engine_asked"} & set(saved)
    monkeypatch.delenv("BENCHWATCH_PROMETHEUS_RETENTION")
    assert load_config(str(tmp_path)).prometheus_retention == "30y"


def _args(*argv: str):
    return cli.build_parser().parse_args(list(argv))


def test_up_without_engine_starts_the_default_unless_a_stack_still_runs(tmp_path, monkeypatch, capsys):
    _save(tmp_path, engine="mariadb")
    mysql = engines.get("mysql")
    running: list = [None]
    monkeypatch.setattr(Stack, "running_engine", lambda self: running[0])
    stack = Context(_args("up", "--state-dir", str(tmp_path))).starting_stack()
    assert stack is not None and stack.engine is engines.default()
    assert capsys.readouterr().err == ""
    running[0] = mysql  # still running: it stays so, and says which engine it runs
    stack = Context(_args("up", "--state-dir", str(tmp_path))).starting_stack()
    assert stack is not None and stack.engine is mysql
    assert "already running MySQL/MariaDB" in capsys.readouterr().err
    # Another engine asked for while it runs: refused, with the reason.
    assert Context(_args("up", "--state-dir", str(tmp_path), "--engine", "postgres")).starting_stack() is None
    assert "benchwatch: the stack in" in capsys.readouterr().err
    assert Context(_args("demo", "--state-dir", str(tmp_path), "--engine", "mariadb")).starting_stack().engine is mysql


def test_run_of_a_tool_that_cannot_drive_the_stacks_engine_says_so(tmp_path, capsys):
    _save(tmp_path, engine="mariadb")
    code = cli.main(["run", "--state-dir", str(tmp_path), "--", "pgbench", "-i"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("benchwatch: ") and "MySQL/MariaDB" in err and "pgbench" in err, err
    assert not (tmp_path / "runs").exists()  # nothing was run


def test_an_unknown_engine_from_the_environment_is_a_message_not_a_traceback(tmp_path, monkeypatch, capsys):
    from benchwatch import cli

    monkeypatch.setenv("BENCHWATCH_ENGINE", "oracle")
    assert cli.main(["status", "--state-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchwatch: unknown engine 'oracle': use one of ") and "Traceback" not in err


def test_up_without_pg_dsn_on_a_stopped_stack_forgets_an_earlier_one(tmp_path):
    """Like the engine, the existing server an earlier up watched is not sticky: up without --pg-dsn starts the
    embedded server; with it (or while that stack still runs) the DSN is kept for run, psql and down."""
    from benchwatch.stack.native import Stack

    said: list[str] = []
    stack = Stack(load_config(str(tmp_path), pg_dsn="host=db.example port=5432 dbname=bench", starting=True), out=said.append)
    stack.server.choose_server(False)
    assert Stack(load_config(str(tmp_path))).server.external_dsn() == "host=db.example port=5432 dbname=bench"
    running = Stack(load_config(str(tmp_path), starting=True), out=said.append)
    running.server.choose_server(True)  # a stack still running stays as it is
    assert Stack(load_config(str(tmp_path))).server.external_dsn() is not None and not said
    Stack(load_config(str(tmp_path), starting=True), out=said.append).server.choose_server(False)
    assert Stack(load_config(str(tmp_path))).server.external_dsn() is None
    assert said and "embedded" in said[0]


def test_who_reads_the_host_comes_from_the_environment_and_stays_in_stack_json(tmp_path, monkeypatch):
    from benchwatch.stack.config import check_host_reader

    cfg = load_config(str(tmp_path))
    assert cfg.host_reader == "node_exporter" and check_host_reader(cfg) is None
    monkeypatch.setenv("BENCHWATCH_HOST_READER", "exporter")
    cfg = load_config(str(tmp_path), starting=True)
    assert cfg.host_reader == "exporter"
    cfg.save()
    monkeypatch.delenv("BENCHWATCH_HOST_READER")
    assert load_config(str(tmp_path)).host_reader == "exporter"  # the supervisor, status, down: as up started it
    assert load_config(str(tmp_path), starting=True).host_reader == "node_exporter"  # a new up: the default again
    saved = json.loads((tmp_path / "stack.json").read_text())
    del saved["host_reader"]
    (tmp_path / "stack.json").write_text(json.dumps(saved))
    assert load_config(str(tmp_path)).host_reader == "node_exporter"  # saved before the exporter could read the host
    monkeypatch.setenv("BENCHWATCH_HOST_READER", "node-exporter")
    assert check_host_reader(load_config(str(tmp_path))) == \
        "BENCHWATCH_HOST_READER must be one of node_exporter, exporter, not 'node-exporter'"


@pytest.mark.parametrize("reader", ["node_exporter", "exporter"])
def test_the_exporter_reading_the_host_drops_node_exporters_1s_job_and_turns_its_collector_on(tmp_path, reader):
    import yaml

    cfg = load_config(str(tmp_path))
    cfg.host_reader = reader
    stack = Stack(cfg)
    path = stack._write_prometheus_config()
    with open(path, encoding="utf-8") as f:
        jobs = [j["job_name"] for j in yaml.safe_load(f)["scrape_configs"]]
    # node_exporter stays for the host's size and load every 15 s either way.
    assert "node_inventory" in jobs and ("node" in jobs) == (reader == "node_exporter")
    assert os.path.islink(path) == (reader == "node_exporter")  # a copy only when it differs from the repository's
    if reader == "exporter":
        assert os.stat(path).st_mode & 0o777 == 0o600
    assert stack.reads_host() == (reader == "exporter")
