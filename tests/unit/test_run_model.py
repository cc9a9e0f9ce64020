"""The run model on outputs captured from real runs, and hand-written older formats."""

from __future__ import annotations

import math
import os
import re

import pytest

from benchwatch.loadgens.pgbench.model import PgbenchRunModel as RunModel
from benchwatch.record import importer, replay

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "pgbench")
START = 1_700_000_000.0


def lines(name: str) -> list[bytes]:
    out = []
    for ext in (".stderr", ".stdout"):
        with open(os.path.join(FIXTURES, name + ext), "rb") as f:
            out.extend(f.read().splitlines())
    return out


def feed_all(model: RunModel, name: str) -> list:
    samples = []
    for line in lines(name):
        samples.extend(model.feed_line(line))
    return samples


def series(samples, name, **labels):
    return [(s.timestamp_ms, s.value) for s in samples
            if s.name == name and all(dict(s.labels).get(k) == v for k, v in labels.items())]


def test_one_sample_per_progress_line_at_start_plus_elapsed():
    model = RunModel("r1", start_epoch=START)
    samples = feed_all(model, "pg15_plain")
    samples += model.finish(START + 60, 0)
    printed = [l for l in lines("pg15_plain") if l.startswith(b"progress: ")]
    tps = series(samples, "benchmark_progress_tps")
    assert len(tps) == len(printed)
    for (ts, value), line in zip(tps, printed):
        elapsed = float(line.split()[1])
        assert ts == round((START + elapsed) * 1000)
        assert value == float(line.split()[3])


def test_timestamps_strictly_increase_through_a_catch_up_burst():
    """9.4 prints several lines with the same elapsed time after a stall."""
    model = RunModel("r94", start_epoch=START)
    samples = feed_all(model, "pg94_report_stall")
    tps = series(samples, "benchmark_progress_tps")
    stamps = [ts for ts, _ in tps]
    assert stamps == sorted(set(stamps)), "not strictly increasing"
    assert len(tps) == 8
    # The three 5.2 s lines: the first at pgbench's time, the repeats 1 ms apart.
    at_5_2 = round((START + 5.2) * 1000)
    assert stamps[2:5] == [at_5_2, at_5_2 + 1, at_5_2 + 2]
    # -nan latency of an interval without transactions is kept as NaN, not dropped.
    latency = series(samples, "benchmark_progress_latency_seconds")
    assert math.isnan(latency[3][1])


def test_catch_up_lines_do_not_double_count():
    model = RunModel("r94", start_epoch=START)
    samples = feed_all(model, "pg94_report_stall")
    total = series(samples, "benchmark_transactions_total")
    by_ts = dict(total)
    at_5_2 = round((START + 5.2) * 1000)
    # 1512.3 x 1 + 1498.0 x 1 + 146.5 x 3.2; the repeats at 5.2 s cover no time and add nothing.
    expected = round(1512.3) + round(1498.0) + round(146.5 * 3.2)
    assert by_ts[at_5_2] == expected
    assert by_ts[at_5_2 + 2] == expected


def test_aborted_clients_are_counted():
    model = RunModel("r94", start_epoch=START)
    samples = feed_all(model, "pg94_report_stall")
    assert series(samples, "benchmark_aborted_clients_total")[-1][1] == 1


def test_stall_writes_zero_once_per_interval_then_recovers():
    model = RunModel("rs", interval_s=1.0)
    assert model.feed_line(b"progress: 1.0 s, 100.0 tps, lat 1.000 ms stddev 0.100, 0 failed", START + 1.0)
    assert model.start_epoch == START
    assert model.tick(START + 2.4) == []            # within 1.5 intervals: no stall yet
    # The zero goes where the stall became due (1.5 intervals after the line), not at the tick's now.
    stall = model.tick(START + 2.6)
    assert series(stall, "benchmark_progress_tps") == [(round((START + 2.5) * 1000), 0.0)]
    assert series(stall, "benchmark_progress_stalled") == [(round((START + 2.5) * 1000), 1.0)]
    assert model.tick(START + 3.0) == []            # at most one zero per interval
    assert series(model.tick(START + 3.7), "benchmark_progress_tps") == [(round((START + 3.5) * 1000), 0.0)]
    # A catch-up line covering 4 s arrives: its own time, its own value, counted once.
    after = model.feed_line(b"progress: 5.0 s, 80.0 tps, lat 9.000 ms stddev 0.100, 0 failed", START + 5.0)
    assert series(after, "benchmark_progress_tps") == [(round((START + 5.0) * 1000), 80.0)]
    assert series(after, "benchmark_progress_stalled")[-1][1] == 0.0
    assert series(after, "benchmark_transactions_total")[-1][1] == 100 + 80 * 4


