"""benchwatch sweep's pure parts: variant specs, cells, the plan's order, the state file, the statistics."""

from __future__ import annotations

import json
import math
import os
import re
import statistics

import pytest

from benchwatch import loadgens
from benchwatch.experiment import plan as plans
from benchwatch.experiment import spec, stats
from benchwatch.experiment.runner import cell_argv


def test_variant_specs():
    assert spec.parse_variant("HEAD") == spec.Variant("HEAD")
    v = spec.parse_variant("bigwal:max_wal_size=4GB,checkpoint_timeout=15min")
    assert v.settings == {"max_wal_size": "4GB", "checkpoint_timeout": "15min"}
    assert spec.parse_variant("PATCH:bindir=/opt/pg/bin").bindir == "/opt/pg/bin"
    assert spec.parse_variant("other:dsn=host=db1 port=5433").dsn == "host=db1 port=5433"
    # A before= command keeps its commas and equals signs.
    assert spec.parse_variant("cold:before=sync; echo 3 > /proc/sys/vm/drop_caches,x=1").before == \
        "sync; echo 3 > /proc/sys/vm/drop_caches,x=1"
    assert "(given)" in spec.parse_variant("x:dsn=password=secret").describe
    assert "secret" not in spec.parse_variant("x:dsn=password=secret").describe


@pytest.mark.parametrize("text, message", [
    ("a:", "nothing after the colon"),
    ("a:foo", "not setting=value"),
    ("a:x=1,x=2", "given twice"),
    ("a:bindir=", "needs a value"),
    ("a b", "its name"),
    ("a:x=1,bindir=/x", "cannot be combined"),
])
def test_bad_variant_specs(text, message):
    with pytest.raises(spec.SpecError, match=message):
        spec.parse_variant(text)


def test_a_variant_name_twice_is_refused():
    with pytest.raises(spec.SpecError, match="'A' is used twice"):
        spec.parse_variants(["A", "B:x=1", "A:y=2"])


def test_bindir_without_postgres(tmp_path):
    with pytest.raises(spec.SpecError, match="has no postgres"):
        spec.check_bindir(spec.Variant("P", bindir=str(tmp_path)))


def test_lists_and_cells():
    assert spec.parse_list("--clients", "1,8,16") == ["1", "8", "16"]
    for bad in ("1,,2", "0", "a", "1,1"):
        with pytest.raises(spec.SpecError):
            spec.parse_list("--clients", bad)
    assert spec.parse_arg("table-size=10,20") == ("--table-size", ["10", "20"])
    cells = spec.cells(["1", "8"], ["10", "100"], [("--table-size", ["5", "6"])])
    assert len(cells) == 8
    assert cells[0] == spec.Cell(1, 10, (("--table-size", "5"),))
    assert cells[0].name == "clients=1,scale=10,table-size=5"
    assert cells[0].words == "1 client, scale 10, table-size 5"
    assert spec.cells([], [], []) == [spec.Cell()]
    assert spec.Cell().name == "all"


def test_interleaved_order_is_random_per_round_and_reproducible():
    cells = spec.cells(["1", "2"], [], [])
    runs = plans.order_runs(["A", "B"], cells, 3, "interleaved", 42)
    assert runs == plans.order_runs(["A", "B"], cells, 3, "interleaved", 42)
    assert [r.index for r in runs] == list(range(1, 13))
    for r in (1, 2, 3):  # every round runs every variant x cell once
        assert sorted((x.variant, x.cell) for x in runs if x.repeat == r) == [("A", 0), ("A", 1), ("B", 0), ("B", 1)]
    orders = {tuple((x.variant, x.cell) for x in plans.order_runs(["A", "B"], cells, 1, "interleaved", s))
              for s in range(20)}
    assert len(orders) > 1


def test_interleaved_keeps_a_scale_together_within_a_round():
    cells = spec.cells(["1", "2"], ["1", "5"], [])
    runs = plans.order_runs(["A", "B"], cells, 2, "interleaved", 7)
    scales = [cells[r.cell].scale for r in runs]
    assert scales == [1] * 4 + [5] * 4 + [1] * 4 + [5] * 4


def test_blocked_order():
    runs = plans.order_runs(["A", "B"], [spec.Cell(1), spec.Cell(2)], 2, "blocked", 0)
    assert [(r.variant, r.cell, r.repeat) for r in runs] == [
        ("A", 0, 1), ("A", 0, 2), ("A", 1, 1), ("A", 1, 2), ("B", 0, 1), ("B", 0, 2), ("B", 1, 1), ("B", 1, 2)]


