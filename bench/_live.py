"""Shared by the live benchmarks: a native stack of their own, and /proc CPU accounting.

The stack is the one ``./benchwatch up`` starts, in a temporary state dir on
free ports (never the defaults: the machine is shared). Everything started is
stopped by PID and the state dir removed, also on Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from benchwatch.util import (
    net,
    processes,
)
from tests.helpers import throwaway

BENCHWATCH = os.path.join(ROOT, "benchwatch")
CLK_TCK = os.sysconf("SC_CLK_TCK")
NPROC = os.cpu_count() or 1
# Everything but the system under test: PostgreSQL stays up for bare runs.
# The supervisor last: stop_watchers stops it first, or it would start the others again.
WATCHERS = ("prometheus", "alertmanager", "node_exporter", "postgres_exporter", "benchwatch_exporter", "supervisor")


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def loadavg() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


class BenchStack(throwaway.ThrowawayStack):
    """A native stack for one benchmark: ``with BenchStack(scale=2) as live: ...``.

    The clients (env, pg_env, pgbench, psql) come from tests.helpers.throwaway; this
    adds SIGTERM-safe cleanup and stopping/starting the watchers between rounds.
    """

    def __init__(self, scale: int | None = None, say=lambda m: print(m, file=sys.stderr), stack_cls=Stack):
        self.scale = scale
        self.say = say
        state_dir = throwaway.make_state_dir()
        super().__init__(stack_cls(load_config(state_dir, throwaway.free_ports()), out=say), state_dir)

    def __enter__(self) -> BenchStack:
        # SIGTERM ends the benchmark like Ctrl-C does: through the cleanup below.
        self._old_term = signal.signal(signal.SIGTERM, _terminate)
        t = time.monotonic()
        self.bring_up(self.scale)
        self.say(f"stack up in {time.monotonic() - t:.1f} s (state dir {self.state_dir})")
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> list[str]:
        try:
            left = super().close()
        finally:
            signal.signal(signal.SIGTERM, getattr(self, "_old_term", signal.SIG_DFL))
        if left:
            self.say(f"WARNING: still running after down: {left}")
        return left

    def pgbench_path(self) -> str:
        return os.path.join(pg_bindir(), "pgbench")

    # -- watchers -----------------------------------------------------------------

    def stop_watchers(self) -> None:
        for c in reversed(WATCHERS):
            if self.stack.pid(c) is not None:
                self.stack.stop(c)

    def start_watchers(self) -> None:
        self.wait_ports_free()
        self.stack.up()  # idempotent: starts only what is down, waits until healthy

    def wait_ports_free(self, timeout: float = 10.0) -> None:
        """Ports of stopped components can be held a moment longer (a free port from the
        ephemeral range may also be some client's local port for a while): wait, with a deadline."""
        from benchwatch.stack.config import LISTEN_HOST

        down = [c for c in self.stack.components() if self.stack.pid(c) is None]
        if processes.wait_until(lambda: all(net.port_free(LISTEN_HOST, self.stack.cfg.ports[c]) for c in down),
                            timeout, 0.1):
            return
        # Still taken (e.g. the local end of another program's keep-alive connection): move the
        # component to a new free port and tell Prometheus (file_sd picks the new target up).
        for c in down:
            if not net.port_free(LISTEN_HOST, self.stack.cfg.ports[c]):
                new = net.free_port()
                self.say(f"port {self.stack.cfg.ports[c]} of {c} is still taken: moving it to {new}")
                self.stack.cfg.ports[c] = new
        self.stack.cfg.save()
        if self.stack.pid("prometheus") is not None:
            self.stack._write_prometheus_config()

    def set_exporter_poll(self, poll_s: float) -> None:
        """Restart the stack's benchwatch exporter, same port and flags, with another
        POLL_INTERVAL_S (a measurement of that option; the code default is untouched)."""
        pid = self.stack.pid("benchwatch_exporter")
        argv = processes.process_cmdline(pid)
        args = argv[argv.index("exporter"):]  # [python, -m, benchwatch, exporter, --flags...]
        self.stack.stop("supervisor")  # it would start the stopped exporter again; up restarts it
        self.stack.stop("benchwatch_exporter")
        self.wait_ports_free()
        code = ("import sys; import benchwatch.exporter.server as s; s.POLL_INTERVAL_S = float(sys.argv[1]); "
                "from benchwatch.cli import main; sys.exit(main(sys.argv[2:]))")
        env = self.stack.base_env()
        self.stack.spawn("benchwatch_exporter", [sys.executable, "-c", code, str(poll_s), *args], env=env)
        if not self.stack.wait_healthy("benchwatch_exporter", 30.0):
            raise RuntimeError("the benchwatch exporter did not come back")

    def pids(self) -> dict[str, int]:
        return {c: self.stack.pid(c) for c in WATCHERS if self.stack.pid(c) is not None}


# -- CPU accounting -----------------------------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all its threads), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # fields[0] is field 3 (state): utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_cpu_seconds(pid: int) -> float | None:
    """cutime + cstime: CPU of the children this process has waited for."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[13]) + int(fields[14])) / CLK_TCK


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (from /proc/stat), for context."""
    with open("/proc/stat", encoding="ascii") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return (sum(parts[:8]) - idle) / CLK_TCK


def socket_local_ports(pid: int, remote_port: int) -> set[int]:
    """Local TCP ports of ``pid``'s sockets connected to 127.0.0.1:remote_port."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except FileNotFoundError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                next(f)
                for line in f:
                    cols = line.split()
                    local, remote, inode = cols[1], cols[2], cols[9]
                    if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == remote_port:
                        ports.add(int(local.rsplit(":", 1)[1], 16))
        except FileNotFoundError:
            continue
    return ports


def hostname() -> str:
    return socket.gethostname()


def run_main(main) -> None:
    """A benchmark's entry point: its exit code, and a clean word on Ctrl-C (cleanup ran already)."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted: everything the benchmark started has been stopped", file=sys.stderr)
        sys.exit(130)
