"""Runs stored before issue 19 still open in snapshot, compare and explain.

Until issue 19 every run series was named pgbench_*, and before 2026-11-23 16:05 they carried no tool label;
meta.json had neither "tool" nor "engine". A real Prometheus 2.42 gets one run written that way (the
captured run of tests/fixtures/snapshot/, its samples renamed to the old names, the tool label dropped)
and the same run under today's names; snapshot, compare and explain read both from Prometheus and must
give the same figures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from benchwatch.model import names
from benchwatch.model.samples import Sample
from benchwatch.query.prometheus import query
from benchwatch.record.replay import replay_run_dir
from benchwatch.sink.remote_write import RemoteWriter
from benchwatch.util.processes import wait_until
from tests.helpers.prometheus import REMOTE_WRITE_CONFIG, start_prometheus
from tests.helpers.throwaway import BENCHWATCH, REPO_ROOT

pytestmark = pytest.mark.integration

FIXTURE = os.path.join(REPO_ROOT, "tests", "fixtures", "snapshot", "20261122T181310Z-ece8")
OLD, NEW = "20261122T181310Z-0001", "20261122T181310Z-0002"


def as_stored_before(samples: list) -> list:
    """Samples as a version before issue 19 wrote them: pgbench_* names, no tool label, and none of the series
    added since (benchmark_* without an old name, e.g. benchmark_run_ended_early)."""
    return [Sample(names.LEGACY.get(s.name, s.name), tuple(kv for kv in s.labels if kv[0] != "tool"), s.value,
                   s.timestamp_ms) for s in samples if s.name in names.LEGACY or not s.name.startswith("benchmark_")]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    base = tmp_path_factory.mktemp("stored")
    state = base / "state"
    with open(os.path.join(FIXTURE, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    assert "tool" not in meta and "engine" not in meta  # recorded before either existed
    for run_id in (OLD, NEW):
        shutil.copytree(FIXTURE, state / "runs" / run_id)
        copied = dict(meta, run_id=run_id)
        with open(state / "runs" / run_id / "meta.json", "w", encoding="utf-8") as f:
            json.dump(copied, f)
    with start_prometheus(base / "prom", REMOTE_WRITE_CONFIG, ["--web.enable-remote-write-receiver"]) as prom:
        for run_id, convert in ((OLD, as_stored_before), (NEW, list)):
            samples = replay_run_dir(str(state / "runs" / run_id), dict(meta, run_id=run_id))
            assert any(s.name == "benchmark_progress_tps" for s in samples)
            RemoteWriter(prom.remote_write_url).send(convert(samples))
        at = meta["ended_at"]
        assert wait_until(lambda: bool(query(prom.url, f'pgbench_progress_tps{{run_id="{OLD}"}}[1m]', time=at)), 30, 0.2)
        assert query(prom.url, f'{{__name__=~"benchmark_.*", run_id="{OLD}"}}[1m]', time=at) == []
        assert query(prom.url, f'pgbench_progress_tps{{run_id="{OLD}", tool!=""}}[1m]', time=at) == []
        yield {"state": str(state), "prometheus": prom.url, "out": base / "out"}


def benchwatch(stored, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([BENCHWATCH, *args, "--state-dir", stored["state"], "--prometheus", stored["prometheus"],
                        "--source", "prometheus"], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    return r


def _summary(stored, run_id: str) -> dict:
    r = benchwatch(stored, "snapshot", run_id, "--out", str(stored["out"] / run_id))
    with open(os.path.join(r.stdout.split()[0], "summary.json"), encoding="utf-8") as f:
        return json.load(f)


def _without_ids(value, run_id: str):
    return json.loads(json.dumps(value).replace(run_id, "RUN"))


def test_snapshot_of_a_run_stored_under_the_old_names_equals_the_new(stored):
    old, new = _summary(stored, OLD), _summary(stored, NEW)
    assert old["source"] == new["source"] == "prometheus"
    assert old["run"]["tool"] == "pgbench" and old["run"]["engine"] == "postgresql"
    assert old.get("tps") or old.get("throughput") or old  # a summary with figures
    # The run_info labels as stored: the old run's have no tool, the rest is the same.
    assert "tool" not in old["run"]["labels"] and new["run"]["labels"].pop("tool") == "pgbench"
    assert _without_ids(old, OLD) == _without_ids(new, NEW)


def test_explain_reads_the_old_names(stored):
    old = json.loads(benchwatch(stored, "explain", OLD, "--json").stdout)
    new = json.loads(benchwatch(stored, "explain", NEW, "--json").stdout)
    assert old["run_start"] is not None
    assert _without_ids(old, OLD) == _without_ids(new, NEW)


def test_compare_an_old_run_with_a_new_one(stored):
    r = benchwatch(stored, "compare", OLD, NEW, "--names", "BEFORE,AFTER", "-o", str(stored["out"] / "compare"))
    with open(os.path.join(r.stdout.split()[0], "compare.md"), encoding="utf-8") as f:
        summary = f.read().split("## Stability")[0]  # the side-by-side summary, not the stability table
    rows = [line for line in summary.splitlines(keepends=True) if line.startswith("| TPS")]
    # The same run under both names: every TPS figure found for both, and equal.
    assert len(rows) >= 4 and all(line.rstrip().endswith("| +0.0% |") for line in rows), rows


def test_the_stability_of_a_stored_run(stored):
    """A run stored before summary.json version 2 (before summary.json at all): its stability profile is computed
    from its raw output, its dips by cause from its archived series; the snapshot and compare show it."""
    from benchwatch.record import outcome, rundir
    from benchwatch.stability import runs

    run = rundir.RunDir(os.path.join(stored["state"], "runs", OLD))
    assert outcome.read(run) is None  # as stored: no summary.json
    kept = runs.outcome(run)
    assert kept["version"] == 2 and kept["stability"]["dips"] == 1
    assert list(kept["stability"]["dips_by_cause"]) == ["checkpoint"]
    assert outcome.read(run) is None  # reading it wrote nothing
    snapshot = _summary(stored, OLD)["stability"]
    assert (snapshot["intervals"], snapshot["dips"], snapshot["tps_cov"]) == (
        kept["stability"]["intervals"], kept["stability"]["dips"], kept["stability"]["tps_cov"])
    # This Prometheus holds the run's own series only, not the server's: the snapshot read from it cannot
    # name the checkpoint the archived series show, and says so.
    assert list(snapshot["dips_by_cause"]) == ["unexplained"]
    r = benchwatch(stored, "compare", OLD, NEW, "--names", "BEFORE,AFTER", "-o", str(stored["out"] / "compare-stability"))
    with open(os.path.join(r.stdout.split()[0], "compare.md"), encoding="utf-8") as f:
        text = f.read()
    assert "## Stability (steady part of each run)" in text
    cov = next(line for line in text.splitlines() if line.startswith("| TPS coefficient of variation"))
    assert cov.rstrip().endswith("| same |")  # the same run twice
    assert "stability: no run is steadier than another on any measure" in r.stderr
