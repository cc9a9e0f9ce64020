"""The stack's database name is data, not SQL: any name PostgreSQL accepts works end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from psycopg import sql

from benchwatch.engines.postgresql import connect, dsn
from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from benchwatch.util import processes
from tests.helpers.prometheus import query
from tests.helpers.throwaway import BENCHWATCH, ThrowawayStack, free_ports, make_state_dir

pytestmark = pytest.mark.integration

# A single quote ends a string literal, a double quote an identifier, and the
# rest would run as a second statement if either were pasted into SQL.
NAME = """bench 'x" ; drop database postgres; --"""


def test_up_and_run_with_a_database_name_that_needs_quoting():
    state = make_state_dir()
    cfg = load_config(state, free_ports())
    cfg.pg_database = NAME
    cfg.save()  # as a user would edit stack.json
    live = ThrowawayStack(Stack(load_config(state)), state)
    try:
        up = live.benchwatch("up", "--json", timeout=180)
        assert up.returncode == 0, up.stderr.decode(errors="replace")
        assert json.loads(up.stdout)["postgres"]["embedded"] is True
        # The database exists under exactly that name, and the maintenance database is still there.
        names = live.psql("SELECT datname FROM pg_database ORDER BY datname").splitlines()
        assert NAME in names and "postgres" in names
        assert live.psql("SELECT current_database()") == NAME
        init = live.pgbench("-i", "-q", "-s", "1", timeout=300)
        assert init.returncode == 0, init.stderr.decode(errors="replace")
        run = live.benchwatch("run", "--", "pgbench", "-n", "-T", "2", timeout=120)
        assert run.returncode == 0, run.stderr.decode(errors="replace")
        run_id = [l.split()[2].rstrip(":") for l in run.stderr.decode().splitlines() if l.startswith("benchwatch: run ")][0]
        with open(os.path.join(state, "runs", run_id, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        # The run's description came from that database: its pgbench tables at scale 1.
        assert meta["server_version"].split(".")[0].isdigit() and meta["scale"] == "1"
        assert meta["settings"]["max_wal_size"] == "64 MB"
        # postgres_exporter reaches it too (the name percent-encoded in its DSN).
        assert processes.wait_until(lambda: [r["value"][1] for r in query(live.prometheus, "pg_up")] == ["1"], 30, 0.2)
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"


def test_up_and_run_against_an_existing_server_with_such_a_database(live_stack):
    # The session stack's server plays the user's own; the database is given in the DSN, percent-encoded.
    params = live_stack.stack.server.pg_params()
    with connect.connect(params, dbname="postgres") as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(NAME)))
    assert connect.ensure_database(params, NAME) is True
    assert connect.ensure_database(params, NAME) is False  # already there: left alone
    state = make_state_dir()
    ports = free_ports()
    env = dict(os.environ, BENCHWATCH_STATE_DIR=state, BENCHWATCH_PG_DSN=dsn.to_uri(dict(params, dbname=NAME)))
    for c, p in ports.items():
        env[f"BENCHWATCH_{c.upper()}_PORT"] = str(p)
    for k in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSFILE", "PGPASSWORD"):
        env.pop(k, None)
    try:
        # Scale 1 here, scale 2 in the session's own database: the run's metadata tells which it described.
        init = subprocess.run([os.path.join(pg_bindir(), "pgbench"), "-i", "-q", "-s", "1"],
                              env=dict(live_stack.pg_env(), PGDATABASE=NAME), capture_output=True, timeout=300)
        assert init.returncode == 0, init.stderr.decode(errors="replace")
        up = subprocess.run([BENCHWATCH, "up", "--json"], env=env, capture_output=True, timeout=180)
        assert up.returncode == 0, up.stderr.decode(errors="replace")
        prom = f"http://127.0.0.1:{ports['prometheus']}"
        assert processes.wait_until(lambda: [r["value"][1] for r in query(prom, "pg_up")] == ["1"], 30, 0.2)
        run = subprocess.run([BENCHWATCH, "run", "--", "pgbench", "-n", "-T", "2"],
                             env={k: v for k, v in env.items() if k != "BENCHWATCH_PG_DSN"}, capture_output=True, timeout=120)
        assert run.returncode == 0, run.stderr.decode(errors="replace")
        run_id = [l.split()[2].rstrip(":") for l in run.stderr.decode().splitlines() if l.startswith("benchwatch: run ")][0]
        with open(os.path.join(state, "runs", run_id, "meta.json"), encoding="utf-8") as f:
            assert json.load(f)["scale"] == "1"
    finally:
        subprocess.run([BENCHWATCH, "down"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(state, ignore_errors=True)
        with connect.connect(params, dbname="postgres") as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(NAME)))
