"""benchwatch psql and benchwatch env: the stack's server without digging in secrets/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest

from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.util import processes
from tests.helpers.prometheus import query
from tests.helpers.throwaway import BENCHWATCH, free_ports, make_state_dir

pytestmark = pytest.mark.integration

# A shell pointed elsewhere: each of these alone would take psql to the wrong server or login.
ELSEWHERE = {"PGHOST": "/nonexistent", "PGPORT": "1", "PGUSER": "nobody", "PGDATABASE": "nope",
             "PGPASSWORD": "wrong", "PGSERVICE": "nope", "PGHOSTADDR": "127.0.0.2"}


def hostile_env(live) -> dict[str, str]:
    return dict(live.env(), **ELSEWHERE)


def bw(env: dict[str, str], *args: str, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([BENCHWATCH, *args], env=env, input=input, capture_output=True, timeout=timeout)


def test_psql_reaches_the_stack_whatever_the_shell_says(live_stack):
    r = bw(hostile_env(live_stack), "psql", "-XAtc", "select current_database(), current_user")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout.decode().strip() == "bench|postgres"
    # Benchwatch's own options first, then psql's: the state dir by flag, not environment.
    env = {k: v for k, v in hostile_env(live_stack).items() if k != "BENCHWATCH_STATE_DIR"}
    r = bw(env, "psql", "--state-dir", live_stack.state_dir, "-XAt", "-d", "postgres", "-c", "select current_database()")
    assert (r.returncode, r.stdout.decode().strip()) == (0, "postgres"), r.stderr.decode(errors="replace")


def test_psql_passes_stdin_output_and_exit_code_through(live_stack):
    env = hostile_env(live_stack)
    r = bw(env, "psql", "-XAt", input=b"select 6 * 7;\n")
    assert (r.returncode, r.stdout) == (0, b"42\n"), r.stderr.decode(errors="replace")
    # psql's own exit codes: 3 for an error in a script under ON_ERROR_STOP, 1 for a failed -c.
    r = bw(env, "psql", "-X", "-v", "ON_ERROR_STOP=1", "-f", "-", input=b"select 1;\nselect 1/0;\nselect 2;\n")
    assert r.returncode == 3 and b"division by zero" in r.stderr, (r.returncode, r.stderr)
    r = bw(env, "psql", "-X", "-c", "select * from no_such_table")
    assert r.returncode == 1 and b"no_such_table" in r.stderr


def test_env_prints_exports_for_eval_without_the_password(live_stack):
    password = open(os.path.join(live_stack.state_dir, "secrets", "pg_password")).read().strip()
    r = bw(live_stack.env(), "env")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    out = r.stdout.decode()
    lines = out.splitlines()
    assert all(l.startswith(("export PG", "unset PG")) for l in lines), out
    exported = {l.split()[1].split("=", 1)[0] for l in lines if l.startswith("export ")}
    assert exported >= {"PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSFILE"} and "PGPASSWORD" not in exported
    assert password not in out
    # What a user does with it, in a shell that pointed elsewhere.
    psql = os.path.join(pg_bindir(), "psql")
    shell = subprocess.run(["bash", "-c", f'eval "$("{BENCHWATCH}" env)" && "{psql}" -XAtc "select current_database()"'],
                           env=hostile_env(live_stack), capture_output=True, timeout=60)
    assert (shell.returncode, shell.stdout.strip()) == (0, b"bench"), shell.stderr.decode(errors="replace")


def test_external_server_with_the_password_in_the_users_pgpass(live_stack):
    # The README's advice for --pg-dsn: no password in the DSN, keep it in ~/.pgpass.
    password = open(os.path.join(live_stack.state_dir, "secrets", "pg_password")).read().strip()
    pg_port = live_stack.stack.cfg.ports["postgres"]
    home = tempfile.mkdtemp(prefix="benchwatch-home-", dir="/tmp")
    fd = os.open(os.path.join(home, ".pgpass"), os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"127.0.0.1:{pg_port}:*:postgres:{password}\n")
    state = make_state_dir()
    ports = free_ports()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(HOME=home, BENCHWATCH_STATE_DIR=state,
               BENCHWATCH_PG_DSN=f"postgresql://postgres@127.0.0.1:{pg_port}/bench?sslmode=disable")
    for c, p in ports.items():
        env[f"BENCHWATCH_{c.upper()}_PORT"] = str(p)
    try:
        up = bw(env, "up", "--json", timeout=180)
        assert up.returncode == 0, up.stderr.decode(errors="replace")
        assert json.loads(up.stdout)["postgres"]["embedded"] is False
        prom = f"http://127.0.0.1:{ports['prometheus']}"
        # postgres_exporter logs in with the user's pgpass, not an empty password from ours.
        assert processes.wait_until(lambda: [r["value"][1] for r in query(prom, "pg_up")] == ["1"], 30, 0.2)
        r = bw(env, "psql", "-XAtc", "select current_database()")
        assert (r.returncode, r.stdout.strip()) == (0, b"bench"), r.stderr.decode(errors="replace")
        run = subprocess.run([BENCHWATCH, "run", "--", "pgbench", "-n", "-T", "1"], env=env, capture_output=True, timeout=120)
        assert run.returncode == 0, run.stderr.decode(errors="replace")
    finally:
        subprocess.run([BENCHWATCH, "down"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
