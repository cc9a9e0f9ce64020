"""The go-tpc output parser on real go-tpc v1.0.7 captures (tests/fixtures/gotpc/README.md)."""

from __future__ import annotations

import glob
import math
import os
import random
import re

import pytest

from benchwatch.loadgens.gotpc import output as gt

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(TESTS, "fixtures", "gotpc")
GOTPC_FILES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(FIXTURES, "*.std*")))
RUNS = ["run_i1_t2", "run_i2_t2", "run_i1_t4", "run_sigint", "run_sigterm", "run_lockwait_ignore_error",
        "run_lockwait_threads_exit", "run_killconn_ignore_error", "run_wait", "run_wait_sigterm_forced"]


def raw(name: str) -> bytes:
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


def events(name: str) -> list:
    parser = gt.GotpcOutputParser()
    out = []
    for line in raw(name).split(b"\n"):
        out.extend(parser.feed(line))
    return out + parser.flush()


def of(evts: list, kind: type) -> list:
    return [e for e in evts if isinstance(e, kind)]


def printed(name: str, pattern: str) -> list[str]:
    return [l for l in raw(name).decode().split("\n") if re.match(pattern, l)]


def by_op(evts: list, kind: type) -> dict:
    return {e.op: e for e in of(evts, kind)}


def test_fixtures_are_there():
    assert len(GOTPC_FILES) >= 25
    assert {"prepare.stdout", "run_i1_t2.stdout", "run_sigint.stdout", "run_refused.stderr", "run_badpw.stderr",
            "version.stdout"} <= set(GOTPC_FILES)


@pytest.mark.parametrize("name", GOTPC_FILES)
def test_every_line_of_every_capture_is_understood(name):
    evts = events(name)
    assert not of(evts, gt.Unparsed)
    assert len(evts) == raw(name).count(b"\n") + 1  # one event per line, the empty tail included


@pytest.mark.parametrize("name", [r + ".stdout" for r in RUNS])
def test_every_report_line_is_one_event(name):
    evts = events(name)
    assert len(of(evts, gt.Current)) == len(printed(name, r"^\[Current\] [A-Z_]+ +- Takes"))
    assert len(of(evts, gt.Summary)) == len(printed(name, r"^\[Summary\] [A-Z_]+ +- Takes"))
    assert len(of(evts, gt.WaitTime)) == len(printed(name, r"^\[(Current|Summary)\] (KEYING|THINKING)TIME-"))
    for e in of(evts, gt.Current) + of(evts, gt.Summary):
        assert e.error == e.op.endswith("_ERR") and e.txn == e.op.removesuffix("_ERR")
        assert e.txn in ("DELIVERY", "NEW_ORDER", "ORDER_STATUS", "PAYMENT", "STOCK_LEVEL")
        assert e.count > 0 and e.takes_s >= 0
        assert e.p50_s <= e.p90_s <= e.p95_s <= e.p99_s <= e.p999_s <= e.max_s


def test_first_report_line_values_as_printed():
    first = of(events("run_i1_t2.stdout"), gt.Current)[0]
    # [Current] DELIVERY - Takes(s): 0.8, Count: 18, TPM: 1292.5, Sum(ms): 175.0, Avg(ms): 9.8, 50th(ms): 10.0,
    # 90th(ms): 11.0, 95th(ms): 12.1, 99th(ms): 15.2, 99.9th(ms): 15.2, Max(ms): 15.2
    assert (first.op, first.txn, first.error, first.tick) == ("DELIVERY", "DELIVERY", False, 1)
    assert (first.takes_s, first.count, first.tpm) == (0.8, 18, 1292.5)
    assert first.sum_s == pytest.approx(0.175) and first.avg_s == pytest.approx(0.0098)
    assert (first.p50_s, first.p90_s, first.p95_s) == pytest.approx((0.010, 0.011, 0.0121))
    assert (first.p99_s, first.p999_s, first.max_s) == pytest.approx((0.0152, 0.0152, 0.0152))


