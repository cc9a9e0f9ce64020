"""Bad input (issue 12): seeded mutated pgbench output through import, attach and the live
follower; damaged meta.json, truncated run directories, server logs with garbage.
Never a crash; what could not be read is counted. The 1,000,000-line variant: bench/bench_fuzz.py."""

from __future__ import annotations

import io
import json
import os
import random
import threading

import pytest

from benchwatch.engines.postgresql.collectors.checkpoints import CheckpointCollector
from benchwatch.exporter.pgbench_runs import PgbenchRunsCollector
from benchwatch.model.run import METRICS
from benchwatch.record import replay, rundir
from benchwatch.record.wrapper import attach_stream
from benchwatch.sink.openmetrics import write_openmetrics
from benchwatch.sink.remote_write import encode_write_request
from benchwatch.util import bounds
from tests.helpers import fuzz

START = 1_700_000_000.0
SEEDS = range(6)
LINES = 3000


def openmetrics(samples) -> str:
    out = io.StringIO()
    write_openmetrics(samples, out, types={k: v[0] for k, v in METRICS.items()}, help={k: v[1] for k, v in METRICS.items()})
    return out.getvalue()


@pytest.mark.parametrize("seed", SEEDS)
def test_import_of_fuzzed_output(seed):
    data = fuzz.fuzzed_output(LINES, seed)
    model, samples = replay.replay_output(data, f"fuzz-{seed}", START)
    assert openmetrics(samples).endswith("# EOF\n")
    encode_write_request(samples + model.end_markers())
    # Every line is either understood or counted as unparsed.
    assert model.unparsed_lines > 0
    assert model.progress_lines + model.unparsed_lines <= len(replay.split_lines(data))


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_attach_saves_and_echoes_fuzzed_output_byte_for_byte(tmp_path, seed):
    data = fuzz.fuzzed_output(LINES, seed)
    read_fd, write_fd = os.pipe()

    def feed():
        rng = random.Random(seed)
        view, i = memoryview(data), 0
        while i < len(view):
            n = rng.randrange(1, 9000)
            os.write(write_fd, view[i:i + n])
            i += n
        os.close(write_fd)

    writer = threading.Thread(target=feed)
    writer.start()
    echo = io.BytesIO()
    run = attach_stream(read_fd, runs_dir=str(tmp_path), echo=echo, tool_args=None, interval=None)
    writer.join()
    os.close(read_fd)
    assert echo.getvalue() == data
    with open(run.file("output.log"), "rb") as f:
        assert f.read() == data
    assert run.read_meta()["state"] == rundir.FINISHED


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_live_follower_on_fuzzed_output_written_in_pieces(tmp_path, seed):
    rng = random.Random(seed)
    data = fuzz.fuzzed_output(LINES, seed)
    run = rundir.create_run_dir(str(tmp_path), f"20231114T221320Z-f{seed:03d}")
    run.write_meta({"run_id": run.run_id, "mode": "attach", "state": rundir.RUNNING, "pid": os.getpid(),
                    "output": "output.log", "progress_interval": 1.0})
    sent: list = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + len(sent))
    with open(run.file("output.log"), "wb") as f:
        i = 0
        while i < len(data):
            n = rng.randrange(1, 20000)
            f.write(data[i:i + n])
            f.flush()
            i += n
            c.poll()
    run.update_meta(state=rundir.FINISHED, ended_at=START + 99)
    c.poll()
    assert c.unreadable == {} and c.following == {}
    assert os.path.exists(run.file(".ingested"))
    unparsed = [s.value for s in sent if s.name == "benchmark_unparsed_lines_total"]
    assert unparsed and unparsed[-1] > 0
    encode_write_request(sent)


def good_run(runs_dir: str, run_id: str) -> rundir.RunDir:
    run = rundir.create_run_dir(runs_dir, run_id)
    with open(run.file("stderr.log"), "wb") as f:
        f.write(b"progress: 1.0 s, 100.0 tps, lat 1.000 ms stddev 0.100, 0 failed\n")
    run.write_meta({"run_id": run_id, "mode": "run", "state": rundir.FINISHED, "exit_code": 0, "argv": ["pgbench"],
                    "progress_interval": 1.0, "clock_start_epoch": START, "ended_at": START + 1.5})
    return run


