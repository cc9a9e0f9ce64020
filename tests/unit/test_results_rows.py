"""What the commands write to the results database's version 2 tables (sweep_verdicts from a report,
history_change_points from a history), and how Grafana's data source finds the database: pure logic, on a
report of a real sweep (tests/fixtures/gate) and a history of run directories."""

from __future__ import annotations

import json
import os

import yaml

from benchwatch.experiment.verdicts import verdict_rows
from benchwatch.history import report as history_report
from benchwatch.history.rows import change_point_rows
from benchwatch.results import dsn as results_dsn
from benchwatch.results.store import CHANGE_POINT_COLUMNS, VERDICT_COLUMNS
from benchwatch.util.private import write_private
from tests.unit.test_history import _history

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_report_s_verdicts_as_rows():
    with open(os.path.join(ROOT, "tests", "fixtures", "gate", "sweep-regressed.json"), encoding="utf-8") as f:
        model = json.load(f)
    rows = verdict_rows(model)
    assert all(set(r) <= set(VERDICT_COLUMNS) for r in rows)
    by_metric = {r["metric"]: r for r in rows}
    tps = by_metric["tps"]
    assert tps["verdict"] == "slower" and tps["ratio"] == 0.0868 and (tps["ratio_ci_low"], tps["ratio_ci_high"]) == (0.043, 0.175)
    assert tps["p_adjusted"] == 0.00326 and tps["n_baseline"] == tps["n_variant"] == 3 and tps["min_effect_pct"] == model["min_effect_pct"]
    assert tps["why"].startswith("candidate at 1 client") and tps["cell"] == "clients=1,scale=1"
    assert by_metric["latency_avg"]["verdict"] == "higher" and by_metric["latency_avg"]["ratio_ci_high"] == 23.206
    assert by_metric["steadiness"]["verdict"] == "no difference shown"
    # the stability measures no run had (this sweep's runs had no profile) are left out, not written as empty rows
    assert not {"tps_cov", "dip_seconds"} & set(by_metric)
    steady = model["differences"][0]["stability"]
    steady["measures"]["tps_cov"].update(ratio=1.8, ratio_ci=[1.2, 2.7], p_value=0.01, p_adjusted=0.05,
                                         verdict="higher", n_baseline=3, n_variant=3, note=None)
    (cov,) = [r for r in verdict_rows(model) if r["metric"] == "tps_cov"]
    assert (cov["ratio"], cov["ratio_ci_low"], cov["ratio_ci_high"], cov["p_adjusted"]) == (1.8, 1.2, 2.7, 0.05)
    assert cov["verdict"] == "higher" and cov["test"] == steady["test"]


def test_a_history_s_change_points_as_rows(tmp_path):
    ids = _history(tmp_path)
    hist = history_report.History.of_state(str(tmp_path), str(tmp_path / "runs"))
    entries = hist.entries()
    result = history_report.series(hist, entries[0].workload, "tps", entries)
    (row,) = change_point_rows(result)
    assert set(row) == set(CHANGE_POINT_COLUMNS)
    assert row["run_id"] == ids[6] and row["verdict"] == "regression" and row["started_at"] == 1_760_000_000 + 6 * 86400
    assert row["step_ci_low"] <= row["step_pct"] <= row["step_ci_high"] < -25 and row["p_value"] < 0.01
    assert row["changed"]["synchronous_commit"] == ["off", "on"]
    assert "synchronous_commit: off → on" in row["changed_text"] and row["accepted"] is False


def test_grafana_s_data_source_reads_the_password_from_the_pgpass_file(tmp_path, monkeypatch):
    passfile = str(tmp_path / "pgpass")
    write_private(passfile, "# a comment\nother:*:*:postgres:no\n127.0.0.1:*:*:postgres:s3cr\\:et\n")
    monkeypatch.delenv("PGPASSFILE", raising=False)
    env = results_dsn.grafana_environment(results_dsn.local(19432, passfile))
    assert env == {"BENCHWATCH_RESULTS_DB_ADDRESS": "127.0.0.1:19432", "BENCHWATCH_RESULTS_DB_NAME": "benchwatch_results",
                   "BENCHWATCH_RESULTS_DB_USER": "postgres", "BENCHWATCH_RESULTS_DB_SSLMODE": "disable",
                   "BENCHWATCH_RESULTS_DB_PASSWORD": "s3cr:et"}
    team = results_dsn.grafana_environment(f"host=results.example dbname=bw user=bench passfile={passfile}")
    assert team["BENCHWATCH_RESULTS_DB_ADDRESS"] == "results.example:5432" and "BENCHWATCH_RESULTS_DB_PASSWORD" not in team
    assert results_dsn.grafana_environment(results_dsn.OFF) == {} and results_dsn.grafana_environment(None) == {}


def test_the_provisioned_results_data_source_carries_no_secret():
    with open(os.path.join(ROOT, "grafana", "provisioning", "datasources", "benchwatch.yml"), encoding="utf-8") as f:
        sources = {s["uid"]: s for s in yaml.safe_load(f)["datasources"]}
    results = sources["benchwatch-results"]
    assert results["type"] in ("postgres", "grafana-postgresql-datasource")
    assert results["secureJsonData"] == {"password": "$BENCHWATCH_RESULTS_DB_PASSWORD"}
    assert results["url"] == "$BENCHWATCH_RESULTS_DB_ADDRESS" and results["jsonData"]["database"] == "$BENCHWATCH_RESULTS_DB_NAME"


def test_every_column_of_every_table_is_documented():
    """docs/results.md has a table of columns under each CREATE TABLE of schema.sql, every column in it."""
    import re

    from benchwatch.results.store import schema_sql

    with open(os.path.join(ROOT, "docs", "results.md"), encoding="utf-8") as f:
        doc = f.read()
    tables = re.findall(r"CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\);", schema_sql(), re.S)
    assert {t for t, _ in tables} >= {"runs", "sweep_verdicts", "history_change_points"}
    for table, body in tables:
        section = doc.split(f"### `{table}`", 1)
        assert len(section) == 2, f"docs/results.md has no section of {table}"
        part = section[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        for line in body.strip().splitlines():
            column = line.split()[0]
            if column in ("PRIMARY", "UNIQUE"):
                continue
            assert f"| `{column}` |" in part, f"{table}.{column} is not in docs/results.md"


def test_commands_write_rows_to_a_given_database_or_to_the_stack_s_own_only_while_it_runs(tmp_path, monkeypatch):
    from benchwatch.stack.config import load_config
    from benchwatch.stack.native import Stack

    monkeypatch.delenv("BENCHWATCH_RESULTS_DSN", raising=False)
    own = Stack(load_config(str(tmp_path / "own")))
    assert own.cfg.results_target() is not None and own.results_target_running() is None  # not up: no wait on it
    team = "host=results.example dbname=bw user=bench"
    assert Stack(load_config(str(tmp_path / "team"), results_dsn=team)).results_target_running().startswith(team)
    assert Stack(load_config(str(tmp_path / "off"), results_dsn="off")).results_target_running() is None
