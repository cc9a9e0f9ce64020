"""The shared stores a team's hosts write to, for the tests (issue 31): a results PostgreSQL
(tests/helpers/results_db.py's, named here too) and a VictoriaMetrics, each on 127.0.0.1, a free port and a
temp directory, ended by PID."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request

from benchwatch.util import net, processes
from tests.helpers.results_db import ResultsServer
from tests.helpers.tools import require_tool

__all__ = ["ResultsServer", "VictoriaMetrics"]


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
