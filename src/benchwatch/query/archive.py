"""What a finished run's archive keeps beyond its raw output: ``<run_dir>/series/*.csv``.

The exporter daemon saves it when a run ends (``exporter/run_archiver.py``), ``benchwatch snapshot``
reads the same series from the live Prometheus, and a snapshot rebuilt from the run directory loads
them into a private Prometheus that answers the dashboards' queries. One list says which series:
:func:`archived_selectors`, the host's (here) and each engine's (``Engine.archived_selectors``), plain
data, so the daemon imports neither the dashboards nor the snapshot code to know it.
``tests/unit/test_archive.py`` checks that it covers every query of every dashboard, the summary's
and explain's: a panel that reads a series nothing archives fails there, not in a user's snapshot.
"""

from __future__ import annotations

import time

from benchwatch import engines, loadgens
from benchwatch.query.series import fetch, write_csv_dir
from benchwatch.record import replay, rundir
from benchwatch.util import processes

SERIES_DIR = "series"   # under the run directory
MARGIN_S = 5.0          # a snapshot shows the run with this much either side
LOOKBACK_S = 300.0      # series are kept from this much earlier: Prometheus' lookback, so the first steps see them

# The host's series (node_exporter): disks as iostat shows them, CPU, and the machine's size.
HOST_SELECTORS = (
    "node_uname_info", "node_memory_MemTotal_bytes", "node_cpu_seconds_total", "node_disk_info",
    '{__name__=~"node_disk_(io_time|io_time_weighted|read_time|write_time)_seconds_total"}',
    '{__name__=~"node_disk_(reads|writes)_completed_total|node_disk_(read|written)_bytes_total"}',
    # explain's cpu_contention and io_pressure: pressure stall information, the processes collector's CPU.
    '{__name__=~"node_pressure_.*"}', '{__name__=~"benchmark_host_.*"}',
    # The targets' scrapes: the host each target runs on, which the dashboards join host series to
    # (node_exporter is scraped once per host, its series carry no target).
    "up",
)


# Events recorded with benchwatch annotate (a deploy, a remount), drawn on the run dashboards.
EVENT_SELECTORS = ("benchmark_history_annotation_info",)


def archived_selectors() -> list[str]:
    """Every series a run's archive keeps, except the run's own (its raw output rebuilds those)."""
    out = list(HOST_SELECTORS) + list(EVENT_SELECTORS)
    for engine in engines.load_engines().values():
        out += [s for s in engine.archived_selectors if s not in out]
    return out


def run_selectors(run_id: str) -> list[str]:
    """What a snapshot of a run reads, and what its archive saves of it (less what the raw output rebuilds):
    its own series and the archived ones."""
    return [loadgens.run_selector(run_id), *archived_selectors()]


def is_run_series(name: str) -> bool:
    """A series the run's raw output rebuilds (whichever tool), not one saved from Prometheus."""
    return name in replay.run_metrics()


def window(meta: dict) -> tuple[float, float]:
    """The time range a snapshot of the run shows: the run, MARGIN_S either side."""
    start = meta.get("clock_start_epoch") or meta.get("started_at") or time.time()
    end = meta.get("ended_at") or time.time()
    return float(start) - MARGIN_S, float(end) + MARGIN_S


def save_run_series(run_dir: str, prometheus_url: str, wait: bool = True) -> list[str]:
    """Store what a snapshot of this run needs beyond the raw output, as <run_dir>/series/*.csv
    so a later snapshot needs no Prometheus (host facts are in meta.json). Returns the files written.

    The snapshot's range ends MARGIN_S after the run: called right at the end of a run, this
    waits (up to MARGIN_S + 2 s) until Prometheus has scraped past it; wait=False saves what is there."""
    run = rundir.RunDir(run_dir)
    meta = run.read_meta()
    start, end = window(meta)
    if wait:
        # One scrape interval and a little more past the range, for the last scrape to land.
        processes.wait_until(lambda: time.time() > end + 1.5, MARGIN_S + 2.5, 0.1)
    # The run's own series too: those its raw output does not rebuild (the latency histograms of its
    # per-transaction logs) are kept like the rest.
    selectors = run_selectors(replay.run_id_of(meta, run.run_id))
    series = [s for s in fetch(prometheus_url, selectors, start - LOOKBACK_S, end) if not is_run_series(s.name)]
    return write_csv_dir(run.file(SERIES_DIR), series)
