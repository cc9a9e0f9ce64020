"""Extra PostgreSQL instances on loopback: several "database hosts" on one machine.

For the multi-target tests and the sharded demo: each instance has its own data
directory, port and server log (log_checkpoints on, as the embedded server), a
random password in a 0600 file, and listens on 127.0.0.1 only. Stopped by the
PID in postmaster.pid.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchwatch.engines.postgresql import dsn
from benchwatch.util import processes
from benchwatch.util.private import write_private

_BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
# As the stack's embedded server (stack/native.py PG_SETTINGS), smaller: several share a machine.
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "log_checkpoints": "on",
    "log_line_prefix": "'%m [%p] '",
    "logging_collector": "off",
    "checkpoint_timeout": "'30s'",
    "max_wal_size": "'64MB'",
    "min_wal_size": "'32MB'",
    "shared_buffers": "'32MB'",
    "track_io_timing": "on",
    "track_wal_io_timing": "on",
    "password_encryption": "'scram-sha-256'",
    "shared_preload_libraries": "'pg_stat_statements'",  # time per call for the agents' statements collector
}


@dataclass
class LocalInstance:
    """One PostgreSQL cluster under ``directory`` listening on 127.0.0.1:``port``."""

    directory: str
    port: int
    name: str
    bindir: str
    settings: dict[str, str] | None = None  # extra postgresql.conf settings (values quoted as in the file)

    @property
    def data(self) -> str:
        return os.path.join(self.directory, "data")

    @property
    def server_log(self) -> str:
        return os.path.join(self.directory, "server.log")

    @property
    def password_file(self) -> str:
        return os.path.join(self.directory, "password")

    def params(self, dbname: str = "postgres") -> dict[str, str]:
        """Connection parameters, password included: keep them out of argv."""
        with open(self.password_file, encoding="utf-8") as f:
            password = f.read().strip()
        return {"host": "127.0.0.1", "port": str(self.port), "user": "postgres", "dbname": dbname,
                "password": password, "sslmode": "disable"}

    def dsn(self, dbname: str = "postgres") -> str:
        return dsn.format_dsn(self.params(dbname))

    def pid(self) -> int | None:
        pid = processes.read_pid(os.path.join(self.data, "postmaster.pid"))
        return pid if processes.process_alive(pid) else None

    def _user(self) -> str | None:
        return "postgres" if os.geteuid() == 0 else None  # initdb and postgres refuse to run as root

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess:
        user = self._user()
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, user=user, group=user,
                              extra_groups=[] if user else None, cwd=self.directory,
                              env={k: v for k, v in os.environ.items() if k in _BASE_ENV})

    def init(self) -> None:
        user = self._user()
        os.makedirs(self.directory, exist_ok=True)
        if user:
            shutil.chown(self.directory, user, user)
        os.chmod(self.directory, 0o700)
        password = secrets.token_urlsafe(18)
        write_private(self.password_file, password + "\n", owner=user)
        r = self._run([os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", "postgres", "--auth=scram-sha-256",
                       f"--pwfile={self.password_file}", "--encoding=UTF8", "--locale=C", "--no-sync"])
        if r.returncode != 0:
            raise RuntimeError(f"initdb of {self.name} failed: {r.stderr.strip()}")
        settings = dict(SETTINGS, port=str(self.port), unix_socket_directories=f"'{self.directory}'",
                        **(self.settings or {}))
        with open(os.path.join(self.data, "postgresql.conf"), "a", encoding="utf-8") as f:
            f.write("\n# benchwatch local instance\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))

    def start(self, timeout: float = 60.0) -> None:
        if self.pid() is not None:
            return
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            self.init()
        r = self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-l", self.server_log, "-w",
                       "-t", str(int(timeout)), "start"])
        if r.returncode != 0:
            raise RuntimeError(f"{self.name} did not start: {r.stderr.strip() or r.stdout.strip()}")

    def stop(self) -> None:
        processes.stop_pid(self.pid(), signal.SIGINT, timeout=60.0)  # fast shutdown


def start_instances(base_dir: str, ports: list[int], names: list[str], bindir: str,
                    settings: dict[str, str] | None = None) -> list[LocalInstance]:
    """Start one instance per (port, name) under ``base_dir``/<name>; on failure the started ones are stopped."""
    started: list[LocalInstance] = []
    try:
        for port, name in zip(ports, names, strict=True):
            inst = LocalInstance(os.path.join(base_dir, name), port, name, bindir, settings)
            inst.start()
            started.append(inst)
    except BaseException:
        for inst in started:
            inst.stop()
        raise
    return started


def stop_recorded(layout: Mapping[str, Any], engine: str) -> list[str]:
    """Stop the instances a demo recorded in ``layout`` (the sharded demo's shards.json: instances with name,
    port, directory; the bindir), for benchwatch down; data is kept. A layout of another engine's demo is left
    alone; one without "engine" was written before layouts said, by the only demo that had any: this one."""
    if layout.get("engine", engine) != engine:
        return []
    stopped = []
    for item in layout.get("instances", []):
        inst = LocalInstance(item["directory"], item["port"], item["name"], layout["bindir"])
        if inst.pid() is not None:
            inst.stop()
            stopped.append(item["name"])
    return stopped
