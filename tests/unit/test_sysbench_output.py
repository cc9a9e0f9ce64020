"""The sysbench output parser on real sysbench 1.0.20 captures and hand-written 0.5 output."""

from __future__ import annotations

import math
import os
import re

import pytest

from benchwatch.loadgens.sysbench import output as sb

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "sysbench")


def events(name: str) -> list:
    parser = sb.SysbenchOutputParser()
    with open(os.path.join(FIXTURES, name), "rb") as f:
        lines = f.read().split(b"\n")
    out = []
    for line in lines:
        out.extend(parser.feed(line))
    return out + parser.flush()


def of(evts: list, kind: type) -> list:
    return [e for e in evts if isinstance(e, kind)]


def summary(evts: list) -> dict:
    return {e.key: e.value for e in of(evts, sb.Summary)}


def printed_lines(name: str, pattern: str) -> list[str]:
    with open(os.path.join(FIXTURES, name), encoding="utf-8", errors="replace") as f:
        return [line for line in f.read().splitlines() if re.match(pattern, line)]


@pytest.mark.parametrize("name", ["plain.txt", "p99.txt", "hist.txt", "errors.txt", "lock.txt"])
def test_every_progress_line_is_one_event_and_nothing_is_unparsed(name):
    evts = events(name)
    assert not of(evts, sb.Unparsed)
    progress = of(evts, sb.Progress)
    assert len(progress) == len(printed_lines(name, r"^\[ *\d+s \] thds:"))
    assert [p.time_s for p in progress] == [float(i) for i in range(1, len(progress) + 1)]


def test_plain_values_as_printed():
    first = of(events("plain.txt"), sb.Progress)[0]
    # [ 1s ] thds: 2 tps: 465.97 qps: 9342.44 (r/w/o: 6542.60/1865.89/933.94) lat (ms,95%): 18.28 err/s: 0.00 reconn/s: 0.00
    assert (first.time_s, first.threads, first.tps, first.qps) == (1.0, 2, 465.97, 9342.44)
    assert (first.read_qps, first.write_qps, first.other_qps) == (6542.60, 1865.89, 933.94)
    assert first.latency_s == pytest.approx(0.01828) and first.percentile == 95.0
    assert (first.errors_ps, first.reconnects_ps, first.version) == (0.0, 0.0, "1.0")


def test_summary_of_a_plain_run():
    s = summary(events("plain.txt"))
    assert s["sysbench_version"] == "1.0.20" and s["threads"] == 2 and s["report_interval_s"] == 1.0
    assert (s["queries_read"], s["queries_write"], s["queries_other"], s["queries_total"]) == (46522, 13292, 6646, 66460)
    assert (s["transactions"], s["tps"], s["queries"], s["qps"]) == (3323, 664.19, 66460, 13283.71)
    assert (s["ignored_errors"], s["reconnects"]) == (0, 0)
    assert (s["total_time_s"], s["events"]) == (5.0024, 3323)
    assert s["latency_min_s"] == pytest.approx(0.00063) and s["latency_avg_s"] == pytest.approx(0.00301)
    assert s["latency_max_s"] == pytest.approx(0.0679) and s["latency_sum_s"] == pytest.approx(9.99108)
    assert s["percentile"] == 95.0 and s["latency_percentile_s"] == pytest.approx(0.01145)
    assert (s["events_per_thread_avg"], s["events_per_thread_stddev"]) == (1661.5, 205.5)
    assert s["execution_time_per_thread_avg_s"] == 4.9955


def test_percentile_99_in_lines_and_summary():
    evts = events("p99.txt")
    assert {p.percentile for p in of(evts, sb.Progress)} == {99.0}
    assert of(evts, sb.Progress)[0].latency_s == pytest.approx(0.02111)
    assert summary(evts)["percentile"] == 99.0 and summary(evts)["latency_percentile_s"] == pytest.approx(0.01612)


def test_histogram_rows_sum_to_the_events():
    evts = events("hist.txt")
    buckets = of(evts, sb.HistogramBucket)
    assert len(buckets) == len(printed_lines("hist.txt", r"^ +\d+\.\d+ \|"))
    assert sum(b.count for b in buckets) == summary(evts)["events"]
    assert buckets[0] == sb.HistogramBucket(pytest.approx(0.00063), 1)
    assert buckets[-1].value_s == pytest.approx(0.075817)