@pytest.mark.parametrize("name,ticks,interval", [("run_i1_t2.stdout", 10, 1.0), ("run_i2_t2.stdout", 5, 2.0),
                                                 ("run_i1_t4.stdout", 9, 1.0), ("run_sigint.stdout", 5, 1.0),
                                                 ("run_lockwait_ignore_error.stdout", 8, 1.0),
                                                 ("run_killconn_ignore_error.stdout", 5, 1.0)])
def test_report_groups_are_numbered_one_per_interval(name, ticks, interval):
    current = of(events(name), gt.Current)
    assert sorted({c.tick for c in current}) == list(range(1, ticks + 1))
    for tick in range(1, ticks + 1):
        group = [c for c in current if c.tick == tick]
        assert [c.op.removesuffix("_ERR") for c in group] == sorted(c.op.removesuffix("_ERR") for c in group)
        assert "NEW_ORDER" in [c.txn for c in group]
        # Takes(s) counts from each type's first transaction in the interval: never more than the interval
        assert all(c.takes_s <= interval + 0.1 for c in group)


def test_tpm_is_count_over_takes():
    for c in of(events("run_i1_t2.stdout"), gt.Current):
        if c.takes_s >= 0.5:
            assert c.tpm == pytest.approx(c.count / c.takes_s * 60, rel=0.07)  # Takes is rounded to 0.1 s


def test_summary_and_tpmc_of_a_plain_run():
    evts = events("run_i1_t2.stdout")
    assert of(evts, gt.Finished) == [gt.Finished("")]
    s = by_op(evts, gt.Summary)
    assert list(s) == ["DELIVERY", "NEW_ORDER", "NEW_ORDER_ERR", "ORDER_STATUS", "PAYMENT", "STOCK_LEVEL"]
    no = s["NEW_ORDER"]
    # [Summary] NEW_ORDER - Takes(s): 10.0, Count: 2106, TPM: 12667.7, Sum(ms): 11280.1, Avg(ms): 5.4, 50th(ms): 5.2,
    # 90th(ms): 7.9, 95th(ms): 9.4, 99th(ms): 12.6, 99.9th(ms): 15.7, Max(ms): 15.7
    assert (no.takes_s, no.count, no.tpm) == (10.0, 2106, 12667.7)
    assert no.sum_s == pytest.approx(11.2801) and no.p99_s == pytest.approx(0.0126) and no.max_s == pytest.approx(0.0157)
    # the transactions in flight when --time ran out fail with the cancelled context: counted, never printed
    assert s["NEW_ORDER_ERR"].count == 2 and s["NEW_ORDER_ERR"].error and not of(evts, gt.ErrorLine)
    (tpmc,) = of(evts, gt.TpmC)
    assert (tpmc.tpmc, tpmc.efficiency_pct) == (12667.6, 98504.2)
    assert tpmc.efficiency_pct == pytest.approx(100 * tpmc.tpmc / 12.86, abs=0.5)  # 1 warehouse; both rounded
    assert tpmc.tpmc == pytest.approx(no.tpm, abs=0.2)  # NEW_ORDER's summary TPM, read a moment later
    # the summary counts since the start: the reports' counts add up to a little less (the last part interval)
    reported = sum(c.count for c in of(evts, gt.Current) if c.op == "NEW_ORDER")
    assert 0.85 * no.count <= reported <= no.count


def test_error_reports_and_error_lines_under_lock_waits():
    evts = events("run_lockwait_ignore_error.stdout")
    errs = [c for c in of(evts, gt.Current) if c.error]
    assert [(c.op, c.count) for c in errs] == [("NEW_ORDER_ERR", 1), ("PAYMENT_ERR", 3), ("NEW_ORDER_ERR", 1),
                                              ("PAYMENT_ERR", 3), ("PAYMENT_ERR", 1)]
    assert errs[0].txn == "NEW_ORDER" and errs[0].max_s == pytest.approx(1.0066)  # innodb_lock_wait_timeout=1
    # while the lock is held no NEW_ORDER commits: its line is missing from those groups, not zero
    ops = {t: [c.op for c in of(evts, gt.Current) if c.tick == t] for t in range(1, 9)}
    assert ops[5] == ["DELIVERY", "NEW_ORDER_ERR", "PAYMENT_ERR"] and ops[6] == ["NEW_ORDER_ERR", "PAYMENT_ERR"]
    assert all("NEW_ORDER" in ops[t] for t in (1, 2, 3, 4, 7, 8))
    lines = of(evts, gt.ErrorLine)
    assert len(lines) == 9 and {(e.kind, e.action, e.severity) for e in lines} == {("txn_error", "run", "error")}
    assert lines[0].time == "2026-11-25 18:06:44"
    assert lines[0].message.startswith("exec SELECT d_next_o_id, d_tax FROM district WHERE")
    assert all("Error 1205: Lock wait timeout exceeded" in e.message for e in lines)
    assert by_op(evts, gt.Summary)["PAYMENT_ERR"].count == 9
    (driver,) = of(events("run_lockwait_ignore_error.stderr"), gt.ErrorLine)
    assert driver == gt.ErrorLine("driver", "invalid connection", "warning", None, "2026/11/25 18:06:48", "connection.go:93")


