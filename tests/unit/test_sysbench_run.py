"""sysbench in the load generator registry, and its runs as series: the same contracts as pgbench runs."""

from __future__ import annotations

import json
import os

from benchwatch import loadgens
from benchwatch.exporter.pgbench_runs import RunFollower
from benchwatch.loadgens.sysbench import output as sb
from benchwatch.loadgens.sysbench.model import SysbenchRunModel
from benchwatch.record import importer, replay, rundir

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
START = 1_700_000_000.0


def fixture(name: str) -> bytes:
    with open(os.path.join(FIXTURES, "sysbench", name), "rb") as f:
        return f.read()


def progress_lines(data: bytes) -> list[sb.Progress]:
    parser = sb.SysbenchOutputParser()
    return [e for line in replay.split_lines(data) for e in parser.feed(line) if isinstance(e, sb.Progress)]


def test_registry_entry():
    g = loadgens.for_program("/usr/bin/sysbench")
    assert g is loadgens.by_name("sysbench") and loadgens.by_name("sysbench") is g
    assert g.progress_stream == "stdout" and g.version_key == "sysbench_version"
    assert g.parse_version("sysbench 1.0.20") == "1.0.20"
    assert g.progress_elapsed(b"[ 12s ] thds: 2 tps: 1.00 qps: 1.00 (r/w/o: 1.00/0.00/0.00) lat (ms,95%): 1.00 err/s: 0.00 reconn/s: 0.00") == 12.0
    assert g.progress_elapsed(b"[  10s] threads: 8, tps: 1.0, reads: 1.0, writes: 1.0, response time: 1.0ms (95%)") == 10.0
    assert g.progress_elapsed(b"[ 1s ] queue length: 0, concurrency: 1") is None
    assert isinstance(replay.model_for_run("r", {"tool": "sysbench"}), SysbenchRunModel)


def test_report_interval_is_added_only_when_none_was_given():
    ensure = loadgens.by_name("sysbench").ensure_progress
    argv = ["oltp_read_write", "--threads=8", "--time=300", "run"]
    assert ensure(argv) == (["--report-interval=1", *argv], ["--report-interval=1"])
    assert ensure(["--report-interval=5", *argv]) == (["--report-interval=5", *argv], [])
    assert ensure(["oltp_read_write", "--report-interval=0", "run"])[1] == []  # asked for none: left alone
    assert ensure(["oltp_read_write", "--tables=4", "prepare"])[1] == []  # prepare prints no progress
    assert ensure(["--version"])[1] == []


def test_argv_facts():
    facts = loadgens.by_name("sysbench").read_argv(["--report-interval=2", "/usr/share/sysbench/oltp_read_write.lua", "--tables=4",
                                        "--table-size=100000", "--num-threads=8", "--time=300", "--percentile=99", "run"])
    assert facts.error is None and facts.progress_interval == 2.0
    assert facts.info_labels == {"script": "oltp_read_write", "command": "run", "threads": "8", "duration_seconds": "300",
                                 "tables": "4", "table_size": "100000", "percentile": "99"}
    assert loadgens.by_name("sysbench").read_argv(["oltp_read_write", "run", "extra"]).error


def test_import_detects_sysbench_output_and_pgbench_stays_default():
    assert loadgens.for_output(fixture("plain.txt")) is loadgens.by_name("sysbench")
    assert loadgens.for_output(fixture("v05_oltp.txt")) is loadgens.by_name("sysbench")
    with open(os.path.join(FIXTURES, "pgbench", "pg15_plain.stderr"), "rb") as f:
        assert loadgens.for_output(f.read()) is loadgens.by_name("pgbench")


def test_one_sample_per_progress_line_at_sysbench_time_with_the_printed_values():
    data = fixture("p99.txt")
    model, samples = replay.replay_output(data, "r1", START)
    printed = progress_lines(data)
    tps = [s for s in samples if s.name == "benchmark_progress_tps"]
    assert [s.value for s in tps] == [p.tps for p in printed]
    assert [s.timestamp_ms for s in tps] == [int((START + p.time_s) * 1000) for p in printed]
    assert all(dict(s.labels)["tool"] == "sysbench" for s in samples)
    lat = [s for s in samples if s.name == "benchmark_progress_latency_quantile_seconds"]
    assert [s.value for s in lat] == [p.latency_s for p in printed] and dict(lat[0].labels)["quantile"] == "0.99"
    reads = [s.value for s in samples if s.name == "benchmark_progress_qps" and dict(s.labels)["type"] == "read"]
    assert reads == [p.read_qps for p in printed]
    assert model.progress_lines == len(printed) and model.unparsed_lines == 0


