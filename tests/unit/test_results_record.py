"""The results database's pure logic: a run directory as rows and back, the pending markers, the DSN rule."""

from __future__ import annotations

import filecmp
import json
import os
import shutil

import pytest

from benchwatch.history import index, workload
from benchwatch.record import rundir
from benchwatch.results import dsn, record
from benchwatch.results.pending import Pending
from benchwatch.results.store import UPSERT_RUN, schema_sql

RUN = os.path.join(os.path.dirname(__file__), "..", "fixtures", "snapshot", "20261122T181310Z-ece8")


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "runs" / os.path.basename(RUN)
    shutil.copytree(RUN, path)
    (path / ".delivered.json").write_text("{}")          # the exporter's bookkeeping: not kept
    (path / "meta.json.tmp").write_text("half")           # a write in progress: not kept
    return str(path)


def test_a_run_directory_becomes_rows_and_comes_back_the_same(run_dir, tmp_path):
    entry = index.read_entry(rundir.RunDir(run_dir))
    rec = record.read_run(run_dir, "host-a", entry, workload.pooled_id(entry["key"]))
    names = {f.name for f in rec.files}
    assert {"meta.json", "stdout.log", "stderr.log", "series/node_cpu_seconds_total.csv"} <= names
    assert ".delivered.json" not in names and "meta.json.tmp" not in names
    kinds = {f.name: f.kind for f in rec.files}
    assert kinds["stdout.log"] == "output" and kinds["series/host.json"] == "series" and kinds["meta.json"] == "meta"
    assert all(f.encoding == record.GZIP and len(f.data) < f.size + 64 for f in rec.files)

    row = rec.row()
    assert row["run_id"] == os.path.basename(RUN) and row["host"] == "host-a" and row["tool"] == "pgbench"
    assert json.loads(row["meta"])["run_id"] == row["run_id"]
    assert json.loads(row["workload_key"]) == entry["key"]
    assert row["workload"] == entry["workload"] and row["pooled_workload"] != row["workload"]
    assert isinstance(row["started_at"], float)

    back = record.materialize(rec.files, str(tmp_path / "elsewhere"), rec.run_id)
    for name in names:
        assert filecmp.cmp(os.path.join(run_dir, name), back.file(name), shallow=False), name
    assert rundir.list_runs(str(tmp_path / "elsewhere"))[0].run_id == rec.run_id


def test_materialize_leaves_a_local_run_as_it_is_and_refuses_paths_outside(run_dir, tmp_path):
    rec = record.read_run(run_dir, "h")
    runs = os.path.dirname(run_dir)
    with open(os.path.join(run_dir, "stdout.log"), "ab") as f:
        f.write(b"local truth\n")
    record.materialize(rec.files, runs, rec.run_id)
    with open(os.path.join(run_dir, "stdout.log"), "rb") as f:
        assert f.read().endswith(b"local truth\n")
    evil = [*rec.files, record.RunFile("../escape", "other", record.GZIP, 1, rec.files[0].data)]
    with pytest.raises(ValueError, match="outside"):
        record.materialize(evil, str(tmp_path / "other"), rec.run_id)
    assert not os.path.exists(tmp_path / "other" / "escape")
    with pytest.raises(ValueError):
        record.materialize(rec.files, str(tmp_path), "../x")


def test_json_columns_hold_no_nan_and_times_are_bounded():
    rec = record.RunRecord(run_id="r", host="h", meta={"started_at": 1e99, "state": 3, "exit_code": 2**40},
                           summary={"tps": float("nan"), "stability": {"cv": float("inf")}})
    row = rec.row()
    assert row["started_at"] is None and row["state"] is None and row["exit_code"] is None
    assert json.loads(row["summary"]) == {"tps": None, "stability": {"cv": None}}
    assert json.loads(row["stability"]) == {"cv": None}


def test_a_large_file_is_listed_not_copied(run_dir, monkeypatch):
    monkeypatch.setattr(record, "MAX_FILE_BYTES", 100)
    rec = record.read_run(run_dir, "h")
    big = [f for f in rec.files if f.encoding == record.OMITTED]
    assert big and all(f.data == b"" and f.size > 100 and f.content() is None for f in big)


