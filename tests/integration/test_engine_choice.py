"""Issue 19's sticky engine, on real components: after up --engine mariadb and down, a plain up starts
PostgreSQL, as the README says; while a MariaDB stack runs, up leaves it so and says which engine it
runs, and pgbench is told it cannot drive it instead of failing on a socket."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from tests.helpers import throwaway
from tests.helpers.throwaway import BENCHWATCH
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration


def test_up_without_engine_starts_postgresql_after_a_mariadb_stack():
    for tool in ("mariadbd", "prometheus-mysqld-exporter"):
        require_tool(tool)
    state_dir = throwaway.make_state_dir()
    ports = throwaway.free_ports()
    env = {k: v for k, v in os.environ.items() if k != "BENCHWATCH_ENGINE"}
    env.update(BENCHWATCH_STATE_DIR=state_dir, **{f"BENCHWATCH_{c.upper()}_PORT": str(p) for c, p in ports.items()})

    def benchwatch(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([BENCHWATCH, *args], env=env, capture_output=True, text=True, timeout=600)

    def status() -> dict:
        return json.loads(benchwatch("status", "--json").stdout)

    try:
        r = benchwatch("up", "--engine", "mariadb")
        assert r.returncode == 0, r.stderr
        assert status()["mysql"]["healthy"] and status()["engine"] == "mysql"

        # A tool that cannot drive the stack's engine: told so, nothing run.
        r = benchwatch("run", "--", "pgbench", "-i")
        assert r.returncode == 2, r.stderr
        assert "benchwatch: " in r.stderr and "MySQL/MariaDB" in r.stderr and "connection to server" not in r.stderr

        # Still running: up without --engine leaves it so and says which engine it runs; another is refused.
        r = benchwatch("up")
        assert r.returncode == 0, r.stderr
        assert "benchwatch: the stack in" in r.stderr and "already running MySQL/MariaDB" in r.stderr
        assert "mysql" in status()
        r = benchwatch("up", "--engine", "postgres")
        assert r.returncode == 1 and "benchwatch down" in r.stderr, r.stderr

        r = benchwatch("down")
        assert r.returncode == 0 and "mariadb" in r.stderr, r.stderr

        # The README's plain up: PostgreSQL, whatever ran before.
        r = benchwatch("up")
        assert r.returncode == 0, r.stderr
        s = status()  # and the other commands find what up started
        assert s["engine"] == "postgresql" and "mysql" not in s
        assert s["postgres"]["embedded"] and s["postgres"]["healthy"], s
        assert "mysqld_exporter" not in s["components"] and s["components"]["postgres_exporter"]["healthy"]
        r = benchwatch("psql", "-XAtc", "SELECT 1")
        assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr
    finally:
        stopped = Stack(load_config(state_dir)).down()
        left = Stack(load_config(state_dir))
        assert not [c for c in left._all_components() if left.pid(c) is not None], stopped
        subprocess.run(["rm", "-rf", state_dir])
