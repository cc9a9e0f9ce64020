"""``sweep --profile`` and ``attach --profile`` on a real PostgreSQL 15 stack (issue 30): every repeat of a sweep
profiled and folded before the next run starts, and the report's profile part names in words where the
database's CPU went between two variants; a run piped into ``attach --profile`` keeps its profile too.

The sweep is issue 30's synchronous_commit acceptance: off against on, on a one-INSERT-per-transaction
script whose commit is mostly its WAL flush, so with synchronous_commit on the backends' share of the CPU in
WAL flushing (XLogFlush and what it calls, issue_xlog_fsync, the kernel's fdatasync path) is the largest
change, and with it off that share falls. Repeats: 3 per variant, interleaved (the sweep's default), runs of
8 s, 2 clients (figures in docs/profiles.md).

The same sweep is also where the sweep's own verdict on a known effect is checked (it was a sweep of its own in
test_sweep.py, the same script and variants, unprofiled): synchronous_commit off is "faster" with WAL flushing
as its why, the settings are restored, the report's bundle and the Experiment dashboard's queries answer for it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from benchwatch.query import grafana as gq
from benchwatch.query.prometheus import query
from tests.helpers import throwaway
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration

# Functions of WAL flushing on the commit's path (PostgreSQL's and the kernel's): any of them falling is the
# effect of synchronous_commit off, whichever unwinding reached.
WAL_FLUSHING = ("XLogFlush", "issue_xlog_fsync", "XLogWrite", "pg_fdatasync", "fdatasync", "__x64_sys_fdatasync",
                "do_fsync", "vfs_fsync_range", "ext4_sync_file", "file_write_and_wait_range")


@pytest.fixture(scope="module")
def live():
    require_tool("perf")
    stack = throwaway.start(scale=1)
    try:
        yield stack
    finally:
        left = stack.close()
        assert not left, f"still running after down: {left}"


@pytest.fixture(scope="module")
def syncprof(live, tmp_path_factory):
    """The synchronous_commit sweep, profiled: (its stderr, its report's JSON model)."""
    assert live.psql("SHOW fsync") == "on", "the stack's server runs without fsync: this effect cannot show"
    script = tmp_path_factory.mktemp("syncprof") / "commit.sql"
    script.write_text("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, 1, 1, now());\n")
    script.chmod(0o644)
    r = live.benchwatch("sweep", "--name", "syncprof", "--profile", "--variant", "on",
                        "--variant", "off:synchronous_commit=off", "--repeat", "3", "--",
                        "pgbench", "-n", "-c", "2", "-j", "2", "-f", str(script), "-T", "8", timeout=900)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    return err, json.loads(_report(live, "syncprof", "--json").stdout)


def test_synchronous_commit_off_is_faster_and_the_why_names_wal_flushing(live, syncprof):
    err, model = syncprof
    assert "variant off: ALTER SYSTEM SET synchronous_commit = 'off'; pg_reload_conf()" in err
    assert live.psql("SHOW synchronous_commit") == "on"  # restored
    assert "CHECKPOINT" in model["between_runs"] and "TRUNCATE pgbench_history" in model["between_runs"]
    # One INSERT per transaction: the commit's WAL flush is most of its cost, so the effect (2-4x here) stands far
    # out of a shared machine's noise; 3 rounds of 8 s a side give Welch's t the degrees of freedom to show it.
    (d,) = model["differences"]
    assert d["verdict"] == "faster", d
    assert d["ratio"] > 1 and d["ratio_ci"][0] > 1
    signals = " | ".join(w["signal"] for w in d["why"])
    assert "WAL sync" in signals or "WALSync" in signals or "WALWrite" in signals, d["why"]
    wal = [w for w in d["why"] if w["signal"] in ("WAL syncs per transaction", "WAL sync time per transaction")]
    assert wal and all(w["variant"] < w["baseline"] for w in wal), d["why"]
    # The bundle, its paths printed like compare's.
    r = _report(live, "syncprof")
    out = os.path.join(live.state_dir, "shares", "sweep-syncprof")
    assert r.stdout.decode().split() == [out, out + ".tar.gz"]
    # One cell (nothing swept but the variant): the figure's axis is the cell (by clients: test_sweep.py's A/A).
    for name in ("index.html", "report.md", "report.json", "cells.csv", "differences.csv", "tps-by-cell.png"):
        assert os.path.getsize(os.path.join(out, name)) > 0, name
    with open(os.path.join(out, "report.md")) as f:
        assert "| off | all |" in f.read()
    # The Experiment dashboard: each of its queries answers for this experiment, from the series the report wrote.
    with open(os.path.join(throwaway.REPO_ROOT, "dashboards", "experiment.json")) as f:
        dash = json.load(f)
    variables = {**gq.default_variables(dash), "experiment": "syncprof", "datasource": "benchwatch-prometheus"}
    end = time.time()
    for q in gq.dashboard_queries(dash):
        if "stability" in q.expr:
            continue  # runs without -P print no progress lines: no stability profile, no series to draw
        result = gq.run_query(live.prometheus, q, variables, end - 900, end)
        assert result, f"{q.source}: no data for {gq.expand(q.expr, variables, 900)}"
        if q.source == "variable experiment":
            assert "syncprof" in {r["metric"].get("experiment") for r in result}
    verdicts = query(live.prometheus, 'last_over_time(benchwatch_experiment_verdict{experiment="syncprof"}[15m])')
    assert [float(r["value"][1]) for r in verdicts] == [1.0]
    # The run dashboard draws the experiment's runs, each with its variant, cell and round.
    with open(os.path.join(throwaway.REPO_ROOT, "dashboards", "pgbench-run.json")) as f:
        run_dash = json.load(f)
    (q,) = [q for q in gq.dashboard_queries(run_dash) if q.source == "annotation 'experiment runs (benchwatch sweep)'"]
    drawn = gq.run_query(live.prometheus, q, {**gq.default_variables(run_dash), "datasource": "benchwatch-prometheus"},
                         end - 900, end)
    cells = {(r["metric"]["variant"], r["metric"]["cell"], r["metric"]["repeat"]) for r in drawn
             if r["metric"].get("sweep") == "syncprof"}
    # (runs of 8 s are each seen running at the 1 s step; test_sweep.py's 3 s runs were not always)
    assert {v for v, _, _ in cells} == {"on", "off"} and len(cells) >= 5, sorted(cells)


def test_synchronous_commit_off_profiled_names_wal_flushing_falling(live, syncprof, tmp_path):
    _, model = syncprof
    part = model["profile"]
    (d,) = part["differences"]
    assert d["variant"] == "off" and d["profiled_runs"] == [3, 3], json.dumps(d, indent=1)[:3000]
    falling = [f for f in d["functions"] if f["function"] in WAL_FLUSHING and f["change"] < 0 and f["excludes_zero"]]
    print(json.dumps(d["functions"][:6], indent=1))
    from benchwatch.profile import variants
    for variant in ("on", "off"):
        for run_id in next(c for c in model["cells"] if c["variant"] == variant)["run_ids"]:
            shares = variants.run_shares(os.path.join(live.state_dir, "runs", run_id))
            print(variant, run_id, shares and shares["samples"], shares and {f: round(shares["total"].get(f, 0), 3) for f in WAL_FLUSHING[:2]})
    print(d["words"])
    assert falling, json.dumps(d["functions"], indent=1)
    # Named in words, as the text report says them.
    assert any(w.startswith(f"`{f['function']}`") for f in falling for w in d["words"]), d["words"]
    text = _report(live, "syncprof").stderr.decode()
    assert any(f"`{f['function']}`" in text for f in falling), text

    # compare of two of those runs, one a side: the same functions in words, no interval (one run a side).
    on_run = next(c for c in model["cells"] if c["variant"] == "on")["run_ids"][0]
    off_run = next(c for c in model["cells"] if c["variant"] == "off")["run_ids"][0]
    r = live.benchwatch("compare", on_run, off_run, "--names", "on,off", "--out", str(tmp_path / "cmp"), timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    directory = r.stdout.decode().split()[0]
    with open(os.path.join(directory, "profile.json"), encoding="utf-8") as f:
        (pair,) = json.load(f)["differences"]
    flushing = [f for f in pair["functions"] if f["function"] in WAL_FLUSHING and f["change"] < 0]
    assert flushing and flushing[0]["change_ci"] is None, json.dumps(pair["functions"][:8], indent=1)
    assert "one run a side" in r.stderr.decode(), r.stderr.decode()


def test_a_run_piped_into_attach_profile_keeps_its_profile(live):
    pgbench = subprocess.Popen([os.path.join(throwaway.pg_bindir(), "pgbench"), "-n", "-c", "2", "-j", "2", "-P", "1",
                                "-T", "5"], env=live.pg_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        r = live.benchwatch("attach", "--profile", "--tool", "pgbench", stdin=pgbench.stdout, timeout=180)
    finally:
        pgbench.stdout.close()
        assert pgbench.wait(60) == 0
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "benchwatch: profile: " in err and "profiling off" not in err, err
    run_ids = re.findall(r"^benchwatch: run (\S+): output saved in ", err, re.M)
    assert len(run_ids) == 1, err
    with open(os.path.join(live.state_dir, "runs", run_ids[0], "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    assert meta["profile"]["state"] == "profiled" and meta["profile"]["samples"] > 50, meta["profile"]
    assert os.path.exists(os.path.join(live.state_dir, "runs", run_ids[0], "profile", "slices.tsv.gz"))


def _report(live, name: str, *args: str) -> subprocess.CompletedProcess:
    r = live.benchwatch("report", name, *args, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return r