def test_pending_markers_count_attempts_and_drop_runs_that_are_gone(tmp_path):
    runs = tmp_path / "runs"
    (runs / "r1").mkdir(parents=True)
    (runs / "r2").mkdir()
    p = Pending(str(runs))
    p.mark("r1", now=100.0)
    p.mark("r2")
    p.mark("r1", "OperationalError: connection refused")
    m = p.get("r1")
    assert m is not None and m.since == 100.0 and m.attempts == 1 and "refused" in (m.error or "")
    assert p.run_ids() == ["r1", "r2"]
    shutil.rmtree(runs / "r2")
    assert p.run_ids() == ["r1"] and p.get("r2") is None
    p.clear("r1")
    assert p.run_ids() == []
    # not a run directory to any reader of runs
    assert rundir.list_runs(str(runs)) == []
    with pytest.raises(ValueError):
        p.mark("../x")


def test_a_dsn_with_a_password_is_refused_without_repeating_it():
    assert dsn.check("host=db port=5432 dbname=results user=bench") == "host=db port=5432 dbname=results user=bench"
    for given in ("host=db password=s3cret-pw user=bench", "postgresql://bench:s3cret-pw@db/results"):
        with pytest.raises(dsn.DsnError) as e:
            dsn.check(given)
        assert "s3cret-pw" not in str(e.value) and "pgpass" in str(e.value)
    with pytest.raises(dsn.DsnError) as e:
        dsn.check("host=db 'password=s3cret-pw")
    assert "s3cret-pw" not in str(e.value)
    assert "passfile=/etc/pgpass" in dsn.with_passfile("host=db", "/etc/pgpass")
    assert "other" in dsn.with_passfile("host=db passfile=/other", "/etc/pgpass")
    assert "127.0.0.1" in dsn.local(5999, "/s/pgpass") and "password" not in dsn.local(5999, "/s/pgpass")


def test_the_schema_ships_in_the_package_and_every_run_column_is_documented():
    sql = schema_sql()
    assert "CREATE TABLE IF NOT EXISTS runs" in sql and "benchwatch_schema" in sql
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "results.md"), encoding="utf-8").read()
    for column in ("run_id", "host", "started_at", "pooled_workload", "workload_key", "figures", "meta", "summary",
                   "settings", "stability", "profile", "written_at", "encoding", "kind", "data", "content"):
        assert f"`{column}`" in doc, column
    assert UPSERT_RUN.startswith("INSERT INTO runs")


def test_the_pooled_workload_is_the_same_on_every_host():
    a = {"tool": "pgbench", "script": "tpcb-like", "clients": "4", "engine": "postgresql", "host": "a"}
    b = dict(a, host="b")
    assert workload.workload_id(a) != workload.workload_id(b)
    assert workload.pooled_id(a) == workload.pooled_id(b) == workload.workload_id(workload.pooled_key(a))
    assert "host" not in workload.pooled_key(a)


def test_status_says_how_many_runs_wait_since_when_and_why_without_dropping_any(tmp_path):
    import io

    from benchwatch.commands.lifecycle import print_status

    runs = tmp_path / "runs"
    (runs / "r1").mkdir(parents=True)
    p = Pending(str(runs))
    assert p.summary() == {"pending_runs": 0, "pending_since": None, "last_error": None}
    p.mark("r1", now=1795870000.0)
    p.mark("r1", "OperationalError: connection refused")
    p.mark("gone", now=1795870100.0)  # its directory is gone: status reads, and drops nothing
    assert p.summary() == {"pending_runs": 2, "pending_since": 1795870000.0,
                           "last_error": "OperationalError: connection refused"}
    assert p.get("gone") is not None
    out = io.StringIO()
    print_status({"state_dir": str(tmp_path), "engine": "postgresql", "components": {}, "runs_dir": str(runs),
                  "postgres": {"dsn": "host=127.0.0.1", "embedded": False},
                  "host": "bench-1", "grafana": {"installed": True, "hint": None},
                  "results": {"dsn": "host=db dbname=results", "own": False, **p.summary(),
                              "long_term": {"write_url": "http://vm:8428/api/v1/write",
                                            "query_url": "http://vm:8428"}}}, out)
    text = out.getvalue()
    assert "results     host=db dbname=results  host bench-1" in text
    assert ("2 run(s) not yet in it, waiting since 2026-11-28 12:46:40Z; last error: OperationalError: connection "
            "refused") in text, text
    assert "long-term   writes to http://vm:8428/api/v1/write, queries http://vm:8428" in text
