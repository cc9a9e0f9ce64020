"""Dashboards as code: committed JSON is what the generator makes, and every panel is complete."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from benchwatch.grafana.panels import ON_TARGET_HOSTS, RESULTS_TYPE
from benchwatch.query import grafana as gq
from benchwatch.query import promql

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARDS = os.path.join(ROOT, "dashboards")
FILES = sorted(f for f in os.listdir(DASHBOARDS) if f.endswith(".json"))
# History (issue 22) shows runs over calendar time, Experiment (issue 21) an experiment's report (benchwatch
# report NAME): no database over time, so no target variable, no regions.
REPORT_FILES = ["history.json", "experiment.json"]
# The dashboards of databases over time, each with the target variable.
DB_FILES = [f for f in FILES if f not in REPORT_FILES]
# The dashboards of PostgreSQL runs (checkpoint regions); *-innodb.json (sysbench's, go-tpc's) are MySQL/MariaDB's.
PG_FILES = [f for f in DB_FILES if not f.endswith("-innodb.json")]


def load(name):
    with open(os.path.join(DASHBOARDS, name), encoding="utf-8") as f:
        return json.load(f)


def panels(dash):
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


# The windows of the recording rules' expressions (benchwatch.grafana.rules), as they close a selector.
RULE_WINDOWS = ("}[3s])", "}[1m])")
# Series written every few seconds rather than scraped every second (the statements collector, every 5 s):
# where $__rate_interval holds a single sample, their panels fall back to a window that holds two.
SPARSE_WINDOWS = ("11s",)


def test_committed_json_is_regenerated():
    r = subprocess.run([sys.executable, os.path.join(DASHBOARDS, "generate.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_fixed_unique_uids():
    uids = [load(f)["uid"] for f in FILES]
    assert len(set(uids)) == len(uids) and all(u.startswith("benchwatch-") for u in uids)


@pytest.mark.parametrize("name", FILES)
def test_every_panel_is_complete(name):
    dash = load(name)
    ids = [p["id"] for p in panels(dash)]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    variables = {v["name"] for v in dash["templating"]["list"]}
    for p in panels(dash):
        where = f"{name} panel {p['id']}"
        assert p.get("title"), where
        if p["type"] == "row":  # a row header: no data of its own
            assert p.get("repeat") in (None, *variables), where
            continue
        assert p.get("description"), where
        assert p["fieldConfig"]["defaults"].get("unit"), where
        if p["datasource"]["type"] == RESULTS_TYPE:
            # a SQL panel (the results database): the results variable's data source, raw SQL in code mode
            assert p["datasource"] == {"type": RESULTS_TYPE, "uid": "${results}"}, where
            assert "results" in variables, where
            for t in p["targets"]:
                assert t["datasource"] == p["datasource"] and t["rawSql"] and t["format"] == "table", where
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", where
            # A recording rule's expression inlined at query time keeps the rule's own windows
            # (irate over the last two scrapes, as iostat; per-minute checkpoint rates).
            expr = t["expr"]
            for inlined in RULE_WINDOWS:
                expr = expr.replace(inlined, "")
            for window in re.findall(r"(?:rate|increase)\([^\[]*\[([^\]]+)\]", expr):
                # Per-second curves use $__rate_interval; stats over the selected range use $__range.
                assert window in ("$__rate_interval", "$__range", *SPARSE_WINDOWS), f"{where}: rate over [{window}]"
                if window in SPARSE_WINDOWS:  # only as the fallback of the same expression over $__rate_interval
                    assert any(part.replace(f"[{window}]", "[$__rate_interval]") in expr
                               for part in expr.split(" or ") if f"[{window}]" in part), f"{where}: [{window}] alone"
    for a in dash["annotations"]["list"]:
        if a.get("builtIn"):
            continue
        assert a["datasource"]["uid"] == "${datasource}", a["name"]
    ds = [v for v in dash["templating"]["list"] if v["name"] == "datasource"][0]
    assert ds["type"] == "datasource" and ds["current"]["value"] == "benchwatch-prometheus"


# Series about a database or its host (node_exporter, postgres_exporter, the checkpoint
# collector, their recording rules); pgbench_* series are about a run.
DATABASE_SIDE = re.compile(r"^(node_|pg_|mysql_|instance:|instance_device:|instance_datname:)")
HOST_SIDE = re.compile(r"^(instance:|instance_device:)?node_")


@pytest.mark.parametrize("name", DB_FILES)
def test_every_database_side_query_is_filtered_by_target(name):
    dash = load(name)
    checked = 0
    for q in gq.dashboard_queries(dash):
        if q.source.startswith("variable"):
            continue
        for sel in promql.selectors(q.expr):
            metric, matchers = promql.parse_matchers(sel)
            if metric and HOST_SIDE.search(metric):
                # node_exporter is scraped once per host: its series are kept for the selected targets' hosts.
                checked += 1
                assert f"and {ON_TARGET_HOSTS}" in q.expr, f"{name} {q.source}: {sel} is not joined to $target's hosts"
            elif metric and DATABASE_SIDE.match(metric):
                checked += 1
                assert ("target", "=~", "$target") in matchers, f"{name} {q.source}: {sel} is not filtered by $target"
    assert checked


@pytest.mark.parametrize("name", DB_FILES)
def test_target_variable(name):
    dash = load(name)
    names = [v["name"] for v in dash["templating"]["list"]]
    var = dash["templating"]["list"][names.index("target")]
    assert var["type"] == "query" and var["multi"] and var["includeAll"] and var["allValue"] == ".*"
    assert re.fullmatch(r"label_values\(.+,\s*target\)", var["query"]["query"])
    assert var["current"]["value"] == ["$__all"]
    # Variables that use $target come after it, so Grafana resolves it first.
    for v in dash["templating"]["list"]:
        if "$target" in json.dumps(v.get("query")):
            assert names.index(v["name"]) > names.index("target"), v["name"]


@pytest.mark.parametrize("name", ["pgbench-run.json", "sysbench-postgresql.json"])
def test_postgresql_run_dashboards_have_a_total_row_and_a_row_per_target(name):
    dash = load(name)
    rows = [p for p in dash["panels"] if p["type"] == "row"]
    repeated = [r for r in rows if r.get("repeat") == "target"]
    assert [r["title"] for r in rows] == ["Host I/O (iostat -x)", "All selected targets", "Target: $target"]
    assert len(repeated) == 1
    # The panels of an open row follow it up to the next row.
    order = dash["panels"]
    own = order[order.index(repeated[0]) + 1:]
    assert all(p["type"] != "row" for p in own)
    titles = " ".join(p["title"] for p in own)
    for part in ("disk", "commits", "WAL", "buffers written"):
        assert part in titles, part
    for p in own:
        assert all('target=~"$target"' in t["expr"] for t in p["targets"]), p["title"]


@pytest.mark.parametrize("name", PG_FILES)
def test_checkpoint_regions_are_per_target_and_by_reason(name):
    notes = [a for a in load(name)["annotations"]["list"] if a["name"].startswith("Checkpoint")]
    assert len(notes) == 5 and len({a["iconColor"] for a in notes}) == 5
    for a in notes:
        assert 'target=~"$target"' in a["expr"] and "{{target}}" in a["titleFormat"] and "target" in a["tagKeys"].split(","), a["name"]


@pytest.mark.parametrize("name", FILES)
def test_grid_fits_and_nothing_overlaps(name):
    cells = {}
    for p in panels(load(name)):
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


@pytest.mark.parametrize("name", FILES)
def test_links_keep_time_and_run(name):
    links = load(name)["links"]
    assert any(l["type"] == "dashboards" and l["keepTime"] and l["includeVars"] and "benchwatch" in l["tags"] for l in links)


def test_sysbench_dashboard_draws_flushing_pressure_per_target_and_picks_sysbench_runs():
    dash = load("sysbench-innodb.json")
    assert dash["uid"] == "benchwatch-sysbench-innodb" and dash["title"] == "sysbench on InnoDB"
    names = [a["name"] for a in dash["annotations"]["list"] if not a.get("builtIn")]
    assert names == ["InnoDB flushing pressure", "sysbench run", "TPS dips: cause", "experiment runs (benchwatch sweep)",
                     "events (benchwatch annotate)"]
    pressure = dash["annotations"]["list"][1]
    assert pressure["expr"] == 'instance:mysql_innodb_flushing_pressure:bool{target=~"$target"} == 1'
    assert "{{target}}" in pressure["titleFormat"] and pressure["tagKeys"] == "target"
    picker = [v for v in dash["templating"]["list"] if v["name"] == "run_id"][0]["query"]["query"]
    assert 'tool="sysbench", engine=~"mysql|"' in picker and 'tool="pgbench"' not in picker
    titles = " ".join(p["title"] for p in panels(dash))
    for part in ("TPS", "QPS", "Dirty pages", "Checkpoint age", "Pages flushed", "Redo", "Latency percentile",
                 "Errors and reconnects", "Experiment", "%util", "await"):
        assert part in titles, part


def picker(name: str) -> str:
    return [v for v in load(name)["templating"]["list"] if v["name"] == "run_id"][0]["query"]["query"]


def test_run_pickers_list_their_own_tool_on_their_own_engine():
    """A run dashboard lists its tool's runs on its engine only (a third tool must not appear in pgbench's
    picker); a run recorded before engines were (no engine label) is its tool's first engine's."""
    assert 'tool=~"pgbench|", engine=~"postgresql|"' in picker("pgbench-run.json")  # no tool label: the default's
    assert "clients, scale" in picker("pgbench-run.json") and "sysbench" not in picker("pgbench-run.json")
    assert 'tool="sysbench", engine="postgresql"' in picker("sysbench-postgresql.json")
    for other in ("host-io.json", "checkpoints-wal.json"):
        assert "clients, scale" in picker(other) and "sysbench $2, $3 threads" in picker(other)
        assert "engine" not in picker(other)


def test_run_series_are_read_under_their_old_names_too():
    """Runs recorded before the tool-neutral names (pgbench_progress_tps for every tool) still draw."""
    tps = [t["expr"] for p in panels(load("pgbench-run.json")) if p["title"] == "TPS" for t in p["targets"]][0]
    assert '{__name__=~"benchmark_progress_tps|pgbench_progress_tps", run_id="$run_id"}' in tps
    assert "pgbench_run_info" in picker("pgbench-run.json")


def test_run_pickers_select_the_engine_on_the_info_series_only():
    """benchmark_run_start_timestamp_seconds carries run_id and tool, not the engine: a matcher on the engine
    there would list no run on a tool's second engine (sysbench on PostgreSQL showed none)."""
    for name in ("sysbench-postgresql.json", "sysbench-innodb.json", "pgbench-run.json"):
        start_selector = re.search(r'last_over_time\((\{__name__=~"benchmark_run_start_timestamp_seconds[^}]*\})',
                                   picker(name)).group(1)
        assert "engine" not in start_selector, (name, start_selector)
    assert 'benchmark_run_info|pgbench_run_info", tool="sysbench", engine="postgresql"}' in picker("sysbench-postgresql.json")