def test_state_survives_a_cut_line_and_knows_the_interrupted_run(tmp_path):
    sdir = plans.SweepDir(str(tmp_path / "s"))
    p = plans.Plan("s", ["pgbench"], [spec.Variant("A")], [spec.Cell()], 3, "blocked", 0,
                   plans.order_runs(["A"], [spec.Cell()], 3, "blocked", 0), "postgresql")
    sdir.write_plan(p)
    assert sdir.read_plan().to_json() == p.to_json()
    sdir.append("started", index=1, attempt=1)
    sdir.append("finished", index=1, attempt=1, ok=True, run_id="r1")
    sdir.append("started", index=2, attempt=1)
    sdir.append("finished", index=2, attempt=1, ok=False, run_id="r2", why="exit code 1")
    sdir.append("started", index=2, attempt=2)
    with open(os.path.join(sdir.path, plans.STATE), "a") as f:
        f.write('{"event": "finished", "ind')  # a kill in the middle of a line
    state = plans.progress(sdir.events())
    assert state.done == {1: "r1"}
    assert state.interrupted == [2]
    assert [r.index for r in state.missing(p)] == [2, 3]
    assert len(state.failed[2]) == 1
    assert json.loads(open(os.path.join(sdir.path, plans.PLAN)).read())["seed"] == 0


def test_cell_argv_sets_clients_and_threads():
    argv = cell_argv(["pgbench", "-N", "-T", "5", "bench"], spec.Cell(8), cores=2)
    assert argv == ["pgbench", "-N", "-T", "5", "-c", "8", "-j", "2", "bench"]
    assert cell_argv(["pgbench", "-S"], spec.Cell(1), cores=4)[-4:] == ["-c", "1", "-j", "1"]
    sb = cell_argv(["sysbench", "oltp_read_write", "--table-size=5", "run"],
                   spec.Cell(4, None, (("--table-size", "100"),)), cores=2)
    assert sb == ["sysbench", "--table-size=100", "--threads=4", "oltp_read_write", "run"]


def test_gotpc_clients_and_options():
    from benchwatch.loadgens.gotpc.args import parse_gotpc_args

    gotpc = loadgens.for_program("go-tpc")
    argv = gotpc.with_option(gotpc.with_clients(["tpcc", "--warehouses", "1", "run", "--time", "5s"], 8, 2),
                             "--warehouses", "4")
    parsed = parse_gotpc_args(argv)
    assert parsed.error is None and parsed.threads == 8 and parsed.warehouses == 4
    assert gotpc.clients_option(["tpcc", "run", "-T", "4"]) == "--threads/-T"
    assert gotpc.clients_option(["tpcc", "run"]) is None


def test_clients_given_twice_is_seen():
    assert loadgens.for_program("pgbench").clients_option(["-c", "4", "-T", "5"]) == "-c/--client"
    assert loadgens.for_program("pgbench").clients_option(["--client=4"]) == "-c/--client"
    assert loadgens.for_program("pgbench").clients_option(["-T", "5"]) is None
    assert loadgens.for_program("sysbench").clients_option(["--threads=4", "oltp_read_only", "run"]) == "--threads"
    assert loadgens.for_program("sysbench").clients_option(["--num-threads=4", "run"]) == "--threads"


def test_reinit_argvs():
    assert loadgens.for_program("pgbench").init_argvs(["-N", "-T", "5", "-h", "x", "db"], 10) == \
        [["-i", "-q", "-s", "10", "--host=x", "db"]]
    assert loadgens.for_program("sysbench").init_argvs(["oltp_read_write", "--tables=2", "run"], None) == \
        [["oltp_read_write", "--tables=2", "cleanup"], ["oltp_read_write", "--tables=2", "prepare"]]


# -- statistics ------------------------------------------------------------------------------

def test_median_interval():
    med, ci = stats.median_ci([100.0, 102.0, 98.0])
    assert med == 100.0
    assert ci is not None and ci[0] < 100 < ci[1]
    logs = [math.log(x) for x in (100.0, 102.0, 98.0)]
    half = 4.302653 * statistics.stdev(logs) / 3 ** 0.5  # t(0.975, 2) * s / sqrt(n), on the logs
    assert ci == pytest.approx((math.exp(statistics.fmean(logs) - half), math.exp(statistics.fmean(logs) + half)))
    wide = stats.median_ci([1.0, 1000.0, 30.0])[1]
    assert wide is not None and wide[0] > 0  # never below zero
    assert stats.median_ci([5.0]) == (5.0, None)
    assert stats.median_ci([]) == (None, None)


