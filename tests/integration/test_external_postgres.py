"""A stack watching a PostgreSQL the user already has (--pg-dsn), not an embedded one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from benchwatch.util import processes
from tests.helpers.prometheus import query
from tests.helpers.throwaway import BENCHWATCH, free_ports, make_state_dir

pytestmark = pytest.mark.integration


def test_up_and_run_against_an_existing_server(live_stack):
    # The session stack's server plays the user's own server; its password goes in the DSN.
    password = open(os.path.join(live_stack.state_dir, "secrets", "pg_password")).read().strip()
    dsn = f"postgresql://postgres:{password}@127.0.0.1:{live_stack.stack.cfg.ports['postgres']}/bench?sslmode=disable"
    state = make_state_dir()
    ports = free_ports()
    env = dict(os.environ, BENCHWATCH_STATE_DIR=state, BENCHWATCH_PG_DSN=dsn)
    for c, p in ports.items():
        env[f"BENCHWATCH_{c.upper()}_PORT"] = str(p)
    for k in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSFILE", "PGPASSWORD"):
        env.pop(k, None)
    try:
        up = subprocess.run([BENCHWATCH, "up", "--json"], env=env, capture_output=True, timeout=180)
        assert up.returncode == 0, up.stderr
        status = json.loads(up.stdout)
        assert status["postgres"]["embedded"] is False and "pid" not in status["postgres"]
        assert password not in up.stdout.decode() and password not in status["postgres"]["dsn"]
        assert not os.path.exists(os.path.join(state, "pg", "data"))  # no embedded server
        prom = f"http://127.0.0.1:{ports['prometheus']}"
        assert processes.wait_until(lambda: [r["value"][1] for r in query(prom, "pg_up")] == ["1"], 30, 0.2)
        # pgbench reaches the server with no connection options: PG* and a pgpass file from the DSN.
        run = subprocess.run([BENCHWATCH, "run", "--", "pgbench", "-n", "-T", "3"], env={k: v for k, v in env.items() if k != "BENCHWATCH_PG_DSN"},
                             capture_output=True, timeout=120)
        assert run.returncode == 0, run.stderr
        run_id = [l.split()[2].rstrip(":") for l in run.stderr.decode().splitlines() if l.startswith("benchwatch: run ")][0]
        assert processes.wait_until(lambda: bool(query(prom, f'benchmark_running{{run_id="{run_id}"}} == 0')), 30, 0.2)
        # The password is in the 0600 secrets only: not in argv, logs, stack.json or run metadata.
        stack = Stack(load_config(state, ports))
        for c in stack.components():
            assert password not in " ".join(processes.process_cmdline(stack.pid(c))), c
        for root, _dirs, files in os.walk(state):
            if root.startswith(os.path.join(state, "secrets")) or "/prometheus/data" in root:
                continue
            for name in files:
                if not os.path.isfile(os.path.join(root, name)):
                    continue  # a server's Unix socket (the stack's results database) has nothing to read
                with open(os.path.join(root, name), "rb") as f:
                    assert password.encode() not in f.read(), os.path.join(root, name)
        assert oct(os.stat(os.path.join(state, "secrets", "pg_dsn")).st_mode & 0o777) == "0o600"
    finally:
        subprocess.run([BENCHWATCH, "down"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(state, ignore_errors=True)