def test_stall_zero_never_precedes_an_earlier_line():
    """A line timestamped before the last stall sample is moved after it, keeping the series ordered."""
    model = RunModel("ro", interval_s=1.0, start_epoch=START)
    model.feed_line(b"progress: 1.0 s, 100.0 tps, lat 1.000 ms stddev 0.100", None)
    stall = model.tick(START + 3.0)
    late = model.feed_line(b"progress: 2.4 s, 50.0 tps, lat 1.000 ms stddev 0.100", None)
    assert series(late, "benchmark_progress_tps")[0][0] == series(stall, "benchmark_progress_tps")[0][0] + 1


def test_a_line_read_after_a_tick_that_came_after_its_arrival_keeps_its_time():
    """The follower ticks at 3.03 s before reading a line that arrived at 3.0 s: the zero is placed where the
    stall became due (2.5 s), so the line keeps its own time (test_gotpc_mariadb saw a report 30 ms late)."""
    model = RunModel("rt", interval_s=1.0, start_epoch=START)
    model.feed_line(b"progress: 1.0 s, 100.0 tps, lat 1.000 ms stddev 0.100", None)
    stall = model.tick(START + 3.03)
    assert series(stall, "benchmark_progress_tps") == [(round((START + 2.5) * 1000), 0.0)]
    line = model.feed_line(b"progress: 3.0 s, 50.0 tps, lat 1.000 ms stddev 0.100", None)
    assert series(line, "benchmark_progress_tps") == [(round((START + 3.0) * 1000), 50.0)]


def test_a_follower_far_behind_writes_its_zero_at_most_one_interval_back():
    model = RunModel("rb", interval_s=1.0, start_epoch=START)
    model.feed_line(b"progress: 1.0 s, 100.0 tps, lat 1.000 ms stddev 0.100", None)
    stall = model.tick(START + 60.0)  # the exporter was stopped for a minute
    assert series(stall, "benchmark_progress_tps") == [(round((START + 59.0) * 1000), 0.0)]


def test_finished_run_is_not_stalled():
    model = RunModel("rf", interval_s=1.0, start_epoch=START)
    model.feed_line(b"progress: 1.0 s, 100.0 tps, lat 1.000 ms stddev 0.100", None)
    model.finish(START + 1.5, 0)
    assert model.tick(START + 10) == []


def test_summary_and_statement_latencies_at_the_end():
    model = RunModel("rr", start_epoch=START, info_labels={"script": "tpcb-like"})
    feed_all(model, "pg15_report")
    end = model.finish(START + 100, 0)
    summary_tps = [s for s in end if s.name == "benchmark_result_tps"]
    assert len(summary_tps) == 1 and summary_tps[0].value > 0
    rows = [s for s in end if s.name == "pgbench_statement_latency_seconds"]
    assert len(rows) == 11
    assert {dict(s.labels)["script"] for s in rows} == {"tpcb-like"}
    assert series(end, "benchmark_running") == [(end[0].timestamp_ms, 0.0)]
    processed = model.summary["transactions_processed"]
    assert series(end, "benchmark_transactions_total")[-1][1] == processed


def test_multi_script_statements_are_labelled_by_script():
    model = RunModel("rm", start_epoch=START)
    feed_all(model, "pg15_multi_script")
    end = model.finish(START + 100, 0)
    scripts = {dict(s.labels)["script"] for s in end if s.name == "pgbench_statement_latency_seconds"}
    assert scripts == {"tpcb-like", "select-only"}


def test_progress_timestamp_lines_are_their_own_clock():
    model = RunModel("rt")
    samples = feed_all(model, "pg15_progress_timestamp")
    first = series(samples, "benchmark_progress_tps")[0]
    assert first[0] == 1795370176604


def test_malformed_and_non_utf8_lines_are_counted_never_fatal():
    model = RunModel("rb", start_epoch=START)
    with open(os.path.join(FIXTURES, "malformed.bin"), "rb") as f:
        data = f.read()
    for line in data.split(b"\n"):
        model.feed_line(line)
    model.finish(START + 10, None)
    assert model._counters["benchmark_unparsed_lines_total"] > 0


def test_import_fills_run_info_from_the_summary():
    data = b"\n".join(lines("pg15_prepared")) + b"\n"
    _model, samples = replay.replay_output(data, "imp", START)
    info = [dict(s.labels) for s in samples if s.name == "benchmark_run_info"]
    assert info and info[0]["protocol"] == "prepared" and info[0]["script"] == "tpcb-like"
    assert info[0]["clients"] == "4" and info[0]["scale"] == "2"


