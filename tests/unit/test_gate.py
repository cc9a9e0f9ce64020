"""The gate's exit codes and Markdown on the reports of a real sweep (tests/integration/test_team_stores.py's
sweep gate: two builds, the candidate's with synchronous_commit=on, then two identical builds), and flush's wait
on its sources."""

from __future__ import annotations

import copy
import json
import os

import pytest

from benchwatch.exporter import self_metrics
from benchwatch.gate import FAILED, PASSED, markdown, write_comment
from benchwatch.gate import sweep as gate
from benchwatch.stack import pending

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "gate")


def report(name: str) -> dict:
    with open(os.path.join(FIXTURES, f"sweep-{name}.json")) as f:
        return json.load(f)


def test_fail_on_words():
    assert gate.parse_fail_on("slower") == ("slower",)
    assert gate.parse_fail_on("slower,less-steady,slower") == ("slower", "less-steady")
    with pytest.raises(ValueError, match="'faster' is not one of slower, less-steady"):
        gate.parse_fail_on("slower,faster")


def test_a_slower_verdict_fails_and_says_by_how_much():
    model = report("regressed")
    found = gate.failures(model, ("slower", "less-steady"))
    assert [(f.variant, f.kind) for f in found] == [("candidate", "slower")]
    assert found[0].text.startswith("candidate at clients=1,scale=1 is slower than base: TPS −91.3 % (95 % interval −95.7")
    assert "beyond the minimum effect of 10 %" in found[0].text
    assert gate.exit_code(found) == FAILED == 1


def test_no_difference_passes_and_less_steady_alone_does_not_fail_on_slower():
    assert gate.exit_code(gate.failures(report("same"), ("slower", "less-steady"))) == PASSED == 0
    model = report("same")
    model["differences"][0]["stability"]["verdict"] = "less steady"
    assert gate.failures(model, ("slower",)) == []
    (f,) = gate.failures(model, ("less-steady",))
    assert f.kind == "less-steady" and "is less steady than base" in f.text


def test_the_comment_names_the_setting_the_verdict_its_interval_and_the_why():
    model = report("regressed")
    changes = gate.server_changes(model, os.path.join(FIXTURES, "runs"))
    # Where each server listens differs between any two servers: left out; the setting chosen is what differs.
    assert changes == {"candidate": {"synchronous_commit": ["off", "on"]}}
    text = gate.markdown(model, ("slower", "less-steady"), gate.failures(model, ("slower", "less-steady")), changes,
                         {"bundle": "/s/shares/sweep-regressed/index.html", "grafana": "http://grafana:3000/"})
    assert text.startswith("## benchwatch: sweep `regressed` — **failed**\n")
    assert "| candidate | clients=1,scale=1 | 2,974.5 (1,357.0 – 6,221.5), n=3 | 259.5 (" in text
    assert "| −91.3 % (95 % interval −95.7 … −82.5 %) | slower | 0.0033 |" in text
    assert "| candidate | synchronous_commit | off | on |" in text
    why = text.split("### Why", 1)[1]
    assert "| WAL syncs per transaction | 0.002301 | 0.8133 |" in why
    assert "http://grafana:3000/d/benchwatch-experiment?var-experiment=regressed" in text
    assert "`/s/shares/sweep-regressed/index.html`" in text
    assert "[`20261128T172425.436Z-57f2`](http://grafana:3000/d/benchwatch-pgbench-run?var-run_id=20261128T172425.436Z-57f2)" in text


def test_the_comment_of_a_pass_says_so_and_has_no_why():
    model = report("same")
    text = gate.markdown(model, ("slower",), [], {"candidate": {}}, {})
    assert "**passed**" in text and "passes: no variant is slower than base" in text
    assert "### Why" not in text and "### Links" in text
    assert "The runs recorded the same server version and settings on both sides." in text


def test_a_pipe_in_a_value_cannot_break_the_table():
    model = copy.deepcopy(report("regressed"))
    model["variants"][1]["what"] = "before=echo a | tee b"
    text = gate.markdown(model, ("slower",), [], None, None)
    assert "| candidate | before=echo a \\| tee b |" in text
    assert markdown.table(["a"], []) == []


def test_the_comment_is_written_whole(tmp_path):
    path = tmp_path / "sub" / "comment.md"
    write_comment(str(path), "# x\n")
    assert path.read_text() == "# x\n" and os.listdir(path.parent) == ["comment.md"]


