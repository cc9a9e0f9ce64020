"""The go-ycsb run model on real captures (tests/fixtures/goycsb/): one sample per report at its arrival, the
interval's rate from the difference of cumulative counts, per-operation series, the summary, stalls, judge."""

from __future__ import annotations

import math
import os

import pytest

from benchwatch import loadgens
from benchwatch.loadgens.goycsb import judge
from benchwatch.loadgens.goycsb import output as gy
from benchwatch.record import replay, rundir
from benchwatch.record.stream import ClockStamper, pump

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "goycsb")
G = loadgens.by_name("goycsb")


def capture(name: str) -> bytes:
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


def totals(data: bytes) -> list[int]:
    parser = gy.GoycsbOutputParser()
    return [e.count for line in data.split(b"\n") for e in parser.feed(line) if isinstance(e, gy.Current) and e.op == "TOTAL"]


def run_capture(name: str, with_arrivals: bool = True):
    data = capture(f"{name}.stdout")
    arrivals = [float(x) for x in capture(f"{name}.arrivals").split()]
    model = G.run_model("r1", {"progress_interval": 1.0, "clock_start_epoch": arrivals[0] - 1.0}, {})
    if with_arrivals:
        model.add_arrivals(arrivals)
    samples = replay.feed_lines(model, replay.split_lines(data), arrivals[-1] + 1)
    samples += replay.close(model, arrivals[-1] + 0.1, 0)
    return model, samples, data, arrivals


def series(samples, name: str, **labels: str) -> list[tuple[int, float]]:
    """A series' samples, without the staleness marker (NaN) that ends it with the run."""
    return [(s.timestamp_ms, s.value) for s in samples if s.name == name and not math.isnan(s.value)
            and all(dict(s.labels).get(k) == v for k, v in labels.items())]


@pytest.mark.parametrize("name", ["pg_run_workloada", "mariadb_run_workloadf"])
def test_each_report_is_one_sample_at_its_first_lines_arrival_with_the_intervals_rate(name):
    model, samples, data, arrivals = run_capture(name)
    counts = totals(data)
    tps = series(samples, "benchmark_progress_tps")
    assert [v for _, v in tps] == [float(b - a) for a, b in zip([0, *counts], counts, strict=False)]
    ops = len({line.split()[0] for line in data.split(b"\n") if gy.report_line(line)})  # lines per report
    firsts = [round(arrivals[i * ops] * 1000) for i in range(len(counts))]
    assert [t for t, _ in tps] == firsts
    # The exact count at the end: the summary's TOTAL (the last interval's operations came after the last report).
    assert series(samples, "benchmark_transactions_total")[-1][1] == model.summary["transactions"] > counts[-1]
    assert model.reports == len(counts) and model.unparsed_lines == 0


def test_per_operation_series_and_the_summary():
    model, samples, _, _ = run_capture("pg_run_workloada")
    read = series(samples, "goycsb_progress_ops", op="READ")
    assert [v for _, v in read][:3] == [240.0, 240.0, 253.0]  # 240, 480, 733 cumulative
    # The interval's mean from the differences of Avg x Count: (786 x 480 - 825 x 240) / 240 us.
    mean = series(samples, "goycsb_progress_latency_average_seconds", op="READ")
    assert mean[1][1] == pytest.approx((786 * 480 - 825 * 240) / 240 / 1e6)
    assert series(samples, "goycsb_latency_seconds", op="UPDATE", quantile="0.99")[0][1] == pytest.approx(19679e-6)
    assert model.summary["transactions"] == 3000 and model.summary["tps"] == 498.0
    assert model.summary["latency_p99_s"] == pytest.approx(16495e-6) and model.summary["duration_s"] == pytest.approx(6.051253221)
    assert series(samples, "benchmark_result_tps")[-1][1] == 498.0
    assert series(samples, "goycsb_operations_total", op="TOTAL")[-1][1] == 3000.0
    assert series(samples, "goycsb_result_latency_seconds", op="READ", quantile="1")[-1][1] == pytest.approx(23551e-6)
    assert "pg.password" not in model.properties and model.properties["command"] == "run"


