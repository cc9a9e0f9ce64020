"""The long-term series store (docs/long-term.md): a Prometheus-compatible engine (VictoriaMetrics, Mimir,
Thanos Receive) that the stack's Prometheus remote-writes to, which keeps a run's series beyond this machine.

Two jobs, one place each:

- **reading**: :func:`base_for_run` is where every reader of a run's series (snapshot, explain, the why of
  ``report`` and ``history``) learns which Prometheus API holds the run: the one it was given while that
  one has it, else the long-term store configured for it (:func:`configure`).
- **completing**: Prometheus 2.42 forwards over remote write only what it appends in order; an
  out-of-order sample (a run imported from last year, a progress line written a moment after a later
  scrape of its series) is stored locally and never forwarded. :func:`complete` reads a run's window from
  both, waits for Prometheus' own forwarding to catch up, and writes what the store lacks straight to it,
  then reads it back: what is still missing was refused (older than the store's retention).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchwatch.model import names
from benchwatch.model.samples import STALE_NAN, Sample, sample
from benchwatch.query import prometheus
from benchwatch.query.series import Series
from benchwatch.query.series import fetch as series_fetch
from benchwatch.sink.client import RemoteWriteError, RemoteWriter, redact_url
from benchwatch.util import net

log = logging.getLogger("benchwatch.longterm")

# What the store takes becomes readable a moment later (VictoriaMetrics flushes its buffers every second).
FLUSH_S = 2.0
# Where a run directory keeps what complete_run found and did.
RESULT_FILE = "long-term.json"
# How long Prometheus' remote write may take to send what it had appended when the completion began.
FORWARD_WAIT_S = 60.0


def bearer_headers(token_file: str | None) -> dict[str, str]:
    """The Authorization header of a bearer token kept in a file (its first line); {} without one."""
    if not token_file:
        return {}
    with open(token_file, encoding="utf-8") as f:
        token = f.readline().strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


@dataclass(frozen=True)
class Store:
    """Where the long-term store is written and read; the headers carry its token, never printed."""

    write_url: str
    query_url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __str__(self) -> str:
        return redact_url(self.query_url)


# The Prometheus API base URL -> the store that keeps what it forwards (set by configure).
_stores: dict[str, Store] = {}


def configure(local: str, store: Store) -> None:
    """``local``'s series are kept in ``store`` too: readers of a run fall back to it (:func:`base_for_run`)."""
    _stores[local.rstrip("/")] = store
    prometheus.set_headers(store.query_url, store.headers)


def store_of(local: str | None) -> Store | None:
    return _stores.get(local.rstrip("/")) if local else None


def fetch(base: str, selectors: Sequence[str], start: float, end: float, *, markers: bool = False) -> list[Series]:
    """:func:`benchwatch.query.series.fetch` from a store. VictoriaMetrics 1.79 drops a NaN sample when it
    takes it, but keeps a staleness marker (the end of a series, Prometheus' StaleNaN) and returns it as a NaN
    sample, which Prometheus' API never shows: so every NaN a store returns is a staleness marker, left out,
    or with ``markers`` kept as StaleNaN (for a Prometheus to end the series where the stack's did)."""
    found = series_fetch(base, list(selectors), start, end)
    for s in found:
        if markers:
            s.samples = [(ts, STALE_NAN if math.isnan(v) else v) for ts, v in s.samples]
        else:
            s.samples = [(ts, v) for ts, v in s.samples if not math.isnan(v)]
    return [s for s in found if s.samples]


def has_run(base: str, run_id: str, start: float, end: float) -> bool:
    """Whether the Prometheus API at ``base`` has the run's TPS samples in (start, end]. Raw samples, not
    count_over_time(): VictoriaMetrics evaluates a function 30 s in the past (-search.latencyOffset), which
    would miss a run that ended a moment ago; a range selector alone returns what it stores."""
    tps = names.select("benchmark_progress_tps", f'run_id="{run_id}"')
    try:
        return bool(prometheus.query(base, f"{tps}[{int(end - start) + 1}s]", end))
    except prometheus.PrometheusError:
        return False


