from __future__ import annotations

import os
import subprocess

import pytest

from benchwatch.engines.postgresql import dsn
from benchwatch.loadgens.pgbench.args import ensure_progress, parse_pgbench_args


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


def test_progress_abbreviated_is_not_overridden():
    # pgbench 15 finds "--prog" ambiguous (--progress, --progress-timestamp) and refuses to
    # run; benchwatch must not append -P 1 over what the user meant as an interval.
    assert ensure_progress(["--prog=5", "bench"]) == (["--prog=5", "bench"], False)
    assert parse_pgbench_args(["--prog=5"]).error
    for argv in (["--progress", "3", "--progress-t"], ["bench", "--progress=3"]):  # GNU order
        assert parse_pgbench_args(argv).progress_interval == 3.0
        assert ensure_progress(argv) == (argv, False)


def test_abbreviated_long_options_are_read_as_pgbench_reads_them():
    p = parse_pgbench_args(["--cl", "4", "--jo=2", "--tim", "30", "--proto=prepared", "--sel", "bench"])
    assert p.info_labels() == {"script": "select-only", "clients": "4", "threads": "2", "protocol": "prepared",
                               "duration_seconds": "30"}
    assert p.positional == ["bench"] and p.error is None
    assert "report-per-command" in parse_pgbench_args(["--report"]).flags
    assert parse_pgbench_args(["--log-p=/x/tx"]).last("log-prefix") == "/x/tx"
    # -P 1 goes before the database name, not between an abbreviated option and its value.
    assert ensure_progress(["--cl", "4", "bench"]) == (["--cl", "4", "-P", "1", "bench"], True)
    assert ensure_progress(["-n", "--", "bench"]) == (["-n", "-P", "1", "--", "bench"], True)
    assert ensure_progress(["--file", "--", "bench"]) == (["--file", "--", "-P", "1", "bench"], True)


_REJECTED = [["--pro=5"], ["--prog", "5"], ["--p", "5"], ["--in", "x"], ["--no-such-option"], ["-c"],
             ["--client"], ["--log=x"], ["-Z"], ["--report-latencies"]]
_ACCEPTED = [["--cl", "4"], ["--cl=4", "--jo", "2"], ["--tim", "1"], ["--progress=1", "--progress-t"],
             ["--proto=simple"], ["--report"], ["--log", "--log-p=x"], ["-nrP", "1"], ["--sel", "-N"],
             ["-c1", "--lat", "5"], ["--connect", "--debug", "--ma", "1"]]


@pytest.mark.parametrize("argv", _REJECTED)
def test_argv_pgbench_rejects_is_passed_through_unlearnt(argv):
    p = parse_pgbench_args(argv)
    assert p.error and p.progress_interval is None and p.info_labels() == {}
    assert ensure_progress(argv) == (argv, False)


@pytest.mark.parametrize("argv", _REJECTED + _ACCEPTED)
def test_option_table_agrees_with_the_installed_pgbench(argv):
    # The real pgbench 15 parses argv, then fails to connect to a socket directory that does
    # not exist; a getopt refusal ends with the --help hint before any connection attempt.
    env = {**os.environ, "PGHOST": "/nonexistent-benchwatch", "PGDATABASE": "bench", "LC_ALL": "C"}
    proc = subprocess.run(["pgbench", *argv], capture_output=True, text=True, timeout=30, env=env)
    refused = "for more information" in proc.stderr
    assert proc.returncode != 0 and (refused or "connection to server" in proc.stderr), proc.stderr
    assert bool(parse_pgbench_args(argv).error) == refused, proc.stderr


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
    from benchwatch.util.secrets import redact_argv

    argv = ["pgbench", "postgresql://u:hunter2@h/db", "host=h password=hunter2 dbname=x", "mysql://root:hunter2@h/db"]
    assert "hunter2" not in " ".join(redact_argv(argv))
    assert redact_argv(["-c", "8", "postgresql://u@h/db"]) == ["-c", "8", "postgresql://u@h/db"]


def test_sql_statements_per_transaction():
    from benchwatch.loadgens.pgbench.args import count_sql_statements, sql_statements_per_transaction
    assert sql_statements_per_transaction(parse_pgbench_args(["-c", "4"])) == 7
    assert sql_statements_per_transaction(parse_pgbench_args(["-S"])) == 1
    assert sql_statements_per_transaction(parse_pgbench_args(["-b", "tpcb@2", "-b", "select-only@1"])) == 5
    script = "\\set aid random(1, 10)\nBEGIN;\nSELECT *\n  FROM t\n WHERE a = :aid;\nSELECT 1 \\gset\nEND;\n"
    assert count_sql_statements(script) == 4
    files = {"a.sql": script}
    assert sql_statements_per_transaction(parse_pgbench_args(["-f", "a.sql"]), read_file=files.__getitem__) == 4