def test_a_saved_output_without_arrivals_is_placed_one_interval_per_report():
    data = capture("pg_run_workloada.stdout")
    out = G.output_model(replay.split_lines(data), "r2", 1_764_000_000.0, {})
    samples = replay.feed_lines(out.model, replay.split_lines(data), 1_764_000_100.0)
    tps = series(samples, "benchmark_progress_tps")
    assert [t for t, _ in tps] == [1_764_000_000_000 + 1000 * k for k in range(1, 7)]
    assert out.last_progress_time == 6.0  # the interval it printed it was given: measurement.interval=1


def test_an_interval_without_operations_is_a_report_of_zero():
    lines = [b"READ   - Takes(s): %d.0, Count: %d, OPS: 1.0, Avg(us): 100, Min(us): 1, Max(us): 9, 50th(us): 1, 90th(us): 1, "
             b"95th(us): 1, 99th(us): 1, 99.9th(us): 1, 99.99th(us): 1" % (k, n) for k, n in ((1, 50), (2, 50), (3, 80))]
    lines = [line.replace(b"READ  ", b"TOTAL ") for line in lines]
    model = G.run_model("r3", {"progress_interval": 1.0, "clock_start_epoch": 1e9}, {})
    model.add_arrivals([1e9 + 1, 1e9 + 2, 1e9 + 3])
    samples = replay.feed_lines(model, lines, 1e9 + 10)
    samples += replay.close(model, 1e9 + 4, 0)
    assert [v for _, v in series(samples, "benchmark_progress_tps")] == [50.0, 0.0, 30.0]


def test_judge_reads_what_exit_code_0_hides():
    assert judge(["run", "mysql", "--output", "x"], capture("bad_flag.stdout"), capture("bad_flag.stderr")) \
        == "usage: unknown flag: --output"
    assert judge(["run", "postgresql"], capture("pg_run_workloada.stdout"), b"") is None
    failed = (b"**********************************************\nRun finished, takes 1s\n"
              b"READ_ERROR - Takes(s): 1.0, Count: 9, OPS: 9.0, Avg(us): 1, Min(us): 1, Max(us): 1, 50th(us): 1, "
              b"90th(us): 1, 95th(us): 1, 99th(us): 1, 99.9th(us): 1, 99.99th(us): 1\n")
    assert judge(["run", "postgresql"], failed, b"").startswith("every operation failed (9: READ_ERROR)")
    assert judge(["run", "postgresql"], b"", b"") == "it never printed Run finished"
    assert judge(["run", "postgresql", "-h"], b"", b"") is None


def test_the_wrapper_hides_the_echoed_password_and_stamps_each_report_line(tmp_path):
    run = rundir.create_run_dir(str(tmp_path))
    run.write_meta({"run_id": run.run_id})
    data = capture("mariadb_run_workloadf.stdout").replace(b'"mysql.password"="*****"', b'"mysql.password"="hunter2"')
    r, w = os.pipe()
    clock = iter(range(1000, 100000))
    stamper = ClockStamper(run, G.progress_elapsed, clock=lambda: next(clock) / 1000, interval=1.0,
                           arrivals=G.progress_line)
    os.write(w, data)
    os.close(w)
    with open(run.file("stdout.log"), "wb") as saved:
        pump(r, [], saved, stamper, G.output_redactor([]))
    stamper.close()
    os.close(r)
    saved_data = open(run.file("stdout.log"), "rb").read()
    assert b"hunter2" not in saved_data and saved_data == capture("mariadb_run_workloadf.stdout")
    assert len(open(run.file(replay.ARRIVALS)).read().split()) == len(capture("mariadb_run_workloadf.arrivals").split())
