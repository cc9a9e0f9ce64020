"""A throwaway native stack: free ports, a temp state dir, everything stopped and removed after.

For the integration tests, the benchmarks and the documentation pictures, which
all need a real stack that cannot collide with the user's own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.stack.config import DEFAULT_PORTS, load_config
from benchwatch.stack.native import Stack
from benchwatch.util import net

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHWATCH = os.path.join(REPO_ROOT, "benchwatch")


def make_state_dir() -> str:
    path = tempfile.mkdtemp(prefix="benchwatch-test-", dir="/tmp")
    os.chmod(path, 0o755)  # the embedded server runs as postgres when we are root
    return path


def free_ports() -> dict[str, int]:
    ports: dict[str, int] = {}
    while len(ports) < len(DEFAULT_PORTS):
        port = net.free_port()
        if port not in ports.values():
            ports[list(DEFAULT_PORTS)[len(ports)]] = port
    return ports


@dataclass
class ThrowawayStack:
    stack: Stack
    state_dir: str

    @property
    def prometheus(self) -> str:
        return self.stack.cfg.url("prometheus")

    def env(self) -> dict[str, str]:
        """Environment for the real CLI, pointed at this stack."""
        env = dict(os.environ, BENCHWATCH_STATE_DIR=self.state_dir)
        for c, p in self.stack.cfg.ports.items():
            env[f"BENCHWATCH_{c.upper()}_PORT"] = str(p)
        return env

    def pg_env(self) -> dict[str, str]:
        return dict(os.environ, **self.stack.client_env())

    def benchwatch(self, *args: str, stdin=None, timeout: float = 300, input: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([BENCHWATCH, *args], env=self.env(), stdin=stdin, input=input,
                              capture_output=True, timeout=timeout)

    def pgbench(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([os.path.join(pg_bindir(), "pgbench"), *args], env=self.pg_env(),
                              capture_output=True, **kw)

    def psql(self, sql: str, timeout: float = 60) -> str:
        r = subprocess.run([os.path.join(pg_bindir(), "psql"), "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           env=self.pg_env(), capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"psql failed: {r.stderr.strip()}")
        return r.stdout.strip()

    def sysbench(self, *args: str, **kw) -> subprocess.CompletedProcess:
        """sysbench on the stack's MariaDB, connected through its 0600 config file."""
        return subprocess.run(["sysbench", f"--config-file={self.stack.server.targets()[0].sysbench_file}", *args],
                              capture_output=True, **kw)

    def mariadb(self, sql: str, timeout: float = 60) -> str:
        r = subprocess.run(["mariadb", f"--defaults-file={self.stack.server.targets()[0].client_file}", "-N", "-B"],
                           input=sql, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"mariadb failed: {r.stderr.strip()}")
        return r.stdout.strip()

    def bring_up(self, scale: int | None) -> None:
        """Start the stack and initialise pgbench tables at ``scale``; on any failure nothing is left running."""
        try:
            self.stack.up()
            if scale and self.stack.engine.default:
                init = self.pgbench("-i", "-q", "-s", str(scale), timeout=600)
                if init.returncode != 0:
                    raise RuntimeError(f"pgbench -i failed: {init.stderr.decode(errors='replace').strip()}")
        except BaseException:
            self.close()
            raise

    def close(self) -> list[str]:
        """Stop every component by PID and remove the state dir; returns components still running (none)."""
        try:
            self.stack.down()
            return [c for c in self.stack.components() if self.stack.pid(c) is not None]
        finally:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def start(scale: int = 2, engine: str = "postgres", results_dsn: str | None = "off",
          host: str | None = None, long_term: dict[str, str | None] | None = None,
          host_reader: str | None = None) -> ThrowawayStack:
    """Up, with pgbench tables at ``scale`` (PostgreSQL); on any failure nothing is left running.

    ``results_dsn``: the results database's DSN; None: the stack's own; "off" (the default here): none, since its
    initdb and start cost every test stack about ~3 s (docs/results.md) and only the tests of the results database
    look at it. ``host``: up --host. ``long_term``: up's --long-term-* flags (load_config's LONG_TERM_KEYS).
    ``host_reader``: BENCHWATCH_HOST_READER's value."""
    state_dir = make_state_dir()
    cfg = load_config(state_dir, free_ports(), engine=engine, results_dsn=results_dsn, host=host, long_term=long_term)
    if host_reader is not None:
        cfg.host_reader = host_reader  # as BENCHWATCH_HOST_READER would; up keeps it in stack.json
    stack = Stack(cfg, out=lambda m: print(m, file=sys.stderr))
    live = ThrowawayStack(stack, state_dir)
    live.bring_up(scale)
    return live


class BackgroundRun:
    """``benchwatch run -- ARGS`` on a throwaway stack, in the background, its output read as it comes
    (``session``: in a process group of its own, for a Ctrl-C sent to the whole group; ``options``: run's own,
    before the ``--``; ``env``: variables over the stack's). Its run id is read
    from its own "benchwatch: run ID:" line, so a test looks at this run's directory, never at whichever
    directory is newest."""

    RUN_LINE = re.compile(rb"^benchwatch: run (\S+): output saved in ")

    def __init__(self, live: ThrowawayStack, *args: str, session: bool = False, options: tuple[str, ...] = (),
                 env: dict[str, str] | None = None):
        self.live = live
        self.proc = subprocess.Popen([BENCHWATCH, "run", *options, "--", *args], env={**live.env(), **(env or {})},
                                     start_new_session=session,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out: dict[str, bytes] = {}
        self.lines: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.run_id: str | None = None
        self._started = threading.Event()
        self.threads = [threading.Thread(target=self._read, args=(n,), daemon=True) for n in ("stdout", "stderr")]
        for t in self.threads:
            t.start()

    def _read(self, name: str) -> None:
        for line in getattr(self.proc, name):
            self.lines[name].append(line)
            m = self.RUN_LINE.match(line) if name == "stderr" and self.run_id is None else None
            if m:
                self.run_id = m.group(1).decode()
                self._started.set()
        self.out[name] = b"".join(self.lines[name])
        if name == "stderr":
            self._started.set()  # the run ended before saying its id: run_dir() fails with its output

    def run_dir(self, timeout: float = 30) -> str:
        """This run's directory, once benchwatch has said where it saves the output."""
        assert self._started.wait(timeout) and self.run_id, b"".join(self.lines["stderr"]).decode(errors="replace")
        return os.path.join(self.live.state_dir, "runs", self.run_id)

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        for t in self.threads:
            t.join(10)
        return code