def test_errors_per_second_and_ignored_errors():
    evts = events("errors.txt")
    progress = of(evts, sb.Progress)
    assert progress[0].errors_ps == 462.36 and progress[0].threads == 16
    assert summary(evts)["ignored_errors"] == 3412


def test_lock_stall_reads_zero():
    tps = [p.tps for p in of(events("lock.txt"), sb.Progress)]
    assert tps[3:7] == [0.0, 0.0, 0.0, 0.0]
    assert all(t > 0 for t in tps[:3] + tps[7:])


def test_rate_queue_lines_and_percentile_zero():
    evts = events("rate_nopercentile.txt")
    assert not of(evts, sb.Unparsed)
    assert [q.queue_length for q in of(evts, sb.Queue)] == [0, 0]
    progress = of(evts, sb.Progress)
    assert [p.latency_s for p in progress] == [None, None] and progress[0].percentile is None
    assert summary(evts)["rate_limit_tps"] == 200.0
    assert "latency_percentile_s" not in summary(evts)


def test_fatal_lines_are_errors():
    evts = events("badpw.txt")
    errors = of(evts, sb.ErrorLine)
    assert len(errors) == 7 and {e.severity for e in errors} == {"FATAL"}
    assert "Access denied" in errors[1].message
    assert not of(evts, sb.Unparsed)


def test_crash_mid_run_keeps_the_lines_before():
    evts = events("crash.txt")
    assert len(of(evts, sb.Progress)) == 2 and not of(evts, sb.Unparsed)


def test_prepare_output_is_understood():
    evts = events("prepare.txt")
    assert not of(evts, sb.Unparsed) and not of(evts, sb.Progress)


def test_sysbench_05_progress_and_summary():
    evts = events("v05_oltp.txt")
    assert not of(evts, sb.Unparsed)
    progress = of(evts, sb.Progress)
    assert [p.time_s for p in progress] == [10.0, 20.0, 30.0, 40.0]
    p = progress[0]
    assert (p.threads, p.tps, p.read_qps, p.write_qps, p.other_qps, p.version) == (8, 1021.93, 14306.98, 4087.72, None, "0.5")
    assert p.qps == pytest.approx(14306.98 + 4087.72)
    assert p.latency_s == pytest.approx(0.01235) and p.percentile == 95.0
    assert progress[1].errors_ps == 0.1 and progress[3].reconnects_ps == 0.2
    assert progress[2].tps == 0.0
    s = summary(evts)
    assert s["sysbench_version"] == "0.5" and s["report_interval_s"] == 10.0
    assert (s["transactions"], s["tps"], s["read_write_requests"], s["other_operations"]) == (30134, 753.32, 542417, 60268)
    assert (s["ignored_errors"], s["reconnects"], s["event_execution_time_s"]) == (1, 2, 319.8713)
    assert s["latency_avg_s"] == pytest.approx(0.01061) and s["latency_percentile_s"] == pytest.approx(0.01278)


def test_early_05_lines_and_malformed_ones_are_counted():
    evts = events("v05_early.txt")
    progress = of(evts, sb.Progress)
    assert [p.time_s for p in progress] == [1.0, 2.0, 4.0]
    assert progress[0].errors_ps is None and progress[1].percentile == 99.0
    unparsed = of(evts, sb.Unparsed)
    assert len(unparsed) == 2 and unparsed[0].text.startswith("[   3s]")


def test_malformed_and_non_utf8_lines_never_raise():
    evts = events("malformed.bin")
    assert [p.time_s for p in of(evts, sb.Progress)] == [1.0, 4.0]
    assert len(of(evts, sb.Unparsed)) == 2


@pytest.mark.parametrize("line", [b"[", b"[ 1s ]", b"\xff\xfe", b"    transactions: x", b"         min: 1.0",
                                  "[ 1s ] thds: 2 tps: nan qps: 1 (r/w/o: 1/0/0) lat (ms,95%): 1 err/s: 0 reconn/s: 0"])
def test_odd_lines(line):
    out = sb.SysbenchOutputParser().feed(line)
    assert len(out) == 1
    if isinstance(out[0], sb.Progress):
        assert math.isnan(out[0].tps)
    else:
        assert isinstance(out[0], sb.Unparsed)
