"""A run's series without the stack's Prometheus: from the run directory alone.

pgbench series come from the raw output, through the same run model the
exporter used live (same clock start, same labels, same end), so they are the
samples Prometheus had. Everything else (checkpoints, server and host
figures) comes from ``<run_dir>/series/*.csv``, saved when the run ended.

To draw the dashboard's panels from them exactly as Grafana would, the samples
are loaded into a private, throw-away Prometheus and the dashboard queries run
against it: one query engine for both paths, so a rebuilt snapshot equals one
made from the live Prometheus.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from benchwatch.model import replay
from benchwatch.model.pgbench_run import METRICS
from benchwatch.model.samples import Sample, sample
from benchwatch.query.series import Series
from benchwatch.record import rundir
from benchwatch.sink.remote_write import RemoteWriter
from benchwatch.util import net, processes

PGBENCH_METRICS = frozenset(METRICS)
SERIES_DIR = "series"

# A Prometheus that only holds what is written to it: nothing to scrape, and
# out-of-order samples accepted back to the oldest run one may rebuild.
PRIVATE_PROMETHEUS_CONFIG = """\
global:
  scrape_interval: 1h
  evaluation_interval: 1h
storage:
  tsdb:
    out_of_order_time_window: 30y
"""


def run_id_of(run: rundir.RunDir, meta: dict | None = None) -> str:
    """The id the run was recorded under (a copied run directory, e.g. a snapshot's raw/, keeps it in meta.json)."""
    return replay.run_id_of(run.read_meta() if meta is None else meta, run.run_id)


def pgbench_samples(run: rundir.RunDir) -> list[Sample]:
    """The run's pgbench_* samples from its raw output, as the exporter produced them."""
    return replay.replay_run_dir(run.path, run.read_meta())


def samples_to_series(samples: list[Sample]) -> list[Series]:
    by_key: dict[tuple, Series] = {}
    for s in samples:
        key = (s.name, s.labels)
        if key not in by_key:
            by_key[key] = Series(s.name, dict(s.labels))
        by_key[key].samples.append((s.timestamp_ms, s.value))
    for s in by_key.values():
        s.samples.sort()
    return sorted(by_key.values(), key=lambda s: s.key)


def series_to_samples(series: list[Series]) -> list[Sample]:
    return [sample(s.name, s.labels, v, ts) for s in series for ts, v in s.samples]


class PrometheusStartError(RuntimeError):
    pass


@contextmanager
def private_prometheus(series: list[Series], binary: str | None = None) -> Iterator[str]:
    """A Prometheus on a free 127.0.0.1 port holding exactly these samples; yields its URL."""
    binary = binary or shutil.which("prometheus")
    if not binary:
        raise PrometheusStartError("prometheus is not installed (needed to draw the panels from raw data)")
    workdir = tempfile.mkdtemp(prefix="benchwatch-rebuild-")
    port = net.free_port()
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(PRIVATE_PROMETHEUS_CONFIG)
    log = open(os.path.join(workdir, "prometheus.log"), "wb")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={workdir}/data",
                             f"--web.listen-address=127.0.0.1:{port}", "--web.enable-remote-write-receiver",
                             "--storage.tsdb.retention.time=30y"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        if not processes.wait_until(lambda: net.http_ok(url + "/-/ready"), 60, 0.1,
                                abort=lambda: proc.poll() is not None):
            log.flush()
            tail = open(os.path.join(workdir, "prometheus.log"), "rb").read()[-500:].decode(errors="replace")
            raise PrometheusStartError(f"private prometheus did not become ready: {tail}")
        samples = series_to_samples(series)
        if samples:
            RemoteWriter(url + "/api/v1/write", timeout_s=30).send(samples)
        yield url
    finally:
        processes.stop_pid(proc.pid)
        proc.wait(timeout=10)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
