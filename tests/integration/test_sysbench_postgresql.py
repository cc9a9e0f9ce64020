"""sysbench's pgsql driver on the stack's embedded PostgreSQL 15 (the fourth cell of issue 19's matrix, beside
pgbench on PostgreSQL in test_dashboards.py, sysbench on MariaDB in test_sysbench_dashboard.py and go-tpc on
MariaDB in test_gotpc_mariadb.py): watched as a PostgreSQL run, not as an InnoDB one.

Every report is stored at its own time and drawn by a 1 s query_range; its run dashboard is "sysbench on
PostgreSQL" with PostgreSQL's checkpoint regions (a CHECKPOINT during the run draws one) and none of InnoDB's;
meta.json has the engine, the server version and its capabilities; the snapshot and explain take it as a
PostgreSQL run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time

import pytest

from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.query import grafana as gq
from benchwatch.query.prometheus import query, query_range
from benchwatch.util.processes import wait_until
from tests.helpers.dashboards import autovacuum_annotation, other_commands_annotation, read_from_disk
from tests.helpers.tools import require_tool
from tests.integration.test_dashboards import DASHBOARDS

pytestmark = pytest.mark.integration

TABLES = ["--tables=2", "--table-size=10000"]
REPORT = re.compile(rb"^\[ (\d+)s \] thds: \d+ tps: ([0-9.]+) ")
DASHBOARD = "sysbench-postgresql.json"


@pytest.fixture(scope="module")
def pgsql_run(live_stack):
    """sysbench oltp_read_write --db-driver=pgsql for 10 s with a CHECKPOINT at 5 s; benchwatch adds the
    connection (the stack's PG* variables as --pgsql-* options)."""
    require_tool("sysbench")
    live = live_stack
    r = live.benchwatch("run", "--", "sysbench", "oltp_read_write", "--db-driver=pgsql", *TABLES, "prepare")
    assert r.returncode == 0, r.stderr.decode()
    assert b"added --pgsql-host=" in r.stderr  # said, on benchwatch's own stderr line
    env = live.pg_env()

    def checkpoint_later():
        time.sleep(5)
        subprocess.run([os.path.join(pg_bindir(), "psql"), "-X", "-qc", "CHECKPOINT"], env=env, capture_output=True)

    t = threading.Thread(target=checkpoint_later)
    # The r_await panel needs reads that reach the device during the run: the tables are all in the page cache
    # (CI saw none in one run).
    reads = threading.Thread(target=read_from_disk, args=(os.path.join(live.state_dir, "pg"), 2.0, 7))
    t.start()
    reads.start()
    r = live.benchwatch("run", "--", "sysbench", "oltp_read_write", "--db-driver=pgsql", *TABLES,
                        "--threads=2", "--time=10", "--report-interval=1", "run")
    t.join()
    reads.join()
    assert r.returncode == 0, r.stderr.decode()
    run_id = re.search(rb"benchwatch: run (\S+):", r.stderr).group(1).decode()
    assert wait_until(lambda: bool(query(live.prometheus, f'benchmark_running{{run_id="{run_id}"}} == 0')), 30, 0.2)
    reports = [(int(m.group(1)), float(m.group(2))) for m in map(REPORT.match, r.stdout.splitlines()) if m]
    meta = json.load(open(os.path.join(live.state_dir, "runs", run_id, "meta.json")))
    # The checkpoint's region is written when the server log says it completed.
    assert wait_until(lambda: bool(query(live.prometheus, "pg_checkpoint_info[5m]")), 30, 0.2)
    yield {"run_id": run_id, "reports": reports, "meta": meta,
           "start": meta["clock_start_epoch"] - 5, "end": meta["ended_at"] + 5}
    live.benchwatch("run", "--", "sysbench", "oltp_read_write", "--db-driver=pgsql", *TABLES, "cleanup")


def test_meta_says_postgresql_with_its_version_and_capabilities(pgsql_run):
    meta = pgsql_run["meta"]
    assert meta["tool"] == "sysbench" and meta["engine"] == "postgresql"
    assert re.match(r"15\.\d+", str(meta["server_version"])), meta.get("server_version")
    assert meta["capabilities"]["pg_stat_wal"] is True  # from 14
    assert meta["capabilities"]["pg_stat_checkpointer"] is False  # from 17
    assert not any("pgsql-password" in a for a in meta["argv"])


def test_every_report_is_stored_at_its_own_time(live_stack, pgsql_run):
    run_id, reports, meta = pgsql_run["run_id"], pgsql_run["reports"], pgsql_run["meta"]
    assert len(reports) >= 9
    result = query_range(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}",tool="sysbench"}}',
                         pgsql_run["start"], pgsql_run["end"], 1)
    assert len(result) == 1, result  # one series: no scraped twin
    points = {round(float(t) - meta["clock_start_epoch"]): float(v) for t, v in result[0]["values"]}
    for elapsed, tps in reports:
        assert points.get(elapsed) == pytest.approx(tps, rel=1e-6), (elapsed, tps, points)