def test_a_clear_difference_is_shown_with_its_sign():
    c = stats.compare([100, 101, 99], [150, 151, 149])
    assert c.ratio == pytest.approx(1.5, rel=1e-3)  # of the geometric means
    assert c.ratio_ci[0] < 1.5 < c.ratio_ci[1] and c.ratio_ci[0] > 1
    stats.decide([(c, [100, 101, 99], [150, 151, 149])], 2.0, +1, ("faster", "slower"))
    assert c.verdict == "faster"
    slow = stats.compare([100, 101, 99], [50, 51, 49])
    stats.decide([(slow, [100, 101, 99], [50, 51, 49])], 2.0, +1, ("faster", "slower"))
    assert slow.verdict == "slower"
    lat = stats.compare([1.0, 1.1, 0.9], [2.0, 2.1, 1.9])
    stats.decide([(lat, [1.0, 1.1, 0.9], [2.0, 2.1, 1.9])], 2.0, -1, ("lower", "higher"))
    assert lat.verdict == "higher"


def test_min_effect_hides_a_significant_but_small_change():
    a, b = [1000.0, 1000.5, 999.5], [1010.0, 1010.5, 1009.5]
    c = stats.compare(a, b)
    assert c.p is not None and c.p < 0.001
    stats.decide([(c, a, b)], 2.0, +1, ("faster", "slower"))
    assert c.verdict == "no difference shown"
    assert "min-effect" in c.note


def test_noise_shows_no_difference_and_says_how_many_repeats_would():
    a, b = [1000.0, 1100.0, 950.0], [1080.0, 990.0, 1150.0]
    c = stats.compare(a, b)
    stats.decide([(c, a, b)], 2.0, +1, ("faster", "slower"))
    assert c.verdict == "no difference shown"
    assert c.repeats_needed is not None and c.repeats_needed > 3


def test_holm():
    assert stats.holm([0.01, 0.04, 0.03, None]) == [pytest.approx(0.03), pytest.approx(0.06), pytest.approx(0.06), None]
    # Many comparisons: a p of 0.02 alone is no longer a finding.
    cs = [(stats.compare([100, 101, 99], [100, 101, 99.5]), [100, 101, 99], [100, 101, 99.5]) for _ in range(10)]
    cs[0] = (stats.Comparison(1.05, (1.01, 1.09), 0.02), [], [])
    stats.decide(cs, 2.0, +1, ("faster", "slower"))
    assert cs[0][0].verdict == "no difference shown"
    assert cs[0][0].p_adjusted == pytest.approx(0.2)


def test_repeats_needed_grows_as_the_effect_shrinks():
    base = [100.0, 104.0, 96.0]
    big = stats.repeats_needed(base, [110.0, 114.0, 106.0], 0.05)
    small = stats.repeats_needed(base, [103.0, 107.0, 99.0], 0.05)
    assert big is not None and small is not None and small > big


# -- the loop, with the run recorded from real captures -------------------------------------

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "pgbench")


class FakeControl:
    def __init__(self):
        self.calls: list[tuple] = []

    def apply(self, values):
        self.calls.append(("apply", dict(values)))
        return [f"set {values}"]

    def restore(self, originals):
        self.calls.append(("restore", dict(originals)))
        return ["restored"]

    def before_run(self, checkpoint=True):
        return ["CHECKPOINT"] if checkpoint else []


def make_sweep(tmp_path, outcomes: list[str], variants=("A", "B:x=1"), repeat=2, warmup=0.0, codes=None):
    """A sweep whose runs are recorded from the captures named in ``outcomes``, in the order they run."""
    from benchwatch.experiment.runner import Hooks, Sweep
    from benchwatch.record import rundir

    vs = spec.parse_variants(list(variants))
    cells = [spec.Cell(2)]
    p = plans.Plan("t", ["pgbench", "-T", "5"], vs, cells, repeat, "blocked", 0,
                   plans.order_runs([v.name for v in vs], cells, repeat, "blocked", 0), "postgresql",
                   originals={"x": {"value": "0", "restart": False}}, warmup_s=warmup)
    sdir = plans.SweepDir(str(tmp_path / "sweep"))
    sdir.write_plan(p)
    control = FakeControl()
    recorded: list[tuple[list[str], dict]] = []
    said: list[str] = []
    queue = list(outcomes)

    def record(argv, info, v):
        capture = queue.pop(0)
        run = rundir.create_run_dir(str(tmp_path / "runs"))
        for stream in ("stdout", "stderr"):
            with open(os.path.join(FIXTURES, f"{capture}.{stream}"), "rb") as f, open(run.file(f"{stream}.log"), "wb") as g:
                g.write(f.read())
        code = (codes or {}).get(len(recorded), 0 if capture == "pg15_plain" else 2)
        run.write_meta({"run_id": run.run_id, "mode": "run", "tool": "pgbench", "argv": argv, "started_at": 1.0,
                        "ended_at": 30.0, "exit_code": code, "info": info, "stdout": "stdout.log", "stderr": "stderr.log"})
        recorded.append((argv, info))
        return code, run.path

    hooks = Hooks(record=record, control=lambda v: control, init=lambda argv, v: 0, shell=lambda text: 0, cores=2,
                  clock=iter(range(0, 10_000, 30)).__next__)
    return Sweep(p, sdir, hooks, said.append), control, recorded, said, sdir