CORRUPT_METAS = [
    b"", b"{", b"\xff\xfe\x00garbage", b"[1, 2, 3]", b"null", b'"a string"',
    json.dumps({"state": "finished", "argv": 5}).encode(),
    json.dumps({"state": "finished", "txlog_prefix": 42, "ended_at": "late"}).encode(),
]
# meta.json objects whose numbers alone are damaged (issue 32): each number is checked where it is read
# (benchwatch.util.bounds), the damaged one ignored, and the run's output read like any other's.
DAMAGED_NUMBER_METAS = [
    json.dumps({"state": "running", "pid": "not a pid", "clock_start_epoch": "yesterday"}).encode(),
    json.dumps({"state": "finished", "progress_interval": [1], "tool": "no such tool"}).encode(),
    b'{"state": "finished", "clock_start_epoch": 1e999, "ended_at": -1e999, "exit_code": 99999999999999999999999,'
    b' "progress_interval": 0}',
    b'{"state": "running", "pid": 99999999999999999999, "clock_start_epoch": NaN, "progress_interval": 1e300,'
    b' "ended_at": 9999999999999}',
    b'{"state": "running", "pid": -1, "clock_start_epoch": 67767976233316800, "progress_interval": -Infinity}',
]


def test_damaged_meta_json_is_set_aside_and_counted(tmp_path):
    for i, raw in enumerate(CORRUPT_METAS + DAMAGED_NUMBER_METAS):
        path = os.path.join(tmp_path, f"20231114T2213{i:02d}Z-bad0")
        os.makedirs(path)
        with open(os.path.join(path, "meta.json"), "wb") as f:
            f.write(raw)
        with open(os.path.join(path, "stderr.log"), "wb") as f:
            f.write(b"progress: 1.0 s, 5.0 tps, lat 1.000 ms stddev 0.100, 0 failed\n")
    good = good_run(str(tmp_path), "20231114T221400Z-good")
    sent: list = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + 5)
    for _ in range(3):
        c.poll()
    # The good run went through whole, and so did each run whose meta.json had only numbers damaged; each
    # damaged one is counted, none crashed the collector, and every sample can be written.
    assert sorted(s.value for s in sent if s.name == "benchmark_progress_tps" and s.value == s.value) == \
        [5.0] * len(DAMAGED_NUMBER_METAS) + [100.0]
    assert all(bounds.ms_in_range(s.timestamp_ms) for s in sent)
    encode_write_request(sent)
    openmetrics(sent)
    assert os.path.exists(good.file(".ingested"))
    damaged = len(CORRUPT_METAS) - 1  # b"" is no object either
    assert len(c.unreadable) >= damaged, c.unreadable
    gauge = [f for f in c.collect() if f.name == "benchwatch_exporter_unreadable_runs"][0]
    assert gauge.samples[0].value == len(c.unreadable)
    assert rundir.list_runs(str(tmp_path))  # listing runs still works


def test_truncated_run_directories(tmp_path):
    # meta.json alone; an output cut mid-line; a finished run whose files were removed.
    only_meta = rundir.create_run_dir(str(tmp_path), "20231114T221320Z-t001")
    only_meta.write_meta({"run_id": only_meta.run_id, "mode": "run", "state": rundir.FINISHED, "argv": ["pgbench"]})
    cut = good_run(str(tmp_path), "20231114T221321Z-t002")
    with open(cut.file("stderr.log"), "ab") as f:
        f.write(b"progress: 2.0 s, 200.0 tps, lat 1.0")
    gone = good_run(str(tmp_path), "20231114T221322Z-t003")
    os.unlink(gone.file("stderr.log"))
    sent: list = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + 5)
    c.poll()
    assert c.unreadable == {} and c.following == {}
    assert all(os.path.exists(r.file(".ingested")) for r in (only_meta, cut, gone))
    for r in (only_meta, cut, gone):  # a snapshot rebuild reads them too
        replay.replay_run_dir(r.path, r.read_meta())


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_server_log_with_garbage(tmp_path, seed):
    log_path = os.path.join(tmp_path, "postgresql.log")
    rng = random.Random(seed)
    lines = fuzz.fuzzed_lines(4000, seed, "pglog/*.log") + [bytes(rng.randrange(256) for _ in range(300))]
    sent: list = []
    c = CheckpointCollector(log_path, sent.extend, clock=lambda: START)
    with open(log_path, "wb") as f:
        for i in range(0, len(lines), 500):
            f.write(b"\n".join(lines[i:i + 500]) + b"\n")
            f.flush()
            c.poll()
    families = {f.name: f for f in c.collect()}
    counted = sum(families[f"benchwatch_exporter_checkpoints_{k}"].samples[0].value
                  for k in ("log_records", "foreign_lines", "malformed_records"))
    assert counted > 0
    encode_write_request(sent)
