"""sysbench 0.4 and both 0.5 shapes read from real saved outputs (issue 20), summaries included."""

from __future__ import annotations

import pytest

from benchwatch.loadgens.sysbench import output as sb
from benchwatch.record import replay
from tests.helpers.corpus import corpus

START = 1_452_074_400.0


def only_run(data: bytes):
    (run,), _ = replay.replay_saved(data, lambda k, s: f"r{k}", START)
    return run


def last(samples, name, **labels):
    found = [s for s in samples if s.name == name and all(dict(s.labels).get(k) == v for k, v in labels.items())]
    assert found, name
    return found[-1].value


def test_early_05_shape_without_comma_before_response_time():
    line = "[1000s] threads: 64, tps: 4327.69, reads/s: 60587.72, writes/s: 17334.58 response time: 161.35ms (99%)"
    (event,) = sb.SysbenchOutputParser().feed(line)
    assert isinstance(event, sb.Progress)
    assert (event.time_s, event.threads, event.tps, event.read_qps, event.write_qps) == (1000.0, 64, 4327.69, 60587.72, 17334.58)
    assert event.latency_s == pytest.approx(0.16135)
    assert event.percentile == 99.0
    assert event.errors_ps is None


@pytest.mark.parametrize("number, lines, interval", [("001", 360, 10), ("002", 60, 10)])
def test_every_early_05_progress_line_is_one_sample_at_start_plus_elapsed(number, lines, interval):
    run = only_run(corpus(number))
    times = [s.timestamp_ms for s in run.samples if s.name == "benchmark_progress_tps"]
    assert times == [int((START + interval * i) * 1000) for i in range(1, lines + 1)]
    assert run.unread == []
    first = {"001": 5285.34, "002": 4608.49}[number]
    assert next(s.value for s in run.samples if s.name == "benchmark_progress_tps") == first


def test_05_summary_and_its_99th_percentile():
    run = only_run(corpus("001"))
    assert last(run.samples, "benchmark_result_tps") == 2829.46
    assert last(run.samples, "benchmark_result_latency_seconds") == pytest.approx(0.02262)
    assert last(run.samples, "benchmark_result_latency_quantile_seconds", quantile="0.99") == pytest.approx(0.15914)
    assert run.model.summary["deadlocks"] == 8


def test_04_per_request_statistics_block():
    run = only_run(corpus("005"))
    assert run.unread == []
    assert last(run.samples, "benchmark_result_tps") == 28169.34
    assert last(run.samples, "benchmark_result_latency_seconds") == pytest.approx(0.00454)
    assert last(run.samples, "benchmark_result_latency_min_seconds") == pytest.approx(0.00146)
    assert last(run.samples, "benchmark_result_latency_max_seconds") == pytest.approx(0.03849)
    assert last(run.samples, "benchmark_result_latency_quantile_seconds", quantile="0.95") == pytest.approx(0.00923)
    assert run.model.info_labels["threads"] == "128"


def test_05_with_comma_and_deadlocks_line_read_whole():
    run = only_run(corpus("004"))
    assert run.unread == []
    assert run.model.progress_lines == 60
