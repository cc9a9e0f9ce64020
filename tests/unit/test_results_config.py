"""Where the results database and the host name come from (issue 31): flag > environment > stack.json > default,
a DSN with a password refused and never kept, the stack's own database by default."""

from __future__ import annotations

import json
import socket

import pytest

from benchwatch.results import dsn
from benchwatch.stack.config import load_config
from benchwatch.stack.native import RESULTS_DB, Stack


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("BENCHWATCH_RESULTS_DSN", "BENCHWATCH_HOST", "PGPASSFILE", "BENCHWATCH_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_by_default_the_stack_runs_its_own_results_database(tmp_path):
    cfg = load_config(str(tmp_path))
    assert cfg.own_results_db and cfg.host == socket.gethostname()
    target = cfg.results_target()
    assert target is not None and "127.0.0.1" in target and str(tmp_path / "secrets" / "results_pgpass") in target
    assert RESULTS_DB in Stack(cfg).components()
    assert Stack(cfg).components().index(RESULTS_DB) < Stack(cfg).components().index("benchwatch_exporter")


def test_a_dsn_is_kept_without_password_and_others_then_read_it(tmp_path, monkeypatch):
    cfg = load_config(str(tmp_path), results_dsn="host=results.example dbname=bw user=bench", host="ci-runner")
    assert not cfg.own_results_db and RESULTS_DB not in Stack(cfg).components()
    cfg.save()
    saved = json.loads((tmp_path / "stack.json").read_text())
    assert saved["results_dsn"] == "host=results.example dbname=bw user=bench" and saved["host"] == "ci-runner"
    later = load_config(str(tmp_path))
    assert later.results_target() == saved["results_dsn"] and later.host == "ci-runner"
    assert later.database_labels()["host"] == "ci-runner"
    monkeypatch.setenv("BENCHWATCH_HOST", "from-env")
    assert load_config(str(tmp_path)).host == "from-env"
    assert load_config(str(tmp_path), host="flag").host == "flag"
    assert load_config(str(tmp_path), results_dsn="own").own_results_db
    assert load_config(str(tmp_path), results_dsn="off").results_target() is None


def test_pgpassfile_is_named_in_the_kept_dsn(tmp_path, monkeypatch):
    monkeypatch.setenv("PGPASSFILE", "/etc/bench/pgpass")
    cfg = load_config(str(tmp_path), results_dsn="host=results.example")
    assert "passfile=/etc/bench/pgpass" in (cfg.results_dsn or "")


def test_a_dsn_with_a_password_is_refused_from_the_flag_and_the_environment(tmp_path, monkeypatch):
    with pytest.raises(dsn.DsnError):
        load_config(str(tmp_path), results_dsn="host=x password=hunter2")
    monkeypatch.setenv("BENCHWATCH_RESULTS_DSN", "postgresql://u:hunter2@x/db")
    with pytest.raises(dsn.DsnError):
        load_config(str(tmp_path))
    assert not (tmp_path / "stack.json").exists()