@pytest.mark.parametrize("text, expected", [
    ("2016-01-06T10:00:00Z", 1452074400.0),
    ("2016-01-06T10:00:00+01:00", 1452070800.0),
    ("2016-01-06 10:00:00", 1452074400.0),
    ("1452074400", 1452074400.0),
])
def test_import_start_times(text, expected):
    assert importer.parse_time(text) == expected


def test_end_markers_are_staleness_markers_not_values():
    from benchwatch.model.samples import is_stale_marker
    model = RunModel("re", start_epoch=START)
    feed_all(model, "pg15_plain")
    finished = model.finish(START + 60, 0)
    markers = model.end_markers()
    assert {s.name for s in markers} >= {"benchmark_progress_tps", "benchmark_progress_latency_seconds"}
    assert all(is_stale_marker(s.value) for s in markers)
    assert not any(is_stale_marker(s.value) for s in finished)
    assert not is_stale_marker(float("nan"))  # -nan latency from old pgbench is a value


def marker_times(markers) -> set[int]:
    return {s.timestamp_ms for s in markers}


@pytest.mark.parametrize("end_after_last_line", [0.05, 55.0])
def test_end_markers_one_interval_after_the_last_line(end_after_last_line):
    # As Prometheus's scrape staleness: a 1 s step query must still find the last line
    # up to the next interval, whenever pgbench ended (this start is off the step grid).
    start = START + 0.604
    model = RunModel("rm", start_epoch=start, interval_s=1.0)
    samples = feed_all(model, "pg15_stall")
    last_line = series(samples, "benchmark_progress_tps")[-1][0]
    assert last_line == round((start + 8) * 1000)
    model.finish(start + 8 + end_after_last_line, 0)
    clock = model.last_ts_ms
    markers = model.end_markers()
    assert marker_times(markers) == {last_line + 1000}
    assert {s.name for s in markers} == {"benchmark_progress_tps", "benchmark_progress_latency_seconds",
                                         "pgbench_progress_latency_stddev_seconds"}
    assert model.last_ts_ms == clock  # the run's end (an import's saved ended_at) stays where it was
    assert [(s.name, s.labels, s.timestamp_ms) for s in model.end_markers()] == [(s.name, s.labels, s.timestamp_ms) for s in markers]


def test_end_markers_of_an_import_follow_the_learned_interval():
    # The capture with its lines 10 s apart (-P 10), which an import learns from their spacing.
    data = re.sub(rb"progress: (\d+)\.0 s", lambda m: b"progress: %d.0 s" % (int(m.group(1)) * 10),
                  b"\n".join(lines("pg15_stall")))
    model, samples = replay.replay_output(data, "ri", START)
    assert model.interval_s == 10.0
    last_line = series(samples, "benchmark_progress_tps")[-1][0]
    assert marker_times(model.end_markers()) == {last_line + 10_000}


def test_end_markers_after_a_stall_follow_its_last_zero():
    model = RunModel("rs", start_epoch=START, interval_s=1.0)
    model.feed_line(b"progress: 1.0 s, 100.0 tps, lat 1.000 ms stddev 0.100, 0 failed")
    zero = series(model.tick(START + 2.6), "benchmark_progress_tps")
    assert zero == [(round((START + 2.5) * 1000), 0.0)]
    finished = model.finish(START + 3.0, 1)
    stalled_end = series(finished, "benchmark_progress_stalled")
    assert stalled_end == [(round((START + 3.0) * 1000), 0.0)]
    # One time for all the run's markers, after each curve's own last sample.
    assert marker_times(model.end_markers()) == {stalled_end[0][0] + 1000}


@pytest.mark.parametrize("last_line, exit_code, aborted, early", [
    (20, 0, 0, 0.0),      # ran its -T 20
    (19, None, 0, 0.0),   # pgbench's last -P 1 line may come a second before the end
    (10, None, 0, 1.0),   # attached output that stopped at 10 s of 20: short, with no exit code to say so
    (20, 2, 0, 1.0),      # a non-zero exit code
    (20, 0, 1, 1.0),      # a client aborted
])
def test_a_run_says_at_its_end_whether_it_ended_early(last_line, exit_code, aborted, early):
    model = RunModel("r", info_labels={"duration_seconds": "20"}, interval_s=1.0, start_epoch=START)
    for t in range(1, last_line + 1):
        model.feed_line(f"progress: {t}.0 s, 100.0 tps, lat 1.000 ms stddev 0.100".encode())
    if aborted:
        model.feed_line(b"client 0 script 0 aborted in command 4 query 0: ERROR:  server closed the connection")
    out = model.finish(START + last_line + 0.5, exit_code)
    (flag,) = [s.value for s in out if s.name == "benchmark_run_ended_early"]
    assert flag == early
