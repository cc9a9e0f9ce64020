"""Snapshots and comparisons of sysbench runs: their dashboard, summary and side-by-side rows."""

from __future__ import annotations

import os

from benchwatch.model.histogram import histogram_quantile
from benchwatch.query.series import Series
from benchwatch.record import replay
from benchwatch.share import collect, compare, rebuild
from benchwatch.share import summary as sm

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "sysbench")
START = 1_700_000_000.0


def sysbench_series(name: str = "lock.txt", run_id: str = "sb1") -> list[Series]:
    with open(os.path.join(FIXTURES, name), "rb") as f:
        _, samples = replay.replay_output(f.read(), run_id, START)
    return rebuild.samples_to_series(samples)


def pressure(target: str, on_from: float, on_to: float) -> Series:
    """A flushing-pressure state as the recording rule writes it: a sample a second, 1 while under pressure."""
    return Series("instance:mysql_innodb_flushing_pressure:bool", {"target": target, "host": "h"},
                  [(int((START + t) * 1000), 1.0 if on_from <= t <= on_to else 0.0) for t in range(0, 12)])


def test_a_snapshot_draws_the_dashboard_of_the_runs_tool():
    assert collect.dashboard_file({"tool": "sysbench"}) == "sysbench-innodb.json"
    assert collect.dashboard_file({"tool": "pgbench"}) == "pgbench-run.json"
    assert collect.dashboard_file({}) == "pgbench-run.json"  # runs recorded before "tool" existed
    assert collect.dashboard_for({"tool": "sysbench"})["uid"] == "benchwatch-sysbench-innodb"


def test_every_run_dashboard_has_the_host_panels_once():
    for meta in ({"tool": "sysbench"}, {"tool": "pgbench"}, {"tool": "sysbench", "engine": "postgresql"}):
        dash = collect.snapshot_dashboard(collect.dashboard_for(meta), ["local"])
        titles = [p["title"] for p in dash["panels"]]
        assert titles.count("Utilisation (%util)") == 1 and titles.count("Wait per request (r_await, w_await)") == 1, meta


def test_summary_of_a_sysbench_run_has_its_percentile_queries_and_pressure_regions():
    series = sysbench_series() + [pressure("local", 3, 6)]
    meta = {"tool": "sysbench", "clock_start_epoch": START, "ended_at": START + 11, "sysbench_version": "1.0.20",
            "settings": {"innodb_max_dirty_pages_pct": "90"}}
    s = sm.build(series, meta, "sb1", (START - 5, START + 16))
    assert s["run"]["tool"] == "sysbench"
    sb = s["sysbench"]
    assert sb["latency_quantile"] == "0.95" and sb["latency_quantile_s"] > 0 and sb["qps"] > 0
    assert sb["queries"]["read"] > 0 and sb["errors"] is not None and sb["reconnects"] is not None
    [region] = s["flushing_pressure"]
    assert region["target"] == "local" and region["start"] == START + 3 and region["end"] == START + 7
    titles = [t for t, _, _ in sm.tables(s)]
    assert titles == ["Throughput", "Latency", "InnoDB flushing pressure", "Dips and their causes", "Stability",
                      "Server settings"]
    md = sm.to_markdown(s)
    assert md.startswith("# sysbench run sb1") and "sysbench 1.0.20" in md and "p95 of the run" in md


def test_compare_of_sysbench_runs_shows_their_own_rows():
    meta = {"tool": "sysbench", "clock_start_epoch": START, "ended_at": START + 11}
    a = sm.build(sysbench_series() + [pressure("local", 3, 6)], meta, "sb1", (START - 5, START + 16))
    b = sm.build(sysbench_series(run_id="sb2"), meta, "sb2", (START - 5, START + 16))
    _, rows = compare.side_by_side(["A", "B"], [a, b])
    labels = [r[0] for r in rows]
    assert "TPS (sysbench summary)" in labels and "QPS (sysbench summary)" in labels
    assert "latency percentile (sysbench summary)" in labels and "InnoDB flushing pressure seconds" in labels
    assert "TPS (pgbench summary)" not in labels and "checkpoints" not in labels
    pressure_row = rows[labels.index("InnoDB flushing pressure seconds")]
    assert pressure_row[1:3] == ["4", "0"]


def test_histogram_table_becomes_a_cumulative_series_on_the_latency_ladder():
    with open(os.path.join(FIXTURES, "hist.txt"), "rb") as f:
        data = f.read()
    model, samples = replay.replay_output(data, "h1", START)
    events = {dict(s.labels)["le"]: s.value for s in samples if s.name == "benchmark_result_latency_histogram_events"}
    assert len(events) == 52
    total = sum(b.count for b in model.histogram)
    assert total > 0 and events["+Inf"] == total
    ladder = sorted((float(le), v) for le, v in events.items())
    assert all(a[1] <= b[1] for a, b in zip(ladder, ladder[1:]))  # cumulative
    # The run's own 95th percentile falls where the folded histogram puts it (within a bucket).
    p95 = histogram_quantile(0.95, ladder)
    printed = model.summary["latency_percentile_s"]
    assert printed / 1.5 <= p95 <= printed * 1.5, (p95, printed)
