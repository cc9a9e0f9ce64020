"""The one way benchwatch starts a Prometheus: its command line, and a private one on a free port.

The native stack runs Prometheus as a long-lived component (benchwatch.stack
adds its pid file and log); a snapshot rebuild and the tests start a private
one that holds only what is written to it, and stop it by PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO

from benchwatch.util import net, processes

# A Prometheus that only holds what is written to it: nothing to scrape, and
# out-of-order samples accepted back to the oldest run one may load.
PRIVATE_CONFIG = """\
global:
  scrape_interval: 1h
  evaluation_interval: 1h
storage:
  tsdb:
    out_of_order_time_window: 30y
"""


RECEIVER_FLAG = "--web.enable-remote-write-receiver"


class PrometheusStartError(RuntimeError):
    pass


def prometheus_binary() -> str | None:
    return shutil.which(os.environ.get("BENCHWATCH_PROMETHEUS", "prometheus"))


def prometheus_argv(binary: str, *, config: str, data_dir: str, listen: str, retention: str = "30y",
                    remote_write_receiver: bool = True, extra: Sequence[str] = ()) -> list[str]:
    """Every benchwatch Prometheus takes pushed samples (the remote-write receiver) unless told otherwise."""
    argv = [binary, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
            f"--storage.tsdb.retention.time={retention}", f"--web.listen-address={listen}"]
    if remote_write_receiver:
        argv.append(RECEIVER_FLAG)
    return argv + [a for a in extra if a not in argv]  # Prometheus refuses a repeated flag


@dataclass
class PrometheusProcess:
    """A Prometheus started by :func:`start_prometheus`; stop it (or use ``with``)."""

    process: subprocess.Popen
    port: int
    directory: str
    log_path: str
    _log: IO[bytes] | None = field(repr=False, default=None)

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
    def data_dir(self) -> str:
        return os.path.join(self.directory, "data")

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "\n".join(f.read().splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM by PID, SIGKILL after the grace period; idempotent."""
        try:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=timeout_s)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
        return self.process.returncode

    def __enter__(self) -> PrometheusProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_prometheus(directory: str | os.PathLike, config_text: str = PRIVATE_CONFIG, extra_args: Sequence[str] = (), *,
                     port: int | None = None, ready_timeout_s: float = 60.0, retention: str = "100y",
                     remote_write_receiver: bool = True, binary: str | None = None) -> PrometheusProcess:
    """Prometheus on 127.0.0.1 with ``config_text``, config, TSDB (``data/``) and log under ``directory``.

    Starting again on the same directory reuses the TSDB. Waits until ready;
    raises PrometheusStartError with the log's tail (and stops it) otherwise.
    """
    binary = binary or prometheus_binary()
    if not binary:
        raise PrometheusStartError("prometheus is not installed: apt-get install prometheus")
    directory = os.fspath(directory)
    os.makedirs(os.path.join(directory, "data"), exist_ok=True)
    config = os.path.join(directory, "prometheus.yml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(config_text)
    port = port or net.free_port()
    log_path = os.path.join(directory, "prometheus.log")
    log = open(log_path, "ab")
    try:
        proc = subprocess.Popen(prometheus_argv(binary, config=config, data_dir=os.path.join(directory, "data"),
                                                listen=f"127.0.0.1:{port}", retention=retention,
                                                remote_write_receiver=remote_write_receiver, extra=extra_args),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=directory)
    except BaseException:
        log.close()
        raise
    prom = PrometheusProcess(proc, port, directory, log_path, log)
    try:
        wait_ready(prom, ready_timeout_s)
    except BaseException:
        prom.stop()
        raise
    return prom


def wait_ready(prom: PrometheusProcess, timeout_s: float = 60.0) -> None:
    """Poll ``/-/ready`` until 200, the process exits, or the deadline."""
    if processes.wait_until(lambda: net.http_ok(prom.url + "/-/ready", timeout=2.0), timeout_s, 0.05,
                            abort=lambda: not prom.running()):
        return
    if not prom.running():
        raise PrometheusStartError(f"prometheus exited with {prom.process.returncode} before ready:\n{prom.log_tail()}")
    raise PrometheusStartError(f"prometheus not ready after {timeout_s} s:\n{prom.log_tail()}")


@contextmanager
def private_prometheus(workdir: str | None = None) -> Iterator[PrometheusProcess]:
    """A throw-away Prometheus holding only what is written to it; removed afterwards unless ``workdir`` was given."""
    own = workdir is None
    directory = workdir or tempfile.mkdtemp(prefix="benchwatch-prometheus-")
    try:
        with start_prometheus(directory) as prom:
            yield prom
    finally:
        if own:
            shutil.rmtree(directory, ignore_errors=True)
