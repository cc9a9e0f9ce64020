"""The go-tpc run model on real captures (tests/fixtures/gotpc/): one sample per report at its arrival, TPS as
the sum of the report's counts, per-type series, tpmC, stalls, and what the output says of success."""

from __future__ import annotations

import json
import os

import pytest

from benchwatch import loadgens
from benchwatch.loadgens.gotpc import judge
from benchwatch.loadgens.gotpc import output as gt
from benchwatch.loadgens.gotpc.model import GotpcRunModel
from benchwatch.record import replay, rundir
from benchwatch.record.stream import ClockStamper, pump

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "gotpc")
T0 = 1_764_000_000.0


def capture(name: str) -> bytes:
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


def reports(data: bytes) -> list[list[gt.Current]]:
    """The capture's reports (groups of [Current] lines), as go-tpc printed them."""
    parser = gt.GotpcOutputParser()
    groups: dict[int, list[gt.Current]] = {}
    for line in data.split(b"\n"):
        for e in parser.feed(line):
            if isinstance(e, gt.Current):
                groups.setdefault(e.tick, []).append(e)
    return [groups[k] for k in sorted(groups)]


def arrivals(data: bytes, interval: float) -> list[float]:
    """Arrival epochs as the wrapper would record them: report k at T0 + k x interval (+ a few µs per line)."""
    parser = gt.GotpcOutputParser()
    out = []
    for i, line in enumerate(data.split(b"\n")):
        if line.startswith(b"[Current] "):
            tick = next(e.tick for e in parser.feed(line) if isinstance(e, (gt.Current, gt.WaitTime)))
            out.append(T0 + tick * interval + 0.5 + i * 1e-5)
        else:
            parser.feed(line)
    return out


def run_capture(name: str, interval: float = 1.0, exit_code: int = 0):
    data = capture(name)
    model = loadgens.by_name("gotpc").run_model("r1", {"progress_interval": interval, "clock_start_epoch": T0}, {})
    model.add_arrivals(arrivals(data, interval))
    samples = replay.feed_lines(model, replay.split_lines(data), T0 + 1000)
    samples += replay.close(model, T0 + 100, exit_code)
    return model, samples, data


def values(samples, name: str, **labels):
    return [(s.timestamp_ms, s.value) for s in samples if s.name == name
            and all(dict(s.labels).get(k) == v for k, v in labels.items()) and s.value == s.value]


def test_one_tps_sample_per_report_at_its_arrival_sum_of_counts():
    _, samples, data = run_capture("run_i1_t2.stdout")
    groups = reports(data)
    tps = values(samples, "benchmark_progress_tps")
    assert len(tps) == len(groups) == 10
    assert [v for _, v in tps] == [float(sum(c.count for c in g if not c.error)) for g in groups]
    # the arrival of the report's first line, to the millisecond
    assert all(abs(t / 1000 - (T0 + k + 0.5)) < 0.001 for k, (t, _) in enumerate(tps, 1))


def test_transactions_counted_exactly_and_the_summary_at_the_end():
    _, samples, data = run_capture("run_i1_t2.stdout")
    counted = sum(c.count for g in reports(data) for c in g if not c.error)
    totals = values(samples, "benchmark_transactions_total")
    assert totals[len(reports(data)) - 1][1] == counted  # the counters after the last report
    assert totals[-1][1] == 2106 + 164 + 180 + 2064 + 175  # the [Summary] lines' committed counts
    assert values(samples, "gotpc_result_tpmc")[-1][1] == 12667.6
    assert values(samples, "gotpc_result_efficiency_ratio")[-1][1] == pytest.approx(985.042)
    assert values(samples, "gotpc_result_errors", txn="NEW_ORDER")[-1][1] == 2
    assert values(samples, "gotpc_errors_total", txn="NEW_ORDER")[-1][1] == 2
    assert values(samples, "gotpc_result_latency_seconds", txn="NEW_ORDER", quantile="0.99")
    assert values(samples, "benchmark_exit_code")[-1][1] == 0


def test_per_type_rate_latency_and_tpmc_beside_the_tps():
    _, samples, data = run_capture("run_i1_t2.stdout")
    first = {c.txn: c for c in reports(data)[0]}
    t0 = values(samples, "benchmark_progress_tps")[0][0]
    at = lambda name, **kw: [v for t, v in values(samples, name, **kw) if t == t0]  # noqa: E731
    for txn in ("NEW_ORDER", "PAYMENT", "ORDER_STATUS", "DELIVERY", "STOCK_LEVEL"):
        assert at("gotpc_progress_tps", txn=txn) == [float(first[txn].count)]
        assert at("gotpc_progress_latency_seconds", txn=txn, quantile="0.99") == [first[txn].p99_s]
    assert at("gotpc_progress_tpmc") == [first["NEW_ORDER"].count * 60.0]
    every = {s.labels for s in samples}
    assert all(dict(lbl)["tool"] == "gotpc" and dict(lbl)["run_id"] == "r1" for lbl in every)


