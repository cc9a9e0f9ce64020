"""Every panel target, annotation and variable query of every dashboard, run as Grafana would
against the live Prometheus fed by a real run: none may error, none may come back empty."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import threading
import time

import pytest

from benchwatch.dashboards.run import run_dashboards
from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.query import grafana as gq
from benchwatch.util import processes
from tests.helpers.dashboards import (
    autovacuum_annotation,
    logged_autovacuums,
    other_commands_annotation,
    other_engines_annotation,
    read_from_disk,
)
from tests.helpers.prometheus import query
from tests.helpers.throwaway import REPO_ROOT

pytestmark = pytest.mark.integration

DASHBOARDS = os.path.join(REPO_ROOT, "dashboards")


@pytest.fixture(scope="module")
def observed_run(live_stack):
    """A run exercising every panel and annotation: -R/-L (lag, skipped), --max-tries (retried), -l (percentiles),
    -r, a CHECKPOINT, and a 3 s lock on pgbench_branches (a TPS dip for the dips annotation)."""
    env = live_stack.pg_env()

    def checkpoint_later():
        time.sleep(8)
        subprocess.run([os.path.join(pg_bindir(), "psql"), "-X", "-qc", "CHECKPOINT"], env=env, capture_output=True)

    def lock_later():
        time.sleep(12)
        subprocess.run([os.path.join(pg_bindir(), "psql"), "-X", "-qc",
                        "BEGIN; LOCK TABLE pgbench_branches; SELECT pg_sleep(3); COMMIT;"], env=env, capture_output=True)

    def read_from_disk_later():
        read_from_disk(os.path.join(live_stack.state_dir, "pg"))  # a table's file or a WAL segment

    threads = [threading.Thread(target=checkpoint_later), threading.Thread(target=lock_later),
               threading.Thread(target=read_from_disk_later)]
    for t in threads:
        t.start()
    r = live_stack.benchwatch("run", "--", "pgbench", "-n", "-r", "-l", "-P", "1", "-c", "4", "-j", "2", "-T", "20",
                              "-R", "800", "-L", "50", "--max-tries", "3")
    for t in threads:
        t.join()
    assert r.returncode == 0, r.stderr
    run_id = [l.split()[2].rstrip(":") for l in r.stderr.decode().splitlines() if l.startswith("benchwatch: run ")][0]
    ok = processes.wait_until(lambda: bool(query(live_stack.prometheus, f'benchmark_running{{run_id="{run_id}"}} == 0')), 30, 0.2)
    assert ok
    # The exporter writes each finished dip within a few seconds of the run's end.
    assert processes.wait_until(lambda: bool(query(live_stack.prometheus, f'benchmark_dip_info{{run_id="{run_id}"}}[5m]')), 15, 0.2)
    meta = json.load(open(os.path.join(live_stack.state_dir, "runs", run_id, "meta.json")))
    # The range a user would look at: the run, with a little margin.
    return run_id, meta["clock_start_epoch"] - 5, meta["ended_at"] + 5


def all_queries():
    out = []
    # The run dashboards of other tools or engines read runs of those: test_sysbench_dashboard.py and
    # test_tool_engine_matrix.py run their queries on real runs of them.
    others = {d.file for d in run_dashboards() if d.generator.name != "pgbench" or d.engine.name != "postgresql"}
    others.add("history.json")  # runs over calendar time: test_history.py runs its queries on a real history
    others.add("experiment.json")  # an experiment's report: test_sweep.py runs its queries on one
    for name in sorted(f for f in os.listdir(DASHBOARDS) if f.endswith(".json") and f not in others):
        with open(os.path.join(DASHBOARDS, name), encoding="utf-8") as f:
            dash = json.load(f)
        out.extend((name, q) for q in gq.dashboard_queries(dash))
    return out


QUERIES = all_queries()


CHECKPOINT_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) (\w+) \[\d+\] LOG:  checkpoint (starting|complete): ?(.*)$")


def logged_checkpoint_reasons(log_file: str, start: float, end: float) -> list[str]:
    """Reasons of the checkpoints the server log shows overlapping [start, end]: what the annotations must draw."""
    reasons, open_ = [], None
    with open(log_file, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = CHECKPOINT_LINE.match(line.rstrip("\n"))
            if not m:
                continue
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.UTC).timestamp()
            if m.group(3) == "starting":
                open_ = (m.group(4).strip(), t)
            elif open_ is not None:
                reason, t0 = open_
                open_ = None
                # The annotation query looks back 1 s (max_over_time over the step).
                if t0 <= end and t >= start - 1:
                    reasons.append(reason)
    return reasons  # completed ones: pg_checkpoint_info is written at completion


def expected_to_have_data(live_stack, q, start: float, end: float) -> bool:
    """Checkpoint annotations of one reason have data exactly when the server log has such checkpoints, the
    autovacuum one when it has autovacuum runs; another engine's regions (InnoDB's) never on this PostgreSQL stack."""
    if other_engines_annotation(q.source, "postgresql") or other_commands_annotation(q.source):
        return False
    if autovacuum_annotation(q.source):  # the annotation query looks back 1 s (max_over_time over the step)
        return bool(logged_autovacuums(live_stack.stack.log_file("postgres"), start - 1, end))
    m = re.search(r'reason(=~|!~)"([^"]*)"', q.expr)
    if not m or not q.source.startswith("annotation"):
        return True
    matches = [re.fullmatch(m.group(2), r) is not None for r in logged_checkpoint_reasons(live_stack.stack.log_file("postgres"), start, end)]
    return any(matches) if m.group(1) == "=~" else any(not x for x in matches)


@pytest.fixture(scope="module")
def one_target(live_stack, observed_run):
    """A single value of the target variable, as a user picks it in Grafana's drop-down."""
    _, start, end = observed_run
    with open(os.path.join(DASHBOARDS, "pgbench-run.json"), encoding="utf-8") as f:
        dash = json.load(f)
    q = [q for q in gq.dashboard_queries(dash) if q.source == "variable target"][0]
    values = sorted({r["metric"][q.legend] for r in gq.run_query(live_stack.prometheus, q, {}, start, end) if q.legend in r["metric"]})
    # The labelling contract: every database-side series carries the target it is about.
    assert values, f"no series answers the target variable ({q.expr}): the stack's series carry no target label"
    return values[0]