def test_threads_that_stop_end_the_run_early():
    evts = events("run_lockwait_threads_exit.stdout")
    kinds = [(e.kind, e.time is not None) for e in of(evts, gt.ErrorLine)]
    assert kinds == [("txn_error", True), ("worker_stopped", False), ("txn_error", True), ("worker_stopped", False)]
    assert max(c.tick for c in of(evts, gt.Current)) == 4  # --time 8s, but both threads stopped at 4 s
    assert of(evts, gt.Finished) and of(evts, gt.TpmC)[0].tpmc == 9383.5


def test_an_error_message_over_several_lines():
    evts = events("run_killconn_ignore_error.stdout")
    i = next(i for i, e in enumerate(evts) if isinstance(e, gt.ErrorLine))
    first, cont1, cont2, second = evts[i:i + 4]
    assert first.kind == "txn_error" and first.message.startswith("exec SELECT c_first, c_middle")
    assert isinstance(cont1, gt.ErrorContinuation) and cont1.text.startswith("c_credit, c_credit_lim")
    assert cont2 == gt.ErrorContinuation("AND c_id = ? FOR UPDATE failed invalid connection")
    assert second.kind == "txn_error" and second.message.endswith("failed invalid connection")
    assert isinstance(evts[i + 4], gt.Current)  # the reports go on (--ignore-error)
    driver = of(events("run_killconn_ignore_error.stderr"), gt.ErrorLine)
    assert [(e.source, e.message) for e in driver] == [("packets.go:36", "unexpected EOF"),
                                                       ("connection.go:465", "invalid connection")] * 2


@pytest.mark.parametrize("name,signal", [("run_sigint.stdout", "interrupt"), ("run_sigterm.stdout", "terminated")])
def test_a_run_stopped_by_a_signal_still_summarises(name, signal):
    evts = events(name)
    kinds = [type(e).__name__ for e in evts]
    assert of(evts, gt.Signal) == [gt.Signal(signal, False)]
    at = kinds.index("Signal")
    assert kinds[at - 1] == "Ignored" and kinds[at + 1] == "Finished"  # "\nGot signal [...] to exit.\n"
    assert "Current" not in kinds[at:] and kinds.count("TpmC") == 1
    no = by_op(evts, gt.Summary)["NEW_ORDER"]
    assert no.takes_s == pytest.approx(5.2 if signal == "interrupt" else 3.2, abs=0.1)


def test_a_second_signal_and_a_forced_exit_leave_no_summary():
    twice = events("run_wait_sigint_twice.stdout")
    assert of(twice, gt.Signal) == [gt.Signal("interrupt", False), gt.Signal("interrupt", True)]
    assert not of(twice, gt.Summary) and not of(twice, gt.Finished)
    forced = events("run_wait_sigterm_forced.stdout")
    assert of(forced, gt.Signal) == [gt.Signal("terminated", False)] and of(forced, gt.ForcedExit)
    assert not of(forced, gt.Summary) and not of(forced, gt.TpmC)


def test_wait_times():
    evts = events("run_wait.stdout")
    waits = of(evts, gt.WaitTime)
    assert waits[0] == gt.WaitTime(False, "keying", "ORDER_STATUS", 2.0, 1)
    assert gt.WaitTime(False, "keying", "NEW_ORDER", 15.8, 2) in waits
    assert [w for w in waits if w.summary][-1] == gt.WaitTime(True, "thinking", "PAYMENT", 8.8, None)
    assert sorted({c.tick for c in of(evts, gt.Current)}) == [1, 2, 3]  # 30 s at 10 s: the reports stop at --time
    assert of(evts, gt.TpmC) == [gt.TpmC(5.8, 45.2)]