def test_interval_2s_divides_counts_by_two():
    _, samples, data = run_capture("run_i2_t2.stdout", interval=2.0)
    groups = reports(data)
    tps = values(samples, "benchmark_progress_tps")
    assert len(tps) == len(groups)
    assert [v for _, v in tps] == [sum(c.count for c in g if not c.error) / 2.0 for g in groups]
    assert all(b - a == pytest.approx(2000, abs=5) for (a, _), (b, _) in zip(tps, tps[1:]))


def test_lockwait_reports_of_failures_only_read_zero_and_errors_are_counted():
    _, samples, data = run_capture("run_lockwait_ignore_error.stdout")
    tps = [v for _, v in values(samples, "benchmark_progress_tps")]
    assert len(tps) == len(reports(data)) and 0.0 in tps
    assert values(samples, "gotpc_progress_error_tps", txn="PAYMENT")
    assert values(samples, "benchmark_unparsed_lines_total")[-1][1] == 0
    assert judge(["tpcc", "run", "--ignore-error"], data, capture("run_lockwait_ignore_error.stderr")) is None


def test_a_silent_interval_is_a_stall_cleared_by_the_next_report():
    data = capture("run_i1_t2.stdout")
    lines = replay.split_lines(data)
    model = GotpcRunModel("r1", interval_s=1.0, start_epoch=T0)
    first, second = lines[:5], lines[5:10]
    model.add_arrivals([T0 + 1 + i * 1e-5 for i in range(5)] + [T0 + 5 + i * 1e-5 for i in range(5)])
    out = replay.feed_lines(model, first, None)
    out += model.tick(T0 + 1.3)  # the report is complete after its grace
    assert [v for _, v in values(out, "benchmark_progress_tps")] == [float(sum(reports(data)[0][i].count for i in range(5)))]
    assert model.tick(T0 + 2.4) == []  # within 1.5 intervals
    stall = model.tick(T0 + 2.6)
    assert values(stall, "benchmark_progress_tps") and values(stall, "benchmark_progress_tps")[0][1] == 0
    assert values(stall, "benchmark_progress_stalled")[0][1] == 1
    out = replay.feed_lines(model, second, None) + model.tick(T0 + 5.3)
    assert values(out, "benchmark_progress_stalled")[0][1] == 0
    assert values(out, "benchmark_progress_tps")[0][0] == int((T0 + 5) * 1000)


def test_sigint_killconn_and_sigterm_end_cleanly():
    for name in ("run_sigint.stdout", "run_killconn_ignore_error.stdout", "run_sigterm.stdout"):
        _, samples, data = run_capture(name)
        assert values(samples, "benchmark_progress_tps"), name
        assert values(samples, "benchmark_running")[-1][1] == 0
        stderr = capture(name.replace(".stdout", ".stderr")) if os.path.exists(os.path.join(FIXTURES, name.replace(".stdout", ".stderr"))) else b""
        assert judge(["tpcc", "run", "--ignore-error"], data, stderr) is None, name
    _, samples, _ = run_capture("run_killconn_ignore_error.stdout")
    assert sum(v for _, v in values(samples, "gotpc_errors_total", txn="NEW_ORDER")[-1:]) >= 1


@pytest.mark.parametrize("name,argv,reason", [
    ("run_badpw", ["tpcc", "-p", "x", "run"], "panic: failed to connect"),
    ("run_refused", ["tpcc", "-P", "1", "run"], "panic: failed to connect"),
    ("run_unknown_flag", ["tpcc", "run", "--output", "table"], "usage: unknown flag: --output"),
    ("run_interval_nounit", ["tpcc", "run", "--interval", "5"], "usage: invalid argument"),
    ("run_wait_sigterm_forced", ["tpcc", "run", "--wait"], "forced exit"),
    ("run_lockwait_threads_exit", ["tpcc", "run", "--threads", "2"], "thread(s) stopped on an error"),
])
def test_failures_go_tpc_exits_0_on_are_read_from_its_output(name, argv, reason):
    out = capture(f"{name}.stdout")
    err = capture(f"{name}.stderr") if os.path.exists(os.path.join(FIXTURES, f"{name}.stderr")) else b""
    failed = judge(argv, out, err)
    assert failed is not None and reason in failed, failed


def test_good_runs_and_other_commands_are_not_failures():
    assert judge(["tpcc", "run"], capture("run_i1_t2.stdout"), b"") is None
    assert judge(["tpcc", "prepare"], capture("prepare.stdout"), b"") is None
    assert judge(["tpcc", "cleanup"], capture("cleanup.stdout"), b"") is None
    assert judge(["version"], capture("version.stdout"), b"") is None
    assert judge(["tpcc", "run"], b"[Current] x\n", b"") == "it never printed Finished"