def test_its_run_dashboard_draws_postgresql_not_innodb(live_stack, pgsql_run):
    with open(os.path.join(DASHBOARDS, DASHBOARD), encoding="utf-8") as f:
        dash = json.load(f)
    annotations = [a["name"] for a in dash["annotations"]["list"] if not a.get("builtIn")]
    assert "Checkpoints: requested" in annotations
    assert not [a for a in annotations if "InnoDB" in a]
    assert "InnoDB" not in json.dumps(dash["panels"])
    variables = {**gq.default_variables(dash), "run_id": pgsql_run["run_id"], "datasource": "benchwatch-prometheus"}
    empty = []
    for q in gq.dashboard_queries(dash):
        if q.source.startswith("annotation 'Checkpoints: ") and "requested" not in q.source:
            continue  # only the run's CHECKPOINT is certain; time- or WAL-driven ones may or may not come
        if other_commands_annotation(q.source):
            continue  # a sweep's runs, annotate's events: tested where they happen (test_sweep, test_history)
        if autovacuum_annotation(q.source):
            continue  # autovacuum may or may not come during a short run (test_dashboards checks it against the log)
        if q.source == "annotation 'TPS dips: cause'" or "too_frequent" in q.expr:
            continue  # a steady run need not dip, nor log "checkpoints are occurring too frequently"
        if not gq.run_query(live_stack.prometheus, q, variables, pgsql_run["start"], pgsql_run["end"]):
            empty.append(f"{q.source}: {gq.expand(q.expr, variables, pgsql_run['end'] - pgsql_run['start'])}")
    assert not empty, "no data for:\n" + "\n".join(empty)
    picker = [q for q in gq.dashboard_queries(dash) if q.source == "variable run_id"][0]
    var = [v for v in dash["templating"]["list"] if v["name"] == "run_id"][0]
    options = gq.variable_options(gq.run_query(live_stack.prometheus, picker, {}, pgsql_run["start"], pgsql_run["end"]),
                                  var["regex"])
    # Its runs only (the prepare is one too): no run of another tool or on another engine.
    assert pgsql_run["run_id"] in [v for _, v in options]
    assert all(text.split(" — ")[1].startswith("sysbench oltp_read_write") for text, _ in options), options


def test_snapshot_and_explain_take_it_as_a_postgresql_run(live_stack, pgsql_run, tmp_path):
    run_id = pgsql_run["run_id"]
    r = live_stack.benchwatch("snapshot", run_id, "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()
    directory = r.stdout.decode().split()[0]
    summary = json.load(open(os.path.join(directory, "summary.json")))
    assert summary["run"]["tool"] == "sysbench" and summary["run"]["engine"] == "postgresql"
    text = json.dumps(summary)
    assert "checkpoint" in text.lower() and "innodb" not in text.lower()
    grafana = json.load(open(os.path.join(directory, "grafana-snapshot.json")))
    assert grafana["dashboard"]["uid"] == "benchwatch-sysbench-postgresql"
    r = live_stack.benchwatch("explain", run_id, "--json")
    assert r.returncode == 0, r.stderr.decode()
    report = json.loads(r.stdout)
    causes = {d["cause"] for d in report["dips"]} | {c["cause"] for d in report["dips"] for c in d["candidates"]}
    assert "innodb_flushing" not in causes
