"""A run's stability profile kept with it (issue 29): summary.json version 2 when the run ends, computed
for runs stored before from their raw output, the dips by cause from the archived series; history, the
snapshot's and compare's rows, run's lines. Real run directories: the captured run of tests/fixtures/snapshot
(recorded before summary.json, before meta.json named its tool, with its series archived), pgbench and
sysbench fixtures."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from benchwatch.history import changepoints
from benchwatch.history import index as history_index
from benchwatch.present import stability as words
from benchwatch.record import importer, outcome, replay, rundir
from benchwatch.share import compare
from benchwatch.stability import runs

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")
STORED = os.path.join(FIXTURES, "snapshot", "20261122T181310Z-ece8")


@pytest.fixture
def stored(tmp_path) -> rundir.RunDir:
    """The captured run, as a version before summary.json left it: raw output, meta.json, series/*.csv."""
    path = tmp_path / "runs" / os.path.basename(STORED)
    shutil.copytree(STORED, path)
    return rundir.RunDir(str(path))


def _files(run: rundir.RunDir) -> dict[str, float]:
    return {n: os.stat(run.file(n)).st_mtime_ns for n in os.listdir(run.path)}


def test_a_run_stored_before_summary_json_gets_its_profile_and_its_dips_by_cause(stored):
    before = _files(stored)
    got = runs.outcome(stored)
    assert got["version"] == 2 and got["tps"] is not None
    stab = got["stability"]
    assert stab["intervals"] == 12 and stab["dips"] == 1 and stab["dip_seconds"] == 5.0
    assert 0.25 < stab["tps_cov"] < 0.35 and stab["tps_min_ratio"] == pytest.approx(0.488, abs=0.001)
    # the archived series hold the server's checkpoint: explain names it
    assert stab["dips_by_cause"] == {"checkpoint": {"dips": 1, "seconds": 5.0, "lost_transactions": stab["lost_transactions"]}}
    assert stab["dips_by_cause_source"] == "explain over the archived series"
    assert _files(stored) == before  # a reader writes nothing into a stored run


def test_without_archived_series_the_dips_by_cause_wait(stored):
    shutil.rmtree(stored.file("series"))
    stab = runs.outcome(stored)["stability"]
    assert stab["dips"] == 1 and stab["dips_by_cause"] is None and stab["dips_by_cause_source"] is None


def test_the_archiver_completes_summary_json(stored):
    shutil.rmtree(stored.file("series"))
    assert outcome.save(stored, stability=runs.stability_profiler)["version"] == 2  # the run's end: no series yet
    assert outcome.read(stored)["stability"]["dips_by_cause"] is None
    shutil.copytree(os.path.join(STORED, "series"), stored.file("series"))  # the archiver wrote them
    runs.complete(stored)
    kept = outcome.read(stored)
    assert kept["version"] == 2 and list(kept["stability"]["dips_by_cause"]) == ["checkpoint"]


def test_a_version_1_summary_keeps_its_figures_and_gains_the_profile(stored):
    plain = outcome.save(stored)  # written without a stability profiler: version 1, as before issue 29
    assert plain["version"] == 1 and "stability" not in plain
    with open(stored.file(outcome.SUMMARY), "w", encoding="utf-8") as f:
        json.dump({**plain, "tps": 123.0}, f)  # what it recorded stays what it recorded
    got = runs.outcome(stored)
    assert got["version"] == 2 and got["tps"] == 123.0 and got["stability"]["dips"] == 1
    assert outcome.read(stored)["version"] == 1  # not written back by a reader


def test_history_follows_the_stability_measures(stored, tmp_path):
    entry = history_index.read_entry(stored)
    assert entry is not None
    figures = entry["figures"]
    assert figures["tps_cov"] == pytest.approx(0.2977, abs=1e-4) and figures["dips"] == 1.0
    assert figures["stall_seconds"] == 0.0 and figures["latency_max"] is None
    for name in ("tps_cov", "tps_p1_ratio", "tps_p5_ratio", "tps_min_ratio", "dips", "dip_seconds",
                 "stall_seconds", "lost_share", "latency_p999", "latency_max"):
        assert outcome.METRICS[name] == (f"stability.{outcome.STABILITY_MEASURES[name][0]}",
                                          outcome.STABILITY_MEASURES[name][1])
    assert outcome.METRICS["latency_p99"] == ("latency_p99_s", -1)  # the summary's, as before
    # an index of version 1 (without these figures) is read again, not trusted
    hdir = tmp_path / "history"
    hdir.mkdir()
    (hdir / history_index.INDEX).write_text(json.dumps({"version": 1, "runs_dir": os.path.dirname(stored.path),
                                                        "runs": {"x": {}}}))
    entries = history_index.Index(os.path.dirname(stored.path), str(hdir)).entries()
    assert [e.run_id for e in entries] == [stored.run_id] and entries[0].value("dips") == 1.0


def test_a_step_from_zero_is_a_hundred_percent():
    assert float(changepoints.percent_step(0.0, 3.0)) == 100.0
    assert float(changepoints.percent_step(0.0, 0.0)) == 0.0
    assert float(changepoints.percent_step(2.0, 3.0)) == pytest.approx(50.0)


def test_pgbench_latency_log_gives_the_tail(tmp_path):
    run = rundir.create_run_dir(str(tmp_path))
    for name in ("stdout", "stderr"):
        shutil.copy(os.path.join(FIXTURES, "pgbench", f"pg15_plain.{name}"), run.file(f"{name}.log"))
    src = os.path.join(FIXTURES, "txlog", "threads")
    for name in os.listdir(src):
        shutil.copy(os.path.join(src, name), run.file(name))
    run.write_meta({"run_id": run.run_id, "mode": "run", "tool": "pgbench", "state": rundir.FINISHED,
                    "progress_interval": 1.0, "started_at": 1_700_000_000.0, "ended_at": 1_700_000_005.0,
                    "exit_code": 0, "txlog_prefix": run.file("pgbench_log")})
    stab = outcome.save(run, stability=runs.stability_profiler)["stability"]
    assert stab["latency_source"].startswith("per-transaction log")
    assert "upper bound of the highest bucket" in stab["latency_source"]  # pgbench prints no maximum
    assert 0 < stab["latency_p99_s"] <= stab["latency_p999_s"] <= stab["latency_max_s"]


def test_sysbench_histogram_gives_the_tail_and_its_summary_the_maximum(tmp_path):
    with open(os.path.join(FIXTURES, "sysbench", "hist.txt"), "rb") as f:
        data = f.read()
    reads, _ = replay.replay_saved(data, lambda k, s: f"sb-{k}", 1_700_000_000.0)
    run = importer.save_import(str(tmp_path), "sb-1", "hist.txt", data, None, reads[0].model, reads[0].samples,
                               stability=runs.stability_profiler)
    stab = outcome.read(run)["stability"]
    assert stab["latency_source"] == "sysbench histogram"
    assert stab["latency_max_s"] == reads[0].model.summary["latency_max_s"]
    assert stab["latency_p99_s"] <= stab["latency_p999_s"]


def test_words_for_run_and_rows_for_compare(stored):
    stab = runs.outcome(stored)["stability"]
    said = words.lines(stab)
    assert said[0].startswith("stability over 12 intervals of 1 s after 0 s of warm-up: TPS median 877.0")
    assert "1 dip (5.0 s)" in said[1] and "by cause: checkpoint 1" in said[1]
    assert words.lines(None) == [] and "too few" in words.lines({"intervals": 0, "warmup": "too few progress lines"})[0]
    calm = {**stab, "tps_cov": 0.05, "dips": 0, "dip_seconds": 0.0, "tps_min_ratio": 0.9, "dips_by_cause": {}}
    header, rows = compare.stability_side_by_side(["A", "B"], [{"stability": stab}, {"stability": calm}])
    assert header == ["", "A", "B", "steadier"]
    by_label = {r[0]: r for r in rows}
    assert by_label["TPS coefficient of variation"][-1] == "B"
    assert by_label["worst interval / median"][-1] == "B"
    assert by_label["seconds stalled"][-1] == "same"
    assert "latency p99" not in by_label  # neither run has it
    assert by_label["dips: checkpoint"][1:3] == ["1 (1,785 tx lost)", "0"]
    counts = compare.steadier_counts(["A", "B"], [{"stability": stab}, {"stability": calm}])
    assert counts == {"A": 0, "B": 4}  # CoV, worst interval, dips, their seconds
