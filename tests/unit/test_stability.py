"""The stability profile of a run (issue 29): pure over its progress samples, on real saved outputs of
the wild corpus and on curves built to pin each rule (warm-up, wind-down, stalls, dips by cause)."""

from __future__ import annotations

import pytest

from benchwatch import stability
from benchwatch.record import outcome, replay
from tests.helpers.corpus import corpus

T0 = 1_700_000_000_000  # ms


def _tps(number: str) -> tuple[list[tuple[int, float]], float]:
    model, samples = replay.replay_output(corpus(number), "r", 1_700_000_000.0)
    return [(s.timestamp_ms, s.value) for s in samples if s.name == "benchmark_progress_tps"], model.interval_s or 1.0


def _curve(values: list[float], interval_s: float = 1.0) -> list[tuple[int, float]]:
    return [(T0 + int((i + 1) * interval_s * 1000), v) for i, v in enumerate(values)]


def test_the_schema_every_key_present_and_the_measures_named_in_it():
    p = stability.profile(_curve([100.0] * 30), 1.0)
    for key in ("warmup_s", "warmup", "interval_s", "intervals", "tps_median", "tps_cov", "tps_p1_ratio",
                "tps_p5_ratio", "tps_min_ratio", "dips", "dip_seconds", "stall_seconds", "lost_transactions",
                "lost_share", "dips_by_cause", "dips_by_cause_source", "latency_p99_s", "latency_p999_s",
                "latency_max_s", "latency_source", "steady_from", "steady_to"):
        assert key in p, key
    for name, (key, direction) in stability.MEASURES.items():
        assert key in p and direction in (-1, +1), name
    assert stability.MEASURES is outcome.STABILITY_MEASURES
    assert p["tps_cov"] == 0.0 and p["tps_min_ratio"] == 1.0 and p["dips"] == 0 and p["lost_share"] == 0.0
    assert p["dips_by_cause"] is None and p["dips_by_cause_source"] is None  # explain completes it later


def test_a_steady_twelve_hour_run():
    tps, interval = _tps("012")  # sysbench 1.0.17, 21,600 lines 2 s apart, no dip
    p = stability.profile(tps, interval)
    assert p["interval_s"] == 2.0 and p["intervals"] == 21600
    assert p["tps_median"] == pytest.approx(5375.5, abs=0.1)
    assert 0.005 < p["tps_cov"] < 0.02
    assert 0.95 < p["tps_p1_ratio"] <= p["tps_p5_ratio"] < 1.0
    assert 0.85 < p["tps_min_ratio"] < p["tps_p1_ratio"]
    assert p["dips"] == 0 and p["stall_seconds"] == 0.0 and p["lost_share"] == 0.0


def test_a_run_with_a_dip():
    tps, interval = _tps("015")  # pgbench 14, -P 10 for 600 s, one valley of two lines
    p = stability.profile(tps, interval)
    assert p["intervals"] == 60 and p["warmup_s"] == 0.0
    assert p["dips"] == 1 and p["dip_seconds"] == 20.0 and p["stall_seconds"] == 0.0
    assert p["lost_transactions"] == pytest.approx(2945.0, abs=1)
    assert 0.005 < p["lost_share"] < 0.015
    assert p["tps_min_ratio"] == pytest.approx(0.697, abs=0.001)


def test_a_stall_of_zero_tps_lines():
    tps, interval = _tps("027")  # pgbench 15+: six 0.0 tps lines while its clients waited on a lock
    p = stability.profile(tps, interval)
    assert p["stall_seconds"] == 6.0 and p["dips"] == 1 and p["tps_min_ratio"] == 0.0
    assert p["lost_share"] > 0.2


def test_the_interval_the_lines_came_at_not_the_first_gap():
    tps, interval = _tps("009")  # -P 1 whose first two lines are 0.5 s apart
    assert interval == 0.5
    p = stability.profile(tps, interval)
    assert p["interval_s"] == 1.0 and p["stall_seconds"] == 0.0


def test_warm_up_is_the_lines_before_tps_first_reaches_90_percent_of_the_median():
    values = [10.0, 40.0, 85.0, 95.0] + [100.0] * 36
    p = stability.profile(_curve(values), 1.0)
    assert p["warmup_s"] == 3.0 and p["intervals"] == 37
    assert p["warmup"].startswith("3 progress line(s) before TPS first reached 90%")
    assert p["tps_min_ratio"] == 0.95  # the ramp is not a valley


def test_warm_up_is_capped_at_a_fifth_of_the_run():
    values = [10.0] * 15 + [100.0] * 25  # a slow start: 15 of 40 lines, only 8 may go
    p = stability.profile(_curve(values), 1.0)
    assert p["warmup_s"] == 8.0 and p["intervals"] == 32
    assert p["tps_min_ratio"] == 0.1


