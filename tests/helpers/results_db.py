"""A PostgreSQL for a test alone, as the results database (issue 31), started through the same engine capability
as the stack's own: on a free port of 127.0.0.1, in a temporary directory, its password in a 0600 pgpass."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile

import psycopg

from benchwatch import engines
from benchwatch.results import dsn as results_dsn
from benchwatch.util import net
from benchwatch.util.private import write_private
from benchwatch.util.processes import wait_until


class ResultsServer:
    """A PostgreSQL for the test alone, started through the same engine capability as the stack's own."""

    def __init__(self) -> None:
        self.server = engines.results_server()
        assert self.server is not None and self.server.program(), "PostgreSQL is not installed"
        self.home = tempfile.mkdtemp(prefix="benchwatch-test-results-", dir="/tmp")
        os.chmod(self.home, 0o755)
        self.data = os.path.join(self.home, "pg", "data")
        self.port = net.free_port()
        password = secrets.token_urlsafe(18)
        self.server.init(self.data, password, os.path.join(self.home, "pg"), {"PATH": os.environ["PATH"]})
        self.pgpass = os.path.join(self.home, "pgpass")
        write_private(self.pgpass, f"127.0.0.1:*:*:postgres:{password}\n")
        self.dsn = results_dsn.local(self.port, self.pgpass, dbname="postgres")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        argv = self.server.argv(self.data, self.port, os.path.join(self.home, "socket"))
        user = self.server.user()
        self.proc = subprocess.Popen(argv, user=user, group=user, extra_groups=[] if user else None,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.home)
        assert wait_until(self.ready, 60, 0.2), "the results PostgreSQL did not start"

    def ready(self) -> bool:
        try:
            with psycopg.connect(self.dsn, connect_timeout=2):
                return True
        except psycopg.Error:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(2)  # fast shutdown
            self.proc.wait(60)
            self.proc = None

    def run_hosts(self) -> dict[str, str]:
        with psycopg.connect(self.dsn) as conn:
            if conn.execute("SELECT to_regclass('runs')").fetchone()[0] is None:
                return {}  # no run written yet: the schema comes with the first
            return dict(conn.execute("SELECT run_id, host FROM runs").fetchall())

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)