def test_a_failed_run_is_retried_once_and_never_used(tmp_path):
    sweep, control, recorded, said, sdir = make_sweep(
        tmp_path, ["pg15_plain", "pg15_abort_terminated", "pg15_plain", "pg15_plain", "pg15_plain"])
    outcome = sweep.run()
    assert outcome.failed == [] and not outcome.interrupted
    assert len(recorded) == 5
    assert recorded[0][0] == ["pgbench", "-T", "5", "-c", "2", "-j", "2"]
    assert recorded[0][1] == {"sweep": "t", "variant": "A", "cell": "clients=2", "repeat": "1"}
    assert said[0] == "sweep t: run 1/4 (A, 2 clients, round 1) - ETA unknown"
    assert any("run 2 failed (" in s and "aborted" in s and "retrying it once" in s for s in said)
    assert any(re.fullmatch(r"sweep t: run 3/4 \(B, 2 clients, round 1\) - ETA \d+ min", s) for s in said), said
    state = plans.progress(sdir.events())
    assert sorted(state.done) == [1, 2, 3, 4] and len(state.failed[2]) == 1
    # B's setting applied before its runs, put back after them.
    assert control.calls == [("apply", {"x": "1"}), ("restore", {"x": {"value": "0", "restart": False}})]


def test_resume_runs_what_is_missing_and_puts_back_settings_a_kill_left(tmp_path):
    sweep, control, _recorded, said, sdir = make_sweep(tmp_path, ["pg15_plain"] * 2)
    sdir.append("started", index=1, attempt=1)
    sdir.append("finished", index=1, attempt=1, ok=True, run_id="kept")
    sdir.append("settings_applying", variant="B", settings={"x": "1"})
    sdir.append("started", index=3, attempt=1)  # killed here
    sdir.append("finished", index=2, attempt=1, ok=True, run_id="kept2")
    outcome = sweep.run()
    assert outcome.ran == 2 and not outcome.failed
    assert control.calls[0] == ("restore", {"x": {"value": "0", "restart": False}})
    assert "sweep t: run 3 was interrupted: running it again" in said
    assert [s.split(" (")[0] for s in said if " - ETA" in s] == ["sweep t: run 3/4", "sweep t: run 4/4"]
    assert plans.progress(sdir.events()).done[1] == "kept"


def test_warmup_runs_are_labelled_and_not_counted(tmp_path):
    sweep, _control, recorded, _said, sdir = make_sweep(tmp_path, ["pg15_plain"] * 4, variants=("A",), warmup=3)
    assert sweep.run().failed == []
    assert [(a[-2:], i.get("warmup")) for a, i in recorded] == [
        (["-T", "3"], "1"), (["-j", "2"], None), (["-T", "3"], "1"), (["-j", "2"], None)]
    assert len(plans.progress(sdir.events()).done) == 2


def test_ctrl_c_stops_the_sweep_instead_of_retrying(tmp_path):
    sweep, _control, recorded, said, sdir = make_sweep(tmp_path, ["pg15_plain"] * 4, codes={1: 130})
    outcome = sweep.run()
    assert outcome.interrupted and len(recorded) == 2
    assert not any("retrying" in s for s in said)
    assert "sweep t: interrupted; sweep --resume t runs what is missing" in said
    assert sorted(plans.progress(sdir.events()).done) == [1]


def test_a_before_command_runs_before_each_of_its_variants_runs_and_a_failing_one_fails_the_run(tmp_path):
    sweep, _control, recorded, _said, sdir = make_sweep(tmp_path, ["pg15_plain"] * 3, variants=("A", "cold:before=drop"),
                                                       repeat=1)
    commands: list[str] = []
    results = iter([1, 0])  # the first try of cold's run: the command fails; its retry: it works

    def shell(text):
        commands.append(text)
        return next(results)

    sweep.hooks.shell = shell
    assert sweep.run().failed == []
    assert commands == ["drop", "drop"] and len(recorded) == 2
    failed = [e for e in sdir.events() if e["event"] == "finished" and not e["ok"]]
    assert failed[0]["why"] == "the before= command exited with 1"
    started = [e for e in sdir.events() if e["event"] == "started" and e["index"] == 2]
    assert started[0]["prepared"] == ["before: drop", "CHECKPOINT"]