def test_the_exporter_gauge_name_is_the_exporters():
    assert pending.EXPORTER_PENDING == self_metrics.RW_PENDING
    assert pending.EXPORTER_FINISHING == self_metrics.RUNS_FINISHING
    text = f"# HELP x\n{self_metrics.RW_PENDING}_created 1\n{self_metrics.RW_PENDING} 17.0\n"
    assert pending.metric_value(text, self_metrics.RW_PENDING) == 17.0
    assert pending.metric_value("", self_metrics.RW_PENDING) is None


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_flush_waits_for_every_source_to_stay_at_zero():
    clock = Clock()
    left = {"queue": [40, 10, 0, 0, 0, 0, 0, 0, 0]}

    def queue(_stack):
        return pending.Outstanding("queue", left["queue"].pop(0) if len(left["queue"]) > 1 else 0)

    said: list[str] = []
    w = pending.wait(None, 30, {"queue": queue, "absent": lambda _s: None}, said.append, clock, clock.sleep)  # type: ignore[arg-type]
    assert w.flushed and w.seconds >= pending.SETTLE_S
    assert said == ["waiting: queue: 40 samples left"]  # the next count came sooner than SAY_EVERY_S


def test_flush_gives_up_at_its_timeout_saying_what_is_left():
    clock = Clock()
    stuck = {"db": lambda _s: pending.Outstanding("results database", 3, "runs"),
             "unknown": lambda _s: pending.Outstanding("store", None, why="no answer")}
    w = pending.wait(None, 5, stuck, None, clock, clock.sleep)  # type: ignore[arg-type]
    assert not w.flushed and 5 <= w.seconds < 6
    assert [str(o) for o in w.last] == ["results database: 3 runs left", "store: unknown (no answer)"]
    # nothing that buffers: flushed at once
    assert pending.wait(None, 5, {}, None, clock, clock.sleep).flushed  # type: ignore[arg-type]


def test_history_comment_of_a_regression_names_the_setting_with_the_interval(tmp_path, capsys):
    from tests.unit.test_history import _cli, _history

    ids = _history(tmp_path)
    comment = tmp_path / "history.md"
    code, _, err = _cli(tmp_path, capsys, ids[0], "--fail-on-regression", "5", "--comment", str(comment),
                        "--grafana-url", "http://grafana:3000")
    assert code == 1, err
    assert f"comment for the pull request in {comment}" in err
    text = comment.read_text()
    assert "— **failed**" in text and "The gate (`--fail-on-regression 5`, tps, the latest 3 runs as the candidate) fails" in text
    assert "Change: **−29.9 %** (95 % bootstrap interval −30.6 … −29.1 %), p = 0.0005" in text
    assert f"### What changed between run `{ids[5]}` and run `{ids[6]}`" in text
    assert "| synchronous_commit | off | on |" in text
    assert "/d/benchwatch-history?var-workload=" in text and f"`{ids[-1]}`" in text


def test_history_comment_of_a_pass_and_of_too_few_runs(tmp_path, capsys):
    from tests.unit.test_history import _cli, _history

    ids = _history(tmp_path, n=9, change_at=99)
    comment = tmp_path / "history.md"
    code, _, err = _cli(tmp_path, capsys, ids[0], "--fail-on-regression", "5", "--comment", str(comment))
    assert code == 0, err
    text = comment.read_text()
    assert "— **passed**" in text and "passes: no regression of more than 5 %" in text
    assert "| before | 6 (from " in text and "| after | 3 (the candidate's runs from " in text
    assert "Nothing recorded differs between the runs" in text
    code, _, err = _cli(tmp_path, capsys, ids[0], "--comment", str(comment))
    assert code == 2 and "give a WORKLOAD and --fail-on-regression PCT" in err


def test_history_comment_with_too_few_runs_says_so(tmp_path, capsys):
    from tests.unit.test_history import _cli, _history

    ids = _history(tmp_path, n=4, change_at=99)
    comment = tmp_path / "history.md"
    code, _, err = _cli(tmp_path, capsys, ids[0], "--fail-on-regression", "5", "--comment", str(comment))
    assert code == 0, err
    assert "Too few runs to compare" in comment.read_text()


def _planned_sweep(state_dir, name: str) -> None:
    from benchwatch.experiment import plan as plans
    from benchwatch.experiment import spec

    cells = spec.cells([], [], [])
    plan = plans.Plan(name=name, argv=["pgbench", "-T", "3"], variants=[spec.Variant("A"), spec.Variant("B")],
                      cells=cells, repeat=1, order="blocked", seed=1,
                      runs=plans.order_runs(["A", "B"], cells, 1, "blocked", 1), engine="postgresql")
    sdir = plans.SweepDir(os.path.join(str(state_dir), "sweeps", name))
    sdir.write_plan(plan)
    sdir.append("planned", runs=len(plan.runs), seed=1)


