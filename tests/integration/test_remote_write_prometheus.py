"""Remote write and OpenMetrics backfill against a real Prometheus / promtool."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchwatch.model.samples import sample
from benchwatch.sink.openmetrics import write_openmetrics
from benchwatch.sink.remote_write import BufferedRemoteWriter, RemoteWriteError, RemoteWriter
from tests.helpers.prometheus import (
    PROMTOOL_BIN,
    REMOTE_WRITE_CONFIG,
    free_port,
    query,
    query_range,
    series_values,
    start_prometheus,
)
from tests.helpers.tools import require_tool

RECEIVER = ["--web.enable-remote-write-receiver"]
T2016 = int(datetime(2016, 1, 6, 10, 0, 0, tzinfo=UTC).timestamp() * 1000)
assert T2016 == 1452074400000
NASTY = 'quote" back\\slash\nnewline é'  # label value needing escapes everywhere
N = 60


BLOCK_MS = 2 * 3600 * 1000  # promtool backfills into 2 h blocks by default


def make_samples(now_ms: int) -> list:
    """60 s of a 2016 run (tps with a 250 ms offset, a counter) and a recent run."""
    recent = (now_ms // 1000 - 600) * 1000  # ten minutes ago, whole second
    samples = []
    for i in range(N):
        samples.append(sample("bwtest_progress_tps", {"run": "r2016", "note": NASTY}, 1000 + i * 1.5 + 0.1, T2016 + 250 + i * 1000))
        samples.append(sample("bwtest_xacts_total", {"run": "r2016"}, float(i * 17), T2016 + i * 1000))
        samples.append(sample("bwtest_progress_tps", {"run": "recent"}, i / 3, recent + i * 1000))
    return samples


def expected_series(samples, name, run):
    return [(s.timestamp_ms, s.value) for s in samples if s.name == name and dict(s.labels)["run"] == run]


def assert_round_trip(url: str, samples) -> None:
    """Query every series back and compare values and timestamps exactly."""
    for name, run in (("bwtest_progress_tps", "r2016"), ("bwtest_xacts_total", "r2016"), ("bwtest_progress_tps", "recent")):
        expected = expected_series(samples, name, run)
        first, last = expected[0][0], expected[-1][0]
        selector = f'{name}{{run="{run}"}}'

        # Evaluated at exactly the sample instants, query_range returns each sample.
        result = query_range(url, selector, first / 1000, last / 1000, "1s")
        assert len(result) == 1, result
        labels = result[0]["metric"]
        assert labels["__name__"] == name and labels["run"] == run
        if name == "bwtest_progress_tps" and run == "r2016":
            assert labels["note"] == NASTY
        (got,) = series_values(result).values()
        assert got == expected

        # The samples' own timestamps, as PromQL sees them.
        stamps = query_range(url, f"timestamp({selector})", first / 1000, last / 1000, "1s")
        assert [float(v) for _, v in stamps[0]["values"]] == [t / 1000 for t, _ in expected]

        # Raw samples through a range selector: exact millisecond timestamps.
        raw = query(url, f"{selector}[{N + 5}s]", time=last / 1000)
        (got_raw,) = series_values(raw).values()
        assert got_raw == expected


@pytest.fixture
def workdir():
    """A temporary directory removed after the test (TSDBs are not kept)."""
    path = Path(tempfile.mkdtemp(prefix="benchwatch-rw-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def prometheus(workdir):
    prom = start_prometheus(workdir / "prom", REMOTE_WRITE_CONFIG, RECEIVER)
    try:
        yield prom
    finally:
        prom.stop()


def test_remote_write_round_trip_and_errors(prometheus):
    samples = make_samples(int(time.time() * 1000))
    writer = RemoteWriter(prometheus.remote_write_url, max_batch=50)
    writer.send(samples)
    assert_round_trip(prometheus.url, samples)

    # Older than the 30y out-of-order window: 500 "too old sample", not retryable.
    with pytest.raises(RemoteWriteError) as info:
        writer.send([sample("bwtest_progress_tps", {"run": "r1980"}, 1.0, 315532800000)])
    assert info.value.status == 500
    assert "too old sample" in info.value.body
    assert info.value.retryable is False

    # Sent together, the 1980 sample would take a current one down with it (Prometheus stores nothing
    # of a request it refuses a sample of): the buffered writer sends them apart, and keeps the current.
    now_ms = int(time.time() * 1000)
    buffered = BufferedRemoteWriter(prometheus.remote_write_url)
    buffered.enqueue([sample("bwtest_progress_tps", {"run": "r1980"}, 1.0, 315532800000),
                      sample("bwtest_beside_old", {}, 7.0, now_ms)])
    assert buffered.flush() == 1
    assert (buffered.sent_samples, buffered.rejected_samples) == (1, 1)
    (kept,) = query(prometheus.url, "bwtest_beside_old", time=now_ms / 1000)
    assert kept["value"][1] == "7"

    # A second value at a series' last millisecond: Prometheus refuses the whole request ("duplicate
    # sample for timestamp"); the buffered writer halves it until the duplicate is alone and stores the rest.
    then = now_ms - 30_000
    buffered.enqueue([sample("bwtest_host", {}, 1.0, then)])
    assert buffered.flush() == 1
    with pytest.raises(RemoteWriteError) as info:
        writer.send([sample("bwtest_host", {}, 2.0, then)])
    assert "duplicate sample for timestamp" in info.value.body and info.value.retryable is False
    lines = [sample("bwtest_lines", {"i": str(i)}, float(i), then + 1) for i in range(40)]
    buffered.enqueue(lines[:13] + [sample("bwtest_host", {}, 2.0, then)] + lines[13:])
    assert buffered.flush() == 40
    assert buffered.rejected_samples == 1 + 1
    stored = query(prometheus.url, "bwtest_lines", time=(then + 1) / 1000)
    assert sorted(int(s["metric"]["i"]) for s in stored) == list(range(40))

    # Unknown endpoint: a 4xx, not retryable.
    with pytest.raises(RemoteWriteError) as info:
        RemoteWriter(prometheus.url + "/api/v1/nonexistent").send(samples[:1])
    assert 400 <= info.value.status < 500
    assert info.value.retryable is False


def test_remote_write_without_receiver_is_rejected(workdir):
    prom = start_prometheus(workdir / "prom", REMOTE_WRITE_CONFIG)
    try:
        with pytest.raises(RemoteWriteError) as info:
            RemoteWriter(prom.remote_write_url).send([sample("bwtest_x", {}, 1.0, T2016)])
        assert 400 <= info.value.status < 500
        assert info.value.retryable is False
    finally:
        prom.stop()


def test_buffered_writer_delivers_once_prometheus_is_up(workdir):
    port = free_port()
    samples = make_samples(int(time.time() * 1000))
    writer = BufferedRemoteWriter(f"http://127.0.0.1:{port}/api/v1/write", timeout_s=2, max_batch=40)
    writer.enqueue(samples)

    assert writer.flush() == 0  # nobody listening yet
    assert writer.pending == len(samples)
    assert writer.failed_requests == 1
    assert writer.last_error is not None and writer.last_error.status is None

    prom = start_prometheus(workdir / "prom", REMOTE_WRITE_CONFIG, RECEIVER, port=port)
    try:
        assert writer.flush() == len(samples)
        assert (writer.pending, writer.sent_samples, writer.dropped_samples) == (0, len(samples), 0)
        assert_round_trip(prom.url, samples)
    finally:
        prom.stop()


def test_openmetrics_backfill_with_promtool(workdir):
    require_tool(PROMTOOL_BIN, "prometheus")
    samples = make_samples(int(time.time() * 1000))
    # 131570.800 s reads back as 131570799 ms if written naively (Prometheus
    # truncates seconds * 1000); the writer must compensate.
    tricky = [sample("bwtest_tricky_ts", {}, 7.0, 131570800), sample("bwtest_tricky_ts", {}, 8.0, 131571800)]
    om_path = workdir / "samples.om"
    with open(om_path, "w", encoding="utf-8") as out:
        lines = write_openmetrics(
            samples + tricky,
            out,
            types={"bwtest_xacts": "counter", "bwtest_progress_tps": "gauge"},
            help={"bwtest_xacts": "Transactions so far", "bwtest_progress_tps": 'TPS "reported"\\ by pgbench\n'},
        )
    assert lines == len(samples) + len(tricky)

    data_dir = workdir / "prom" / "data"
    done = subprocess.run(
        [PROMTOOL_BIN, "tsdb", "create-blocks-from", "openmetrics", str(om_path), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    blocks = [p for p in data_dir.iterdir() if (p / "meta.json").is_file()]
    # One block per 2 h window the samples touch (1970, 2016 and the recent run; the
    # recent run's 60 s straddle a window boundary now and then, giving a fourth).
    windows = {s.timestamp_ms // BLOCK_MS for s in samples + tricky}
    assert len(windows) in (3, 4)
    assert len(blocks) == len(windows)

    # promtool's own view of the blocks (dump needs a wal dir to exist).
    (data_dir / "wal").mkdir()
    dump = subprocess.run(
        [PROMTOOL_BIN, "tsdb", "dump", "--match", '{__name__="bwtest_xacts_total"}', str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dump.returncode == 0, dump.stderr
    rows = [line.rsplit(" ", 2) for line in dump.stdout.splitlines() if line]
    assert [(int(ts), float(v)) for _, v, ts in rows] == expected_series(samples, "bwtest_xacts_total", "r2016")
    dump = subprocess.run(
        [PROMTOOL_BIN, "tsdb", "dump", "--match", '{__name__="bwtest_tricky_ts"}', str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dump.returncode == 0, dump.stderr
    assert dump.stdout.split() == ['{__name__="bwtest_tricky_ts"}', "7", "131570800", '{__name__="bwtest_tricky_ts"}', "8", "131571800"]

    # And Prometheus serving those blocks returns exactly what was written.
    prom = start_prometheus(workdir / "prom", REMOTE_WRITE_CONFIG)
    try:
        assert_round_trip(prom.url, samples)
    finally:
        prom.stop()
