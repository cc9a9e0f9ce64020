"""Run a real Prometheus for integration tests, and query it.

Usage::

    prom = start_prometheus(tmp_path, CONFIG, extra_args=["--web.enable-remote-write-receiver"])
    try:
        query(prom.url, "up")
    finally:
        prom.stop()

or as a context manager (``with start_prometheus(...) as prom:``).  Each
Prometheus listens on 127.0.0.1 only, keeps its config, TSDB and log under the
given directory, and is stopped by PID (SIGTERM, then SIGKILL after a grace
period).  Readiness is polled on ``/-/ready`` with a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from benchwatch.share.rebuild import PRIVATE_PROMETHEUS_CONFIG
from tests.helpers.tools import require_tool

PROMETHEUS_BIN = os.environ.get("BENCHWATCH_PROMETHEUS", "prometheus")
PROMTOOL_BIN = os.environ.get("BENCHWATCH_PROMTOOL", "promtool")

# A config with nothing to scrape, accepting out-of-order samples up to 30
# years old (so fixtures from 2016 can be remote-written): the snapshot
# rebuild's private Prometheus is exactly that.
REMOTE_WRITE_CONFIG = PRIVATE_PROMETHEUS_CONFIG


# Talk to the local Prometheus directly, whatever *_proxy variables say.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrometheusError(RuntimeError):
    pass


@dataclass
class PrometheusHandle:
    """A running Prometheus started by :func:`start_prometheus`."""

    process: subprocess.Popen
    port: int
    directory: Path
    log_path: Path
    _log_file: object = field(repr=False, default=None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def remote_write_url(self) -> str:
        return f"{self.url}/api/v1/write"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """Stop this Prometheus (by its PID) and wait for it; idempotent."""
        proc = self.process
        try:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=timeout_s)
        except ProcessLookupError:
            pass
        finally:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
        return proc.returncode

    def __enter__(self) -> PrometheusHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_prometheus(
    tmp_path: Path | str,
    config_text: str,
    extra_args: Sequence[str] = (),
    *,
    port: int | None = None,
    ready_timeout_s: float = 60.0,
) -> PrometheusHandle:
    """Start Prometheus on 127.0.0.1 with ``config_text`` and wait until ready.

    Config, TSDB (``data/``) and log (``prometheus.log``) go under
    ``tmp_path``; starting again with the same ``tmp_path`` reuses the TSDB.
    ``port`` defaults to a free one.  Retention is set to 100 years so that old
    fixture timestamps are not deleted.  Raises :class:`PrometheusError` (with
    the log tail) if it exits or is not ready before the deadline; the process
    is stopped in that case.
    """
    directory = Path(tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / "prometheus.yml"
    config_path.write_text(config_text)
    (directory / "data").mkdir(exist_ok=True)
    port = port or free_port()
    args = [
        require_tool(PROMETHEUS_BIN, "prometheus"),
        f"--config.file={config_path}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=100y",
        "--log.level=info",
        *extra_args,
    ]
    log_path = directory / "prometheus.log"
    log_file = open(log_path, "ab")
    try:
        process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, cwd=directory
        )
    except BaseException:
        log_file.close()
        raise
    handle = PrometheusHandle(process, port, directory, log_path, log_file)
    try:
        wait_ready(handle, ready_timeout_s)
    except BaseException:
        handle.stop()
        raise
    return handle


def wait_ready(handle: PrometheusHandle, timeout_s: float = 60.0) -> None:
    """Poll ``/-/ready`` until it answers 200, the process exits, or the deadline."""
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    while True:
        if not handle.running():
            raise PrometheusError(
                f"prometheus exited with {handle.process.returncode} before ready:\n{handle.log_tail()}"
            )
        try:
            with _OPENER.open(f"{handle.url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:  # 503 while starting
            last = f"HTTP {exc.code}"
            exc.close()
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise PrometheusError(f"prometheus not ready after {timeout_s}s ({last}):\n{handle.log_tail()}")
        time.sleep(0.05)  # poll interval


def _api_get(url: str, path: str, params: dict, timeout_s: float = 30.0) -> dict:
    full = f"{url.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
    try:
        with _OPENER.open(full, timeout=timeout_s) as response:
            payload = json.load(response)
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace")
        exc.close()
        raise PrometheusError(f"GET {path} {params}: HTTP {exc.code}: {body}") from None
    if payload.get("status") != "success":
        raise PrometheusError(f"GET {path} {params}: {payload}")
    return payload["data"]


def _time_param(t: float | int | str | datetime) -> str:
    if isinstance(t, datetime):
        return f"{t.timestamp():.3f}"
    if isinstance(t, (int, float)):
        return f"{t:.3f}"
    return t


def query(url: str, promql: str, time: float | str | datetime | None = None) -> list:
    """Instant query; returns ``data.result`` (a list for vector/matrix results).

    ``time`` is Unix seconds, an RFC 3339 string or an aware ``datetime``.
    """
    params = {"query": promql}
    if time is not None:
        params["time"] = _time_param(time)
    return _api_get(url, "/api/v1/query", params)["result"]


def query_range(
    url: str,
    promql: str,
    start: float | str | datetime,
    end: float | str | datetime,
    step: float | str,
) -> list:
    """Range query; returns ``data.result``: ``[{"metric": {...}, "values": [[t, "v"], ...]}, ...]``."""
    params = {
        "query": promql,
        "start": _time_param(start),
        "end": _time_param(end),
        "step": str(step),
    }
    return _api_get(url, "/api/v1/query_range", params)["result"]


def series_values(result: list) -> dict:
    """``{frozenset(metric labels): [(timestamp_ms, float value), ...]}`` of a
    matrix or range result, timestamps converted exactly to milliseconds."""
    out = {}
    for item in result:
        key = frozenset(item["metric"].items())
        out[key] = [(round(float(t) * 1000), float(v)) for t, v in item["values"]]
    return out