@pytest.mark.parametrize("name", ["run_refused.stderr", "run_badpw.stderr"])
def test_a_failed_connection_is_a_panic(name):
    evts = events(name)
    assert evts[0] == gt.ErrorLine("panic", "failed to connect to database when loading data")
    assert {e.kind for e in evts[1:]} == {"traceback"}
    assert raw(name.replace("stderr", "stdout")) == b""


def test_refused_and_wrong_password_print_the_same():
    def shape(name):
        return re.sub(rb"0x[0-9a-f]+", b"ADDR", raw(name))
    assert shape("run_refused.stderr") == shape("run_badpw.stderr")


def test_cobra_errors_and_usage():
    evts = events("run_unknown_flag.stderr")
    assert evts[0] == gt.ErrorLine("usage", "unknown flag: --output")
    assert {e.kind for e in evts[1:]} == {"usage"}
    nounit = events("run_interval_nounit.stderr")
    assert nounit[0].message == 'invalid argument "5" for "--interval" flag: time: missing unit in duration "5"'
    zero = events("run_interval_zero.stderr")
    assert zero[0] == gt.ErrorLine("panic", "non-positive interval for NewTicker")


def test_prepare_check_and_cleanup_steps():
    steps = of(events("prepare.stdout"), gt.Step)
    assert [s.table for s in steps if s.action == "create_table"] == [
        "warehouse", "district", "customer", "history", "new_order", "orders", "order_line", "stock", "item"]
    loads = [s for s in steps if s.action == "load"]
    assert loads[:3] == [gt.Step("load", "item"), gt.Step("load", "warehouse", 1), gt.Step("load", "stock", 1)]
    assert gt.Step("load", "order_line", 1, 10) in loads and len(loads) == 4 + 10 * 5
    checks = [s.condition for s in steps if s.action == "check"]
    assert sorted(checks) == sorted(f"3.3.2.{i}" for i in range(1, 13))  # prepare checks all 12, in map order
    check = of(events("check.stdout"), gt.Step)
    assert len(check) == 11 and "3.3.2.11" not in {s.condition for s in check}  # 3.3.2.11 only with --check-all
    drops = of(events("cleanup.stdout"), gt.Step)
    assert {s.action for s in drops} == {"drop_table"} and len(drops) == 9
    for name in ("prepare.stdout", "check.stdout", "cleanup.stdout"):
        assert of(events(name), gt.Finished) and not of(events(name), gt.Summary)


def test_version():
    evts = events("version.stdout")
    assert of(evts, gt.VersionLine) == [gt.VersionLine("git_commit", "none"), gt.VersionLine("build_time", "unknown"),
                                        gt.VersionLine("release", "dev")]
    text = raw("version.stdout")
    assert gt.read_version(text) == gt.VersionInfo("dev", "none", "unknown", None)
    assert gt.parse_version(text) is None  # a `go install` build does not know its version
    assert gt.parse_version(raw("go_version_m.txt")) == "1.0.7"
    assert gt.read_version(text + raw("go_version_m.txt")).version == "1.0.7"
    release = "Git Commit Hash: 2024-01-01 10:00:00\nUTC Build Time: 0123abc\nRelease version: v1.0.9-3-gabcdef\n"
    assert gt.parse_version(release) == "1.0.9-3-gabcdef"
    assert gt.parse_version("something else") is None


@pytest.mark.parametrize("name", ["run_i1_t2.stdout", "run_wait_sigterm_forced.stdout", "prepare.stdout", "check.stdout",
                                  "version.stdout", "run_refused.stderr", "run_interval_zero.stderr"])
def test_go_tpc_output_is_recognised(name):
    assert gt.is_gotpc_output(raw(name))
    assert gt.is_gotpc_output(raw(name).decode().splitlines())