def test_a_bundle_refused_for_a_secret_exits_2_not_the_verdicts_1(tmp_path, capsys):
    from benchwatch import cli

    # The server's password is also a word the report prints (the sweep's name): the bundle would carry it.
    _planned_sweep(tmp_path, "hunter2secret")
    code = cli.main(["report", "hunter2secret", "--state-dir", str(tmp_path), "--no-why",
                     "--pg-dsn", "host=127.0.0.1 port=1 user=u dbname=d password=hunter2secret"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "contained a secret (a password or token): nothing was written (the report of sweep hunter2secret is not " \
           "written" in err
    assert not os.path.exists(tmp_path / "shares" / "sweep-hunter2secret")


def test_report_gate_refuses_bad_words_and_a_sweep_without_runs(tmp_path, capsys):
    from benchwatch import cli

    _planned_sweep(tmp_path, "empty")
    code = cli.main(["report", "empty", "--state-dir", str(tmp_path), "--no-why", "--fail-on", "faster"])
    assert code == 2 and "'faster' is not one of slower, less-steady" in capsys.readouterr().err
    code = cli.main(["report", "empty", "--state-dir", str(tmp_path), "--no-why", "--json", "--fail-on", "slower"])
    assert code == 2 and "has no finished run: nothing to judge (not a pass)" in capsys.readouterr().err
    code = cli.main(["report", "empty", "--state-dir", str(tmp_path), "--no-why", "--comment", str(tmp_path / "c.md")])
    assert code == 2 and "give --fail-on slower[,less-steady] with it" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "c.md")


def test_flush_waits_for_the_runs_the_results_database_has_not_got(tmp_path):
    """A runner's flush counts the runs (and sweeps) whose markers say they are not in the results
    database yet: deleting the runner first would lose them (issue 31)."""
    from types import SimpleNamespace

    from benchwatch.results.pending import Pending
    from benchwatch.stack import pending

    runs, state = tmp_path / "runs", tmp_path / "state"
    runs.mkdir()
    state.mkdir()
    target: list = ["host=127.0.0.1 port=9 dbname=results"]
    stack = SimpleNamespace(cfg=SimpleNamespace(results_target=lambda: target[0], runs_dir=str(runs),
                                                state_dir=str(state)))
    assert pending.SOURCES["the results database"] is pending.results_backlog
    assert pending.results_backlog(stack).done  # type: ignore[arg-type, union-attr]
    Pending(str(runs)).mark("20261129T010000.000Z-1", error="connection refused")
    left = pending.results_backlog(stack)  # type: ignore[arg-type]
    assert left is not None and left.left == 1 and "connection refused" in str(left)
    target[0] = None
    assert pending.results_backlog(stack) is None  # type: ignore[arg-type]  # no results database here


def test_a_run_counts_as_finishing_until_its_record_is_written_and_its_completion_done(tmp_path):
    """What flush's source "the exporter's finishing runs" reads (issue 31): a run handed to the archiver
    counts until its results record is written, and a long-term completion until it is done or given up."""
    import threading
    import time
    from types import SimpleNamespace

    from benchwatch.exporter.run_archiver import LongTermCompleter, RunArchiver
    from benchwatch.query import longterm

    release, writing = threading.Event(), threading.Event()

    class SlowResults:  # the results writer's one call the archiver makes, held until released
        def run_ended(self, path):
            writing.set()
            release.wait(30)

    archiver = RunArchiver("http://127.0.0.1:9", results=SlowResults())  # type: ignore[arg-type]  # no Prometheus: not archived
    assert archiver.finishing() == 0
    archiver(SimpleNamespace(path=str(tmp_path), run_id="r1"))
    assert archiver.finishing() == 1
    assert writing.wait(30) and archiver.finishing() == 1  # its series failed; its record is being written
    release.set()
    deadline = time.monotonic() + 30
    while archiver.finishing() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert archiver.finishing() == 0 and archiver.failed == 1
    completer = LongTermCompleter("http://127.0.0.1:9", longterm.Store("http://127.0.0.1:9/api/v1/write",
                                                                        "http://127.0.0.1:9"))
    completer.add(str(tmp_path), "r1", delay_s=3600)  # the store was away: again in an hour
    assert completer.pending() == 1


def test_a_run_is_read_here_from_the_runs_directory_else_the_copy_fetched_from_the_results_database(tmp_path):
    """What the why of report and of history's gate read another host's run through (commands.share.run_path)."""
    from types import SimpleNamespace

    from benchwatch.commands.share import run_path

    runs, state = tmp_path / "runs", tmp_path / "state"
    stack = SimpleNamespace(cfg=SimpleNamespace(runs_dir=str(runs), state_dir=str(state), results_target=lambda: None))
    copy = state / "results" / "fetched" / "r2"
    assert run_path(stack, "r2", fetch=False) == str(copy)  # not fetched: where it would be
    assert run_path(stack, "r2") == str(runs / "r2")  # no database to fetch it from: nowhere, said by its readers
    copy.mkdir(parents=True)
    (copy / "meta.json").write_text("{}")
    assert run_path(stack, "r2") == str(copy)  # fetched before: the copy, not fetched again
    (runs / "r2").mkdir(parents=True)
    assert run_path(stack, "r2") == str(runs / "r2")  # this host's own first