class _Mirror:
    """A private Prometheus holding the runs read from one store, for this process' life: the readers' PromQL
    (the dashboards' panels, the why's increase() and *_over_time) is answered by Prometheus itself, as
    the stack's would, not by the store's own dialect (VictoriaMetrics' increase() does not extrapolate, and
    its functions look 30 s in the past)."""

    def __init__(self, store: Store):
        import atexit
        import shutil
        import tempfile

        from benchwatch.query import launch

        self.store = store
        self.directory = tempfile.mkdtemp(prefix="benchwatch-long-term-")
        self.prometheus = launch.start_prometheus(self.directory)
        self.loaded: set[str] = set()
        atexit.register(self.prometheus.stop)
        atexit.register(shutil.rmtree, self.directory, True)  # runs after the stop (atexit: last in, first out)

    def load(self, run_id: str, start: float, end: float) -> None:
        from benchwatch.query import archive

        if run_id in self.loaded:
            return
        # What the run's archive keeps (the dashboards', explain's and the why's series: tests/unit/test_archive.py)
        # over the window its readers look at, Prometheus' lookback before it.
        series = fetch(self.store.query_url, archive.run_selectors(run_id), start - archive.LOOKBACK_S - archive.MARGIN_S,
                       end + archive.MARGIN_S, markers=True)
        samples = [sample(s.name, s.labels, v, ts) for s in series for ts, v in s.samples]
        if samples:
            RemoteWriter(self.prometheus.remote_write_url, timeout_s=60).send(samples)
        self.loaded.add(run_id)


# The store's query URL -> its mirror, started when a run is first read from the store.
_mirrors: dict[str, _Mirror] = {}


def base_for_run(base: str | None, run_id: str, start: float, end: float) -> str | None:
    """The Prometheus API that holds the run's series: ``base`` while it has them; else, when the long-term
    store configured for ``base`` has them, a private Prometheus they were copied into from the store
    (:class:`_Mirror`); None when neither has them."""
    if not base:
        return None
    if has_run(base, run_id, start, end):
        return base
    store = store_of(base)
    if store is None or not has_run(store.query_url, run_id, start, end):
        return None
    try:
        mirror = _mirrors.get(store.query_url)
        if mirror is None:
            mirror = _mirrors[store.query_url] = _Mirror(store)
        mirror.load(run_id, start, end)
    except (RuntimeError, OSError, RemoteWriteError) as e:  # no Prometheus to start, the store gone meanwhile
        log.warning("run %s could not be read from the long-term store %s: %s", run_id, store, e)
        return None
    return mirror.prometheus.url


def source_of(base: str | None) -> Store | None:
    """The store a base URL from :func:`base_for_run` mirrors (None: a Prometheus of its own)."""
    return next((m.store for m in _mirrors.values() if m.prometheus.url == base), None)


# -- completing the store ------------------------------------------------------------------------------

_METRIC_LINE = re.compile(r'^(prometheus_remote_storage_[a-z_]+)(\{[^}]*\})? ([0-9.eE+-]+)$')


def forwarding(metrics_text: str) -> tuple[float | None, float | None]:
    """(the highest timestamp Prometheus appended in order, the lowest of what each remote-write queue has
    sent), in Unix seconds, from Prometheus' own /metrics text; None where it says nothing of it (no
    remote_write configured)."""
    highest = None
    sent: list[float] = []
    for line in metrics_text.splitlines():
        m = _METRIC_LINE.match(line)
        if not m:
            continue
        name, value = m.group(1), float(m.group(3))
        if name == "prometheus_remote_storage_highest_timestamp_in_seconds":
            highest = value
        elif name == "prometheus_remote_storage_queue_highest_sent_timestamp_seconds":
            sent.append(value)
    return highest, (min(sent) if sent else None)