def test_other_tools_output_is_not_go_tpc():
    others = [p for tool in ("sysbench", "pgbench") for p in glob.glob(os.path.join(TESTS, "fixtures", tool, "*"))
              if os.path.isfile(p)]
    assert len(others) > 10
    for path in others:
        with open(path, "rb") as f:
            assert not gt.is_gotpc_output(f.read()), path
    assert not gt.is_gotpc_output(raw("go_version_m.txt"))
    assert not gt.recognises_line(b"Got signal [interrupt] to exit.")  # go-ycsb says the same
    assert gt.recognises_line(b"tpmC: 5.8, efficiency: 45.2%\n")


# -- lines go-tpc did not print ------------------------------------------------------------------

REPORT = ("[Current] NEW_ORDER - Takes(s): 1.0, Count: 185, TPM: 11387.9, Sum(ms): 1101.1, Avg(ms): 6.0, "
          "50th(ms): 5.8, 90th(ms): 8.9, 95th(ms): 10.0, 99th(ms): 12.1, 99.9th(ms): 14.2, Max(ms): 14.2")


def test_every_cut_of_a_report_line_is_unparsed():
    for end in range(1, len(REPORT)):
        out = gt.GotpcOutputParser().feed(REPORT[:end])
        assert len(out) == 1
        if REPORT[:end].startswith("[Current]") or REPORT[:end].startswith("[Summary]"):
            assert isinstance(out[0], gt.Unparsed), REPORT[:end]
        else:
            assert not isinstance(out[0], gt.Current)
    assert isinstance(gt.GotpcOutputParser().feed(REPORT)[0], gt.Current)


@pytest.mark.parametrize("line", [REPORT.replace("TPM: 11387.9", "TPM: NaN"), REPORT.replace("Max(ms): 14.2", "Max(ms): +Inf"),
                                  "tpmC: NaN, efficiency: NaN%", "[Summary] KEYINGTIME-NEW_ORDER - NaNs"])
def test_non_finite_figures_are_unparsed(line):
    (out,) = gt.GotpcOutputParser().feed(line)
    assert out == gt.Unparsed(line, "non-finite figure")


@pytest.mark.parametrize("line", [b"\xff\xfe[Current]", REPORT.encode()[:40] + b"\xc3(" + REPORT.encode()[42:],
                                  b"tpmC: 1.0, efficiency: \xff%"])
def test_bytes_that_are_not_utf8_are_unparsed(line):
    (out,) = gt.GotpcOutputParser().feed(line)
    assert isinstance(out, gt.Unparsed) and out.reason == "not UTF-8"


@pytest.mark.parametrize("line", ["[", "[Current]", "[Summary] X", "tpmC:", "\x00", "load to", "Got signal [] to exit.",
                                  "[mysql]", "execute", "Release version", REPORT + " trailing"])
def test_odd_lines_never_raise(line):
    out = gt.GotpcOutputParser().feed(line)
    assert len(out) == 1 and not isinstance(out[0], gt.Current)


def test_crlf_and_str_input():
    out = gt.GotpcOutputParser().feed(REPORT + "\r\n")
    assert isinstance(out[0], gt.Current) and out[0].max_s == pytest.approx(0.0142)


@pytest.mark.parametrize("seed", range(5))
def test_fuzzed_captures_never_raise(seed):
    rng = random.Random(seed)
    lines = b"".join(raw(n) for n in GOTPC_FILES).split(b"\n")
    parser = gt.GotpcOutputParser()
    for line in lines:
        damaged = bytearray(line)
        for _ in range(rng.randrange(4)):
            what = rng.randrange(4)
            if what == 0 and damaged:
                del damaged[rng.randrange(len(damaged)):]
            elif what == 1 and damaged:
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            elif what == 2:
                damaged[rng.randrange(len(damaged) + 1):0] = rng.choice([b"NaN", b"\xff", b"-", b"[Current] ", b"\r"])
            else:
                damaged += bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
        out = parser.feed(bytes(damaged))
        assert len(out) == 1
        if isinstance(out[0], gt.Current | gt.Summary):  # what survives the damage is a whole, finite report
            e = out[0]
            assert all(math.isfinite(v) for v in (e.takes_s, e.tpm, e.sum_s, e.avg_s, e.p50_s, e.max_s))
    assert parser.flush() == []