def test_the_wrapper_stamps_each_report_line_before_saving_it(tmp_path):
    run = rundir.create_run_dir(str(tmp_path))
    run.write_meta({"run_id": run.run_id})
    data = capture("run_i1_t2.stdout")
    r, w = os.pipe()
    clock = iter(range(1000, 100000))  # a millisecond a line: a report's lines arrive together
    generator = loadgens.by_name("gotpc")
    stamper = ClockStamper(run, generator.progress_elapsed, clock=lambda: next(clock) / 1000, interval=1.0,
                           arrivals=generator.progress_line)
    os.write(w, data)
    os.close(w)
    with open(run.file("stdout.log"), "wb") as saved:
        pump(r, [], saved, stamper)
    stamper.close()
    os.close(r)
    assert open(run.file("stdout.log"), "rb").read() == data  # byte for byte
    stamped = replay.read_arrivals(open(run.file(rundir.ARRIVALS), "rb").read())
    assert len(stamped) == sum(1 for line in data.split(b"\n") if line.startswith(b"[Current] "))
    assert json.load(open(run.file("meta.json")))["clock_start_epoch"] == stamped[0] - 1.0
    # ... and a run directory replays at those times
    meta = {**run.read_meta(), "tool": "gotpc", "progress_interval": 1.0, "argv": ["go-tpc", "tpcc", "run"],
            "ended_at": 99999.0, "exit_code": 0}
    samples = replay.replay_run_dir(run.path, meta)
    assert [t / 1000 for t, _ in values(samples, "benchmark_progress_tps")][:2] == [stamped[0], stamped[5]]


def test_import_of_a_saved_output_one_interval_per_report():
    data = capture("run_i1_t2.stdout")
    assert loadgens.for_output(data).name == "gotpc"
    _, samples = replay.replay_output(data, "imp", T0)
    tps = values(samples, "benchmark_progress_tps")
    assert [t for t, _ in tps] == [int((T0 + k) * 1000) for k in range(1, 11)]


def test_saved_argv_never_has_the_password():
    g = loadgens.by_name("gotpc")
    assert g.redact_argv(["tpcc", "-H", "127.0.0.1", "-p", "s3cret", "run"]) == ["tpcc", "-H", "127.0.0.1", "-p", "*****", "run"]
    assert "s3cret" not in repr(g.read_argv(["tpcc", "--password=s3cret", "run"]))
    facts = g.read_argv(["--interval", "1s", "tpcc", "--warehouses", "2", "-T", "4", "run", "--time", "30s"])
    assert facts.progress_interval == 1.0 and facts.engine == "mysql"
    assert facts.info_labels["warehouses"] == "2" and facts.info_labels["threads"] == "4"
    assert g.ensure_progress(["tpcc", "run"]) == (["--interval", "1s", "tpcc", "run"], ["--interval", "1s"])


def test_go_tpc_is_found_where_go_install_puts_it(tmp_path):
    g = loadgens.by_name("gotpc")
    binary = tmp_path / "gopath" / "bin" / "go-tpc"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"\x7fELF...\npath\tgithub.com/pingcap/go-tpc/cmd/go-tpc\nmod\tgithub.com/pingcap/go-tpc\tv1.0.7\th1:x\n")
    binary.chmod(0o755)
    env = {"HOME": str(tmp_path / "home"), "GOPATH": str(tmp_path / "gopath")}
    assert g.locate("go-tpc", env) == str(binary)
    assert g.locate("go-tpc", {"HOME": str(tmp_path / "home")}) is None
    assert g.binary_version(str(binary)) == "1.0.7"


def test_users_of_runs_whose_wrapper_is_gone_are_stale():
    from benchwatch.loadgens.gotpc.connect import stale_users

    alive = f"bw_gotpc_{os.getpid()}_0a1b2c3d"
    gone = "bw_gotpc_999999999_0a1b2c3d"
    assert stale_users(f"{alive}\n{gone}\nbench\nbw_gotpc_x\n") == [gone]


def test_a_report_whose_types_sort_after_the_previous_ones_is_its_own_when_it_arrived_later():
    """During a lock one report may hold only DELIVERY and NEW_ORDER and the next only PAYMENT: by sort
    order alone they read as one report. Read in one pass (an exporter behind by a second), the arrivals
    still tell them apart (test_gotpc_mariadb saw 598 = 581 + 17 stored for two printed reports)."""
    line = ("[Current] {} - Takes(s): 1.0, Count: {}, TPM: 600.0, Sum(ms): 10.0, Avg(ms): 1.0, 50th(ms): 1.0, "
            "90th(ms): 1.0, 95th(ms): 1.0, 99th(ms): 1.0, 99.9th(ms): 1.0, Max(ms): 1.0")
    lines = [line.format("DELIVERY", 3).encode(), line.format("NEW_ORDER", 14).encode(), line.format("PAYMENT", 17).encode()]
    model = GotpcRunModel("r1", interval_s=1.0, start_epoch=T0)
    model.add_arrivals([T0 + 1, T0 + 1.00001, T0 + 2])
    out = replay.feed_lines(model, lines, None) + replay.close(model, T0 + 3, 0)
    assert values(out, "benchmark_progress_tps") == [(int((T0 + 1) * 1000), 17.0), (int((T0 + 2) * 1000), 17.0)]
