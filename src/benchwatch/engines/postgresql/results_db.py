"""The stack's own results database (benchwatch.results), a PostgreSQL apart from the server under test: its own
data directory, port and password, on a PostgreSQL stack and a MariaDB stack alike (the stack reaches it
through Engine.results_server, never by importing this folder).

Small on purpose: it keeps a few rows per run, and a benchmark must not share a host's memory with a
database tuned for load. The settings go on the command line, so no configuration file is kept."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from benchwatch.engines import ResultsServer
from benchwatch.engines.postgresql.server import SERVER, binary, init_data_dir, os_user
from benchwatch.util.net import LISTEN_HOST

# Enough for the exporter's writer and a few readers; 16 MB of shared buffers is PostgreSQL's floor of sense.
SETTINGS = {"max_connections": "20", "shared_buffers": "16MB", "max_wal_size": "256MB", "log_min_messages": "warning",
            "logging_collector": "off", "log_destination": "stderr", "autovacuum": "on"}


class PostgreSQLResults(ResultsServer):
    package = "postgresql"

    def program(self) -> str | None:
        return binary(SERVER)

    def user(self) -> str | None:
        return os_user()

    def init(self, data: str, password: str, home: str, env: Mapping[str, str]) -> None:
        program = self.program()
        if program is None:
            from benchwatch.util.errors import StackError

            raise StackError(f"the results database needs PostgreSQL: apt-get install {self.package}")
        user = self.user()
        os.makedirs(home, exist_ok=True)
        if user:
            shutil.chown(home, user, user)
            os.chmod(home, 0o700)
        init_data_dir(os.path.dirname(program), data, password, home, user, env)

    def argv(self, data: str, port: int, socket_dir: str) -> list[str]:
        program = self.program() or "postgres"
        os.makedirs(socket_dir, exist_ok=True)
        user = self.user()
        if user:
            shutil.chown(socket_dir, user, user)
        settings = dict(SETTINGS, port=str(port), listen_addresses=LISTEN_HOST, unix_socket_directories=socket_dir)
        return [program, "-D", data, *(f"-c{k}={v}" for k, v in settings.items())]

    def pid_source(self, data: str) -> str | None:
        return os.path.join(data, "postmaster.pid")