def test_summary_totals_end_the_counters():
    _, samples = replay.replay_output(fixture("errors.txt"), "r1", START)
    last = {}
    for s in samples:
        last[(s.name, s.labels)] = s.value
    by = {(n, dict(lab).get("type")): v for (n, lab), v in last.items()}
    assert by[("benchmark_transactions_total", None)] == 3790  # "transactions: 3790" in the summary
    assert by[("benchmark_errors_total", None)] == 3412
    assert by[("benchmark_queries_total", "read")] == 100828
    assert by[("benchmark_result_tps", None)] == 755.55
    assert by[("benchmark_reconnects_total", None)] == 0


def test_lock_stall_lines_read_zero_and_a_silent_stall_is_zeroed_by_tick():
    _, samples = replay.replay_output(fixture("lock.txt"), "r1", START)
    tps = [s.value for s in samples if s.name == "benchmark_progress_tps"]
    assert tps[3:7] == [0.0] * 4
    model = SysbenchRunModel("live", interval_s=1.0, start_epoch=START)
    model.feed_line(b"[ 1s ] thds: 2 tps: 100.00 qps: 2000.00 (r/w/o: 1400.00/400.00/200.00) lat (ms,95%): 2.00 err/s: 0.00 reconn/s: 0.00")
    zeros = model.tick(START + 3.0)
    assert [(s.name, s.value) for s in zeros[:2]] == [("benchmark_progress_tps", 0.0), ("benchmark_progress_stalled", 1.0)]


def test_malformed_lines_are_counted_never_fatal():
    model, _ = replay.replay_output(fixture("malformed.bin"), "r1", START)
    assert model.progress_lines == 2 and model.unparsed_lines == 2


def test_import_of_05_output():
    data = fixture("v05_oltp.txt")
    model, samples = replay.replay_output(data, "old", START)
    assert model.interval_s == 10.0 and model.progress_lines == 4
    tps = [(s.timestamp_ms, s.value) for s in samples if s.name == "benchmark_progress_tps"]
    assert tps[2] == (int((START + 30) * 1000), 0.0)
    assert not [s for s in samples if s.name == "benchmark_progress_qps" and dict(s.labels)["type"] == "other"]


def test_live_follower_gives_the_samples_of_an_import(tmp_path):
    """The exporter's follower on a finished `run` directory and `import` give the same series."""
    data = fixture("plain.txt")
    run = rundir.create_run_dir(str(tmp_path))
    run.write_meta({"run_id": run.run_id, "mode": "run", "tool": "sysbench", "state": rundir.FINISHED, "pid": None,
                    "clock_start_epoch": START, "progress_interval": 1.0, "ended_at": START + 5.5, "exit_code": 0,
                    "argv": ["sysbench", "--report-interval=1", "oltp_read_write", "--threads=2", "run"]})
    with open(run.file("stdout.log"), "wb") as f:
        f.write(data)
    follower = RunFollower(run)
    live = follower.poll(START + 6)
    assert follower.done and follower.model.tool == "sysbench"
    _, imported = replay.replay_output(data, run.run_id, START)
    strip = lambda samples, name: [(s.timestamp_ms, s.value) for s in samples if s.name == name and s.value == s.value]  # noqa: E731
    assert strip(live, "benchmark_progress_tps") == strip(imported, "benchmark_progress_tps")
    info = [s for s in live if s.name == "benchmark_run_info"][-1]
    assert dict(info.labels)["script"] == "oltp_read_write" and dict(info.labels)["threads"] == "2"
    assert [s.value for s in live if s.name == "benchmark_exit_code"] == [0.0]


def test_saved_import_records_its_tool(tmp_path):
    data = fixture("plain.txt")
    model, _ = replay.replay_output(data, "imp", START)
    run = importer.save_import(str(tmp_path), "imp", os.path.join(FIXTURES, "sysbench", "plain.txt"), data, START, model)
    meta = json.loads(open(run.file("meta.json")).read())
    assert meta["tool"] == "sysbench"
    assert replay.replay_run_dir(run.path, meta)[0].labels == (("run_id", "imp"), ("tool", "sysbench"))
