"""benchwatch env's shell lines and how benchwatch psql splits its arguments from psql's."""

from __future__ import annotations

import os
import subprocess
import tempfile

from benchwatch.cli import _passthrough
from benchwatch.engines.postgresql.commands import shell_exports
from tests.helpers.throwaway import BENCHWATCH


def test_exports_survive_a_real_shell_unchanged():
    nasty = {"PGHOST": "127.0.0.1", "PGPORT": "15432", "PGUSER": "it's me",
             "PGDATABASE": """bench 'x" ; $(touch /tmp/bw-pwned) `id` --""", "PGPASSFILE": "/tmp/a dir/pgpass"}
    text = shell_exports(nasty)
    env = dict(os.environ, PGPASSWORD="stale", PGSERVICE="elsewhere", PGHOSTADDR="127.0.0.2")
    out = subprocess.run(["bash", "-c", 'eval "$1" && env -0', "bash", text], env=env, capture_output=True, check=True).stdout
    got = dict(item.split("=", 1) for item in out.decode().split("\0") if item.startswith("PG"))
    assert got == nasty  # every value as given, and the variables that would pick another server gone
    assert not os.path.exists("/tmp/bw-pwned")


def test_exports_name_no_password():
    text = shell_exports({"PGHOST": "h", "PGPASSFILE": "/s/pgpass"})
    assert "PGPASSWORD=" not in text and "unset PGHOSTADDR PGPORT PGUSER PGDATABASE PGPASSWORD PGSERVICE" in text


def test_psql_arguments_follow_benchwatchs_own():
    assert _passthrough(["psql", "-XAtc", "select 1"], "psql") == ["psql", "--", "-XAtc", "select 1"]
    assert _passthrough(["psql", "--state-dir", "/s", "--postgres-port=5", "-p", "6"], "psql") == \
        ["psql", "--state-dir", "/s", "--postgres-port=5", "--", "-p", "6"]
    assert _passthrough(["psql", "--", "--state-dir"], "psql") == ["psql", "--", "--state-dir"]
    assert _passthrough(["psql", "--help"], "psql") == ["psql", "--", "--help"]  # psql's help
    assert _passthrough(["run", "-c"], "psql") == ["run", "-c"]


def test_without_a_stack_both_say_so():
    state = tempfile.mkdtemp(prefix="benchwatch-nostack-")
    try:
        env = dict(os.environ, BENCHWATCH_STATE_DIR=state)
        for command in (["env"], ["psql", "-c", "select 1"]):
            r = subprocess.run([BENCHWATCH, *command], env=env, capture_output=True, timeout=60)
            assert r.returncode == 1 and r.stdout == b"" and b"benchwatch up" in r.stderr, (command, r)
    finally:
        os.rmdir(state)
