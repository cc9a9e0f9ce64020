from __future__ import annotations

import pytest

from benchwatch.engines.postgres import dsn
from benchwatch.parse.pgbench_args import ensure_progress, parse_pgbench_args


@pytest.mark.parametrize("argv, interval", [
    (["-P", "5"], 5.0), (["-P5"], 5.0), (["--progress=2"], 2.0), (["--progress", "3"], 3.0),
    (["-nrP", "1"], 1.0), (["-c", "4", "-T", "60"], None),
])
def test_progress_interval(argv, interval):
    assert parse_pgbench_args(argv).progress_interval == interval


def test_ensure_progress_adds_only_when_missing_and_before_the_database():
    assert ensure_progress(["-P", "2", "db"]) == (["-P", "2", "db"], False)
    assert ensure_progress(["-c", "4", "-T", "60", "bench"]) == (["-c", "4", "-T", "60", "-P", "1", "bench"], True)
    assert ensure_progress(["-M", "prepared", "-n"]) == (["-M", "prepared", "-n", "-P", "1"], True)
    assert ensure_progress(["-i", "-s", "10"]) == (["-i", "-s", "10"], False)


def test_info_labels():
    p = parse_pgbench_args(["-M", "prepared", "-n", "-r", "-c", "16", "-j", "4", "-T", "3600", "-f", "/x/a.sql@3", "-b", "select-only", "db"])
    labels = p.info_labels()
    assert labels == {"script": "select-only+a.sql@3", "clients": "16", "threads": "4", "protocol": "prepared",
                      "duration_seconds": "3600"}
    assert p.positional == ["db"]
    assert parse_pgbench_args(["-S"]).script == "select-only"
    assert parse_pgbench_args([]).script == "tpcb-like"


@pytest.mark.parametrize("text", [
    "postgresql://bob:s3cr%40t@db.example:5433/bench?sslmode=require",
    "host=db.example port=5433 user=bob password='s3cr@t' dbname=bench sslmode=require",
])
def test_dsn_parsing_and_redaction(text):
    params = dsn.parse_dsn(text)
    assert params == {"host": "db.example", "port": "5433", "user": "bob", "password": "s3cr@t",
                      "dbname": "bench", "sslmode": "require"}
    assert "s3cr" not in dsn.redact(text)
    env = dsn.libpq_env(params, "/tmp/pgpass")
    assert "s3cr@t" not in env.values() and env["PGHOST"] == "db.example" and env["PGPASSFILE"] == "/tmp/pgpass"
    uri = dsn.to_uri({k: v for k, v in params.items() if k != "password"})
    assert uri == "postgresql://bob@db.example:5433/bench?sslmode=require"


def test_redact_argv():
    argv = ["pgbench", "postgresql://u:hunter2@h/db", "host=h password=hunter2 dbname=x"]
    assert "hunter2" not in " ".join(dsn.redact_argv(argv))


def test_sql_statements_per_transaction():
    from benchwatch.parse.pgbench_args import count_sql_statements, sql_statements_per_transaction
    assert sql_statements_per_transaction(parse_pgbench_args(["-c", "4"])) == 7
    assert sql_statements_per_transaction(parse_pgbench_args(["-S"])) == 1
    assert sql_statements_per_transaction(parse_pgbench_args(["-b", "tpcb@2", "-b", "select-only@1"])) == 5
    script = "\\set aid random(1, 10)\nBEGIN;\nSELECT *\n  FROM t\n WHERE a = :aid;\nSELECT 1 \\gset\nEND;\n"
    assert count_sql_statements(script) == 4
    files = {"a.sql": script}
    assert sql_statements_per_transaction(parse_pgbench_args(["-f", "a.sql"]), read_file=files.__getitem__) == 4
