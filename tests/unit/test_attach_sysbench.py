"""`benchwatch attach --tool sysbench`: a sysbench stream read from a pipe becomes a sysbench run."""

from __future__ import annotations

import json
import os
import threading

from benchwatch.record import replay
from benchwatch.record.wrapper import attach_stream

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "sysbench", "plain.txt")


def attach(data: bytes, tmp_path, **kw):
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, data), os.close(w)))
    writer.start()
    try:
        return attach_stream(r, runs_dir=str(tmp_path), echo=None, interval=None, **kw)
    finally:
        writer.join()
        os.close(r)


def test_attached_sysbench_stream_is_a_sysbench_run(tmp_path):
    data = open(FIXTURE, "rb").read()
    run = attach(data, tmp_path, tool_args=["oltp_read_write", "--threads=2", "run"], tool="sysbench")
    meta = json.load(open(run.file("meta.json")))
    assert meta["tool"] == "sysbench" and meta["mode"] == "attach" and meta["argv"][0] == "sysbench"
    assert meta["clock_start_epoch"] > 0  # stamped from sysbench's first "[ 1s ]" line
    assert open(run.file("output.log"), "rb").read() == data
    samples = replay.replay_run_dir(run.path, meta)
    tps = [s for s in samples if s.name == "benchmark_progress_tps" and s.value == s.value]  # NaN: the end marker
    printed = sum(1 for line in data.split(b"\n") if line.startswith(b"[ ") and b"tps:" in line)
    assert len(tps) == printed and all(dict(s.labels)["tool"] == "sysbench" for s in tps)


def test_attach_without_a_tool_still_reads_pgbench(tmp_path):
    run = attach(b"progress: 1.0 s, 10.0 tps, lat 1.0 ms stddev 0.1, 0 failed\n", tmp_path, tool_args=None)
    assert json.load(open(run.file("meta.json")))["tool"] == "pgbench"
