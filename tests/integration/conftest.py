"""A real native stack for the integration tests: one per test session, free ports, a temp state dir."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import pytest

from benchwatch import procs
from benchwatch.config import DEFAULT_PORTS, REPO_ROOT, load_config
from benchwatch.stack import Stack, pg_bindir

BENCHWATCH = os.path.join(REPO_ROOT, "benchwatch")


@dataclass
class LiveStack:
    stack: Stack
    state_dir: str

    @property
    def prometheus(self) -> str:
        return self.stack.cfg.url("prometheus")

    def env(self) -> dict[str, str]:
        env = dict(os.environ, BENCHWATCH_STATE_DIR=self.state_dir)
        for c, p in self.stack.cfg.ports.items():
            env[f"BENCHWATCH_{c.upper()}_PORT"] = str(p)
        return env

    def pg_env(self) -> dict[str, str]:
        return dict(os.environ, **self.stack.pg_env())

    def benchwatch(self, *args: str, stdin=None, timeout: float = 300, input: bytes | None = None) -> subprocess.CompletedProcess:
        """The real CLI, as a user runs it."""
        return subprocess.run([BENCHWATCH, *args], env=self.env(), stdin=stdin, input=input,
                              capture_output=True, timeout=timeout)

    def pgbench(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([os.path.join(pg_bindir(), "pgbench"), *args], env=self.pg_env(),
                              capture_output=True, **kw)

    def psql(self, sql: str) -> str:
        r = subprocess.run([os.path.join(pg_bindir(), "psql"), "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           env=self.pg_env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()


def make_state_dir() -> str:
    path = tempfile.mkdtemp(prefix="benchwatch-test-", dir="/tmp")
    os.chmod(path, 0o755)  # the embedded server runs as postgres when tests run as root
    return path


def free_ports() -> dict[str, int]:
    ports: dict[str, int] = {}
    while len(ports) < len(DEFAULT_PORTS):
        port = procs.free_port()
        if port not in ports.values():
            ports[list(DEFAULT_PORTS)[len(ports)]] = port
    return ports


@pytest.fixture(scope="session")
def live_stack():
    state_dir = make_state_dir()
    cfg = load_config(state_dir, free_ports())
    stack = Stack(cfg, out=lambda m: print(m, file=sys.stderr))
    try:
        stack.up()
        live = LiveStack(stack, state_dir)
        init = live.pgbench("-i", "-q", "-s", "2", timeout=120)
        assert init.returncode == 0, init.stderr
        yield live
    finally:
        stack.down()
        for c in stack.components():
            assert stack.pid(c) is None, f"{c} still running after down"
        shutil.rmtree(state_dir, ignore_errors=True)