def test_the_wind_down_is_a_few_trailing_lines():
    values = [100.0] * 38 + [40.0, 5.0]
    p = stability.profile(_curve(values), 1.0)
    assert p["intervals"] == 38 and p["tps_min_ratio"] == 1.0
    longer = stability.profile(_curve([100.0] * 36 + [40.0] * 4), 1.0)  # 4 low lines of 40: 2 may go
    assert longer["intervals"] == 38 and longer["tps_min_ratio"] == 0.4


def test_too_few_lines_no_measures_and_says_why():
    p = stability.profile(_curve([100.0, 100.0, 100.0]), 1.0)
    assert p["intervals"] == 0 and p["tps_cov"] is None and p["dips"] is None
    assert "too few progress lines" in p["warmup"]
    assert stability.profile([], 1.0)["tps_median"] is None


def test_a_silence_between_lines_is_a_stall_and_a_dip():
    values = [100.0] * 20
    samples = _curve(values)
    # 10 s without a line, then one line for those 10 s at the rate their transactions averaged
    samples += [(samples[-1][0] + 10_000, 10.0)] + [(samples[-1][0] + 10_000 + (i + 1) * 1000, 100.0) for i in range(20)]
    p = stability.profile(samples, 1.0)
    assert p["stall_seconds"] == 9.0  # all but the one interval the line itself stands for
    assert p["dips"] == 1 and p["dip_seconds"] == 10.0
    assert p["lost_transactions"] == pytest.approx(900.0)
    assert p["lost_share"] == pytest.approx(900.0 / (900.0 + 4000.0 + 100.0), rel=1e-4)


def test_staleness_markers_are_no_lines():
    samples = _curve([100.0] * 20)
    samples.insert(10, (samples[9][0] + 1, float("nan")))
    assert stability.profile(samples, 1.0)["intervals"] == 20


def test_a_dip_outside_the_steady_part_counts_for_its_overlap_only():
    p = stability.profile(_curve([100.0] * 30), 1.0, detect=lambda s, i: [_dip(T0 / 1000 - 5, T0 / 1000 + 5, 100.0)])
    assert p["dips"] == 1 and p["dip_seconds"] == 5.0 and p["lost_transactions"] == 50.0
    none = stability.profile(_curve([100.0] * 30), 1.0, detect=lambda s, i: [_dip(T0 / 1000 + 100, T0 / 1000 + 110, 9.0)])
    assert none["dips"] == 0 and none["lost_transactions"] == 0.0


def _dip(start: float, end: float, lost: float):
    from benchwatch.explain.dips import Dip
    return Dip(start=start, end=end, baseline_tps=100.0, min_tps=10.0, depth=0.9, level="deep",
               lost_transactions=lost, stall=False, lines=int(end - start))


def test_dips_by_cause_from_explains_dips_unnamed_ones_unexplained():
    p = stability.profile(_curve([100.0] * 60), 1.0)
    t = T0 / 1000
    explained = [
        {"cause": "checkpoint", "start": t + 10, "end": t + 14, "seconds": 4.0, "lost_transactions": 300.0},
        {"cause": "checkpoint", "start": t + 30, "end": t + 32, "seconds": 2.0, "lost_transactions": 100.0},
        {"cause": "no cause found", "start": t + 40, "end": t + 41, "seconds": 1.0, "lost_transactions": 50.0},
        {"cause": "autovacuum", "start": t + 500, "end": t + 501, "seconds": 1.0, "lost_transactions": 9.0},
    ]
    got = stability.by_cause(explained, p)
    assert list(got) == ["checkpoint", "unexplained"]  # most transactions lost first; outside the run: none
    assert got["checkpoint"] == {"dips": 2, "seconds": 6.0, "lost_transactions": 400.0}
    assert got["unexplained"] == {"dips": 1, "seconds": 1.0, "lost_transactions": 50.0}
    assert stability.by_cause(explained, stability.profile([], 1.0)) == {}


def test_latency_tail_from_buckets_and_its_source():
    buckets = [(0.001, 900.0), (0.01, 990.0), (0.1, 999.0), (1.0, 1000.0), (float("inf"), 1000.0)]
    tail = stability.latency_from_buckets(buckets, "pgbench -l log", max_s=0.7)
    assert tail is not None and tail.p99_s == pytest.approx(0.01) and tail.p999_s == pytest.approx(0.1)
    p = stability.profile(_curve([100.0] * 10), 1.0, latency=tail)
    assert (p["latency_p99_s"], p["latency_max_s"], p["latency_source"]) == (tail.p99_s, 0.7, "pgbench -l log")
    assert stability.latency_from_buckets([], "x") is None


def test_which_is_steadier_follows_each_measures_direction():
    assert stability.steadier("tps_cov", 0.05, 0.10) == -1
    assert stability.steadier("tps_p5_ratio", 0.7, 0.9) == 1
    assert stability.steadier("dip_seconds", 3.0, 3.0) == 0
    assert stability.steadier("latency_max", None, 1.0) == 0
    assert stability.measure({"tps_cov": 0.1}, "tps_cov") == 0.1
    assert stability.measure({"tps_cov": None}, "tps_cov") is None
    assert stability.measure(None, "dips") is None