def wait_forwarded(local: str, timeout_s: float = FORWARD_WAIT_S) -> bool:
    """Wait until Prometheus' remote write has sent everything it had appended in order when this was
    called (so that a sample written directly is not one it is still about to forward). False on timeout
    or when it does not say."""
    def read() -> tuple[float | None, float | None]:
        try:
            status, body = net.http_get(local.rstrip("/") + "/metrics", timeout=5.0)
        except OSError:
            return None, None
        return forwarding(body.decode("utf-8", "replace")) if status == 200 else (None, None)

    target, _ = read()
    if target is None:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _, sent = read()
        if sent is not None and sent >= target:
            return True
        time.sleep(0.5)
    return False


def missing(have: Sequence[Series], stored: Sequence[Series]) -> list[Sample]:
    """The samples of ``have`` that ``stored`` lacks (same name, labels and millisecond). A NaN sample is not
    asked for: VictoriaMetrics drops it when it takes it (a latency in an interval without transactions)."""
    stored_times = {s.key: {ts for ts, _ in s.samples} for s in stored}
    out = []
    for s in have:
        known = stored_times.get(s.key, set())
        out += [sample(s.name, s.labels, v, ts) for ts, v in s.samples if ts not in known and not math.isnan(v)]
    return out


@dataclass
class Completion:
    """What :func:`complete` found and did, counted in samples."""

    local: int = 0        # the run's window in the local Prometheus
    forwarded: int = 0    # already in the store (Prometheus' remote write had sent them)
    written: int = 0      # written to the store directly
    refused: int = 0      # written but not there when read back (older than the store's retention, ...)
    written_by_name: dict[str, int] = field(default_factory=dict)  # what was written, by series name

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def complete(local: str, store: Store, selectors: Sequence[str], start: float, end: float,
             settle: Callable[[], None] = lambda: time.sleep(FLUSH_S), wait: bool = True) -> Completion:
    """Make the store hold every sample the local Prometheus has of ``selectors`` in (start, end]: what its
    remote write did not forward is written directly, then read back. ``settle`` is called before each look
    at the store (it makes what it takes readable within a second or so); ``wait``: first wait for
    Prometheus' own remote write to send what it has."""
    if wait:
        wait_forwarded(local)
    settle()
    have = series_fetch(local, list(selectors), start, end)
    stored = series_fetch(store.query_url, list(selectors), start, end)
    lacking = missing(have, stored)
    result = Completion(local=sum(1 for s in have for _, v in s.samples if not math.isnan(v)))
    result.forwarded = result.local - len(lacking)
    if not lacking:
        return result
    RemoteWriter(store.write_url, timeout_s=30, headers=store.headers).send(lacking)
    result.written = len(lacking)
    for s in lacking:
        result.written_by_name[s.name] = result.written_by_name.get(s.name, 0) + 1
    settle()
    deadline = time.monotonic() + 10.0
    while True:
        result.refused = len(missing(have, series_fetch(store.query_url, list(selectors), start, end)))
        if not result.refused or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    if result.refused:
        log.warning("the long-term store %s refused %d of the %d samples written to it (older than its retention?)",
                    store, result.refused, result.written)
    return result


def complete_run(run_dir: str, local: str, store: Store, wait: bool = True) -> Completion:
    """:func:`complete` over a finished run's series (its own and what its archive keeps, over the window a
    snapshot shows), the result kept in ``<run_dir>/long-term.json``."""
    import json

    from benchwatch.query import archive
    from benchwatch.record import replay, rundir
    from benchwatch.util.private import write_private

    run = rundir.RunDir(run_dir)
    meta = run.read_meta()
    start, end = archive.window(meta)
    selectors = archive.run_selectors(replay.run_id_of(meta, run.run_id))
    result = complete(local, store, selectors, start - archive.LOOKBACK_S, end, wait=wait)
    write_private(run.file(RESULT_FILE), json.dumps({"store": str(store), "checked_at": time.time(),
                                                      **result.to_json()}, indent=2) + "\n")
    return result
