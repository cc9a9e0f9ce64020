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

from collections.abc import Iterator
from contextlib import contextmanager

from benchwatch.model.samples import Sample, sample
from benchwatch.query import archive, launch, series
from benchwatch.query.series import Series
from benchwatch.record import replay, rundir
from benchwatch.sink.remote_write import RemoteWriter

# Where the run directory keeps the archived series, and which series its raw output rebuilds instead.
SERIES_DIR = archive.SERIES_DIR
is_run_series = archive.is_run_series

def run_samples(run: rundir.RunDir) -> list[Sample]:
    """The run's own samples (its tool's series) from its raw output, as the exporter produced them."""
    return replay.replay_run_dir(run.path, run.read_meta())


samples_to_series = series.from_samples


def series_to_samples(series: list[Series]) -> list[Sample]:
    return [sample(s.name, s.labels, v, ts) for s in series for ts, v in s.samples]


@contextmanager
def private_prometheus(series: list[Series]) -> Iterator[str]:
    """A private Prometheus holding exactly these samples; yields its URL."""
    with launch.private_prometheus() as prom:
        samples = series_to_samples(series)
        if samples:
            RemoteWriter(prom.remote_write_url, timeout_s=30).send(samples)
        yield prom.url
