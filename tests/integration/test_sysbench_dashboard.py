"""The "sysbench on InnoDB" dashboard, snapshot and compare on a real write-heavy sysbench run on the
embedded MariaDB 10.11: every panel, annotation and variable query returns data as Grafana would run it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading

import pytest

from benchwatch.query import grafana as gq
from benchwatch.util.processes import wait_until
from tests.helpers import throwaway
from tests.helpers.dashboards import other_commands_annotation, read_from_disk
from tests.helpers.prometheus import query
from tests.helpers.throwaway import REPO_ROOT

pytestmark = pytest.mark.integration

DASHBOARD = os.path.join(REPO_ROOT, "dashboards", "sysbench-innodb.json")
TABLES = ["--tables=2", "--table-size=10000"]



def sysbench_run(live, *args: str) -> str:
    r = live.benchwatch("run", "--", "sysbench", "oltp_write_only", *TABLES, *args, "run", timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    run_id = re.search(rb"benchwatch: run (\S+):", r.stderr).group(1).decode()
    assert wait_until(lambda: bool(query(live.prometheus, f'benchmark_running{{run_id="{run_id}"}} == 0')), 30, 0.2)
    return run_id


@pytest.fixture(scope="module")
def runs(mariadb_stack):
    """A write-heavy run under flushing pressure, and a short one to compare it with.

    A dirty-page limit of 2% stands in for a buffer pool far smaller than the working set: the
    page cleaner works against the limit within seconds, as it would with a small pool."""
    live = mariadb_stack
    r = live.benchwatch("run", "--", "sysbench", "oltp_write_only", *TABLES, "prepare", timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    live.mariadb("SET GLOBAL innodb_max_dirty_pages_pct = 2; SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0;")
    # Reads that reach the device during the run, for the r_await panel (a write-only run on cached tables,
    # on a quiet machine, read nothing from the disk: the panel had no data in a rehearsal).
    reads = threading.Thread(target=read_from_disk, args=(live.state_dir, 3.0))
    reads.start()
    try:
        pressured = sysbench_run(live, "--threads=2", "--time=15", "--report-interval=1")
    finally:
        reads.join()
        live.mariadb("SET GLOBAL innodb_max_dirty_pages_pct = 90;")
    calm = sysbench_run(live, "--threads=1", "--time=5", "--percentile=99")
    return pressured, calm


def window(live, run_id: str) -> tuple[float, float]:
    meta = json.load(open(os.path.join(live.state_dir, "runs", run_id, "meta.json")))
    return meta["clock_start_epoch"] - 5, meta["ended_at"] + 5


with open(DASHBOARD, encoding="utf-8") as f:
    QUERIES = gq.dashboard_queries(json.load(f))


@pytest.mark.parametrize("selection", ["All", "local"])
@pytest.mark.parametrize("q", QUERIES, ids=[q.source for q in QUERIES])
def test_every_query_returns_data(mariadb_stack, runs, q, selection):
    run_id = runs[0]
    start, end = window(mariadb_stack, run_id)
    with open(DASHBOARD, encoding="utf-8") as f:
        variables = {**gq.default_variables(json.load(f)), "run_id": run_id, "datasource": "benchwatch-prometheus"}
    if selection != "All":
        variables["target"] = selection
    result = gq.run_query(mariadb_stack.prometheus, q, variables, start, end)
    if other_commands_annotation(q.source):
        assert not result, f"{q.source}: data, though no sweep ran and nothing was annotated"
        return
    if "dip_info" in q.expr and not run_has_dips(mariadb_stack, run_id):
        # The dips annotation draws what explain finds, and a run under pressure need not dip below 80 %
        # (the live detector, which sees only past lines, may still have drawn a mild one: either is right).
        return
    assert result, f"{q.source}: no data for {gq.expand(q.expr, variables, end - start)}"


_DIPS: dict[str, bool] = {}


def run_has_dips(live, run_id: str) -> bool:
    """Whether `benchwatch explain` finds a TPS dip in the run."""
    if run_id not in _DIPS:
        r = live.benchwatch("explain", run_id, "--json", timeout=120)
        assert r.returncode == 0, r.stderr
        _DIPS[run_id] = bool(json.loads(r.stdout)["dips"])
    return _DIPS[run_id]


def test_flushing_pressure_regions_overlap_the_run(mariadb_stack, runs):
    run_id = runs[0]
    start, end = window(mariadb_stack, run_id)
    q = [q for q in QUERIES if q.source == "annotation 'InnoDB flushing pressure'"][0]
    result = gq.run_query(mariadb_stack.prometheus, q, {"target": ".*"}, start, end)
    assert [r["metric"]["target"] for r in result] == ["local"]
    assert sum(1 for _, v in result[0]["values"] if v == "1") >= 2


def test_run_pickers_list_sysbench_runs_by_test_and_threads(mariadb_stack, runs):
    pressured, calm = runs
    start, _ = window(mariadb_stack, pressured)
    _, end = window(mariadb_stack, calm)
    def picker(name: str) -> list:
        with open(os.path.join(REPO_ROOT, "dashboards", name), encoding="utf-8") as f:
            dash = json.load(f)
        var = [v for v in dash["templating"]["list"] if v["name"] == "run_id"][0]
        q = [q for q in gq.dashboard_queries(dash) if q.source == "variable run_id"][0]
        return gq.variable_options(gq.run_query(mariadb_stack.prometheus, q, {}, start, end), var["regex"])

    assert picker("sysbench-innodb.json")[:2] == [(f"{calm} — sysbench oltp_write_only, 1 threads", calm),
                                                  (f"{pressured} — sysbench oltp_write_only, 2 threads", pressured)]
    # Each run dashboard lists the runs of its own tool on its own engine: no sysbench run on
    # PostgreSQL here, and the pgbench dashboard lists no sysbench run.
    assert picker("sysbench-postgresql.json") == []
    assert picker("pgbench-run.json") == []


def test_snapshot_of_a_sysbench_run(mariadb_stack, runs, tmp_path):
    run_id = runs[0]
    for source in ("prometheus", "raw"):
        out = tmp_path / source
        r = mariadb_stack.benchwatch("snapshot", run_id, "--out", str(out), "--source", source, timeout=300)
        assert r.returncode == 0, r.stderr.decode()
        directory = r.stdout.decode().split("\n")[0]
        body = json.load(open(os.path.join(directory, "grafana-snapshot.json")))
        assert body["dashboard"]["uid"] == "benchwatch-sysbench-innodb" and body["name"] == f"sysbench run {run_id}"
        summary = json.load(open(os.path.join(directory, "summary.json")))
        assert summary["run"]["tool"] == "sysbench" and summary["sysbench"]["latency_quantile"] == "0.95"
        assert summary["flushing_pressure"] and {p["target"] for p in summary["flushing_pressure"]} == {"local"}, source
        md = open(os.path.join(directory, "summary.md")).read()
        assert md.startswith(f"# sysbench run {run_id}") and "## InnoDB flushing pressure" in md
        assert "innodb_max_dirty_pages_pct" in md and "## Checkpoints" not in md
        password = mariadb_stack.stack.server.targets()[0].client_params()["password"]
        for root, _, files in os.walk(directory):
            for name in files:
                assert password.encode() not in open(os.path.join(root, name), "rb").read(), name


def test_compare_of_sysbench_runs(mariadb_stack, runs, tmp_path):
    pressured, calm = runs
    r = mariadb_stack.benchwatch("compare", pressured, calm, "--names", "pressured,calm", "--out", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    directory = r.stdout.decode().split("\n")[0]
    md = open(os.path.join(directory, "summary.md")).read() if os.path.exists(os.path.join(directory, "summary.md")) else \
        open([os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(".md")][0]).read()
    assert md.startswith("# sysbench runs compared")
    for row in ("TPS (sysbench summary)", "QPS (sysbench summary)", "latency percentile (sysbench summary)",
                "InnoDB flushing pressure seconds"):
        assert f"| {row} |" in md, row
    assert "| TPS (pgbench summary) |" not in md


def test_attach_follows_a_sysbench_pipe(mariadb_stack, runs):
    """sysbench started by the user, its stdout piped to `benchwatch attach --tool sysbench`."""
    live = mariadb_stack
    sysbench = subprocess.Popen(["sysbench", f"--config-file={live.stack.server.targets()[0].sysbench_file}", "oltp_write_only",
                                 *TABLES, "--threads=1", "--time=4", "--report-interval=1", "run"], stdout=subprocess.PIPE)
    attach = subprocess.run([throwaway.BENCHWATCH, "attach", "--tool", "sysbench", "--sysbench-args",
                             "oltp_write_only --threads=1 --time=4 run"], stdin=sysbench.stdout, env=live.env(),
                            capture_output=True, timeout=120)
    sysbench.stdout.close()
    assert sysbench.wait(60) == 0 and attach.returncode == 0, attach.stderr.decode()
    printed = [line for line in attach.stdout.split(b"\n") if re.match(rb"^\[ *\d+s \] thds:", line)]
    run_id = re.search(rb"benchwatch: run (\S+):", attach.stderr).group(1).decode()
    assert len(printed) >= 3

    def stored() -> int:
        result = query(live.prometheus, f'count_over_time(benchmark_progress_tps{{run_id="{run_id}",tool="sysbench"}}[10m])')
        return int(float(result[0]["value"][1])) if result else 0

    assert wait_until(lambda: stored() == len(printed), 30, 0.5), (stored(), len(printed))
    info = query(live.prometheus, f'last_over_time(benchmark_run_info{{run_id="{run_id}"}}[10m])')
    assert info[0]["metric"]["script"] == "oltp_write_only" and info[0]["metric"]["mode"] == "attach"
