"""go-ycsb's output read by its parser, on real captures (tests/fixtures/goycsb/): cumulative report lines,
the summary after Run finished, the properties it echoes, failures, and nothing else taken for a report."""

from __future__ import annotations

import os

import pytest

from benchwatch import loadgens
from benchwatch.loadgens.goycsb import _redact
from benchwatch.loadgens.goycsb import output as gy

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
CAPTURES = ("pg_load_workloada", "pg_run_workloada", "mariadb_load_workloadf", "mariadb_run_workloadf")


def capture(name: str, tool: str = "goycsb") -> bytes:
    with open(os.path.join(FIXTURES, tool, name), "rb") as f:
        return f.read()


def events(data: bytes) -> list[object]:
    parser = gy.GoycsbOutputParser()
    return [e for line in data.split(b"\n") for e in parser.feed(line)]


@pytest.mark.parametrize("name", CAPTURES)
def test_every_line_of_a_real_capture_is_read(name):
    out = events(capture(f"{name}.stdout"))
    assert not [e for e in out if isinstance(e, gy.Unparsed)]
    assert sum(isinstance(e, gy.Finished) for e in out) == 1
    summary = [e for e in out if isinstance(e, gy.Summary)]
    assert "TOTAL" in {s.op for s in summary}
    assert any(isinstance(e, gy.Property) and e.key == "command" for e in out)
    # One arrival per report-shaped line, the summary's included (what the wrapper stamped).
    stamped = [line for line in capture(f"{name}.stdout").split(b"\n") if loadgens.by_name("goycsb").progress_line(line)]
    assert len(stamped) == len(capture(f"{name}.arrivals").split())


def test_the_figures_are_cumulative_and_in_seconds():
    out = [e for e in events(capture("pg_run_workloada.stdout")) if isinstance(e, gy.Current) and e.op == "TOTAL"]
    assert [e.count for e in out] == [488, 987, 1488, 1988, 2488, 2988]
    assert [e.takes_s for e in out] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    first = out[0]
    assert first.avg_s == pytest.approx(2103e-6) and dict(first.quantiles)["0.99"] == pytest.approx(17775e-6)
    assert dict(first.quantiles)["0"] == pytest.approx(136e-6) and dict(first.quantiles)["1"] == pytest.approx(26095e-6)
    final = next(e for e in events(capture("pg_run_workloada.stdout")) if isinstance(e, gy.Finished))
    assert final.took_s == pytest.approx(6.051253221)


def test_workload_f_measures_read_modify_write_beside_its_read_and_update():
    summary = {e.op: e for e in events(capture("mariadb_run_workloadf.stdout")) if isinstance(e, gy.Summary)}
    assert set(summary) == {"READ", "READ_MODIFY_WRITE", "TOTAL", "UPDATE"}
    assert summary["TOTAL"].count == summary["READ"].count + summary["UPDATE"].count


def test_the_password_go_ycsb_echoes_is_hidden_and_nothing_else_changes():
    assert _redact(b'"mysql.password"="s3cret"') == b'"mysql.password"="*****"'
    assert _redact(b'"pg.password"="a"="b"\r') == b'"pg.password"="*****"\r'
    for line in (b'"mysql.user"="bench"', b"READ   - Takes(s): 1.0, Count: 1", b'"password"', b""):
        assert _redact(line) == line
    assert b"*****" in capture("mariadb_run_workloadf.stdout")


def test_failures_and_usage():
    out = events(capture("bad_flag.stderr") + b"\n" + capture("bad_flag.stdout"))
    assert [e for e in out if isinstance(e, gy.Failure)] == [gy.Failure("usage", "unknown flag: --output")]
    assert not [e for e in out if isinstance(e, gy.Unparsed)]
    trace = events(b"panic: failed to create db conn dial tcp\n\ngoroutine 1 [running]:\nmain.main()\n\t/x.go:1 +0x1\n")
    assert trace[0] == gy.Failure("panic", "failed to create db conn dial tcp")
    assert not [e for e in trace if isinstance(e, gy.Unparsed)]
    assert events(b"create db pg failed dial tcp 127.0.0.1:1: connect: connection refused")[0].kind == "connect"
    assert events(b"\nGot signal [interrupt] to exit.")[1] == gy.Signal("interrupt", False)


@pytest.mark.parametrize("line, reason", [
    (b"READ   - Takes(s): 1.0, Count: 12, OPS: 12.0", "cut line"),
    (b"READ   - Takes(s): 1.0, Count: 12, OPS: NaN, Avg(us): 1, Min(us): 1, Max(us): 1, 50th(us): 1, 90th(us): 1, "
     b"95th(us): 1, 99th(us): 1, 99.9th(us): 1, 99.99th(us): 1", "not a number"),
    (b"READ   - Takes(s): 1.0, Count: -3, OPS: 1.0, Avg(us): 1, Min(us): 1, Max(us): 1, 50th(us): 1, 90th(us): 1, "
     b"95th(us): 1, 99th(us): 1, 99.9th(us): 1, 99.99th(us): 1", "out of range"),
    (b"READ   - Takes(s): 1.0, Count: \xff", "not ASCII"),
])
def test_a_bad_report_line_is_unparsed_never_an_exception(line, reason):
    (e,) = events(line)
    assert isinstance(e, gy.Unparsed) and reason in e.reason


def test_only_go_ycsb_output_is_taken_for_go_ycsb():
    assert loadgens.for_output(capture("pg_run_workloada.stdout")).name == "goycsb"
    for tool in ("gotpc", "sysbench"):
        folder = os.path.join(FIXTURES, tool)
        for name in sorted(os.listdir(folder))[:6]:
            data = capture(name, tool)
            assert not any(gy.recognises_line(line) for line in data.split(b"\n")), (tool, name)
