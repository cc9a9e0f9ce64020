"""The shared stores a team's hosts write to, for the tests (issue 31): a results PostgreSQL and a
VictoriaMetrics, each on 127.0.0.1, a free port and a temp directory, ended by PID."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request

import psycopg

from benchwatch import engines
from benchwatch.results import dsn as results_dsn
from benchwatch.util import net, processes
from benchwatch.util.private import write_private
from benchwatch.util.processes import wait_until
from tests.helpers.tools import require_tool


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


class VictoriaMetrics:
    """victoria-metrics on 127.0.0.1, a free port, a temp data dir, ended by PID."""

    def __init__(self, directory: str):
        binary = require_tool("victoria-metrics", "victoria-metrics")
        self.port = net.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(directory, "vm.log"), "ab")
        # 100 years: imported runs carry old timestamps, and the default month would refuse them.
        self.proc = subprocess.Popen([binary, f"-httpListenAddr=127.0.0.1:{self.port}",
                                      f"-storageDataPath={os.path.join(directory, 'data')}", "-retentionPeriod=100y"],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        assert processes.wait_until(lambda: net.http_ok(self.url + "/health", timeout=2.0), 60, 0.1,
                                    abort=lambda: self.proc.poll() is not None), "victoria-metrics did not start"

    def query(self, promql: str, at: float) -> list:
        q = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=30) as r:
            return json.load(r)["data"]["result"]

    def metrics(self) -> dict[str, float]:
        """vm_rows and vm_data_size_bytes of its storage (and index), summed by name."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            name = line.split("{")[0].split(" ")[0]
            if name in ("vm_rows", "vm_data_size_bytes") and 'type="storage/' in line:
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        return out

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()