@pytest.mark.parametrize("selection", ["All", "one target"])
@pytest.mark.parametrize("name, q", QUERIES, ids=[f"{n}:{q.source}" for n, q in QUERIES])
def test_query_returns_data(live_stack, observed_run, request, name, q, selection):
    run_id, start, end = observed_run
    with open(os.path.join(DASHBOARDS, name), encoding="utf-8") as f:
        defaults = gq.default_variables(json.load(f))  # e.g. device: "All", target: "All"
    assert defaults["target"] == ".*"
    variables = {**defaults, "run_id": run_id, "datasource": "benchwatch-prometheus"}
    if selection == "one target":
        # The stack watches one database: picking it alone must show what All shows.
        variables["target"] = request.getfixturevalue("one_target")
    before = expected_to_have_data(live_stack, q, start, end)
    result = gq.run_query(live_stack.prometheus, q, variables, start, end)
    # A checkpoint may complete while the query runs: either side of it is right.
    if before != expected_to_have_data(live_stack, q, start, end):
        return
    if before:
        assert result, f"{name} {q.source}: no data for {gq.expand(q.expr, variables, end - start)}"
    else:
        assert not result, f"{name} {q.source}: data although the server log has no such checkpoint (or another engine's)"


def test_the_run_had_a_requested_checkpoint(live_stack, observed_run):
    _, start, end = observed_run
    assert "immediate force wait" in logged_checkpoint_reasons(live_stack.stack.log_file("postgres"), start, end)


def test_run_picker_lists_the_run_newest_first(live_stack, observed_run):
    run_id, start, end = observed_run
    with open(os.path.join(DASHBOARDS, "pgbench-run.json"), encoding="utf-8") as f:
        dash = json.load(f)
    var = [v for v in dash["templating"]["list"] if v["name"] == "run_id"][0]
    q = [q for q in gq.dashboard_queries(dash) if q.source == "variable run_id"][0]
    # Over a wide range so earlier runs of this session are listed too.
    result = gq.run_query(live_stack.prometheus, q, {}, start - 3600, end)
    options = gq.variable_options(result, var["regex"])
    assert options[0][1] == run_id, options
    assert options[0][0].startswith(f"{run_id} — tpcb-like, 4 clients, scale 2")
