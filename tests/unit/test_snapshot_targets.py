"""Snapshots keep the run's targets: the rows Grafana repeats per target are drawn once per target
of the run (each with its own data), and the target variable is frozen at them."""

from __future__ import annotations

import json
import os
import re
import shutil

from benchwatch.query import grafana as gq
from benchwatch.query import promql
from benchwatch.record import rundir
from benchwatch.share import grafana_snapshot
from benchwatch.share.collect import collect, run_targets, snapshot_dashboard, snapshot_variables, target_regex

HERE = os.path.dirname(os.path.dirname(__file__))
DASHBOARD = os.path.join(os.path.dirname(HERE), "dashboards", "pgbench-run.json")
RUN_ID = "20261122T181310Z-ece8"
RUN_DIR = os.path.join(HERE, "fixtures", "snapshot", RUN_ID)


def load():
    with open(DASHBOARD, encoding="utf-8") as f:
        return json.load(f)


def all_panels(dash):
    return list(gq._panels(dash["panels"]))


def assert_grid_is_sound(dash):
    ids = [p["id"] for p in all_panels(dash)]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    cells = {}
    for p in all_panels(dash):
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


def test_a_row_per_target_of_the_run():
    dash = load()
    original = {p["id"]: p for p in all_panels(dash)}
    snap = snapshot_dashboard(dash, ["db1", "shard.2"])
    assert_grid_is_sound(snap)
    assert not any(p.get("repeat") for p in all_panels(snap)), "a snapshot leaves nothing for Grafana to repeat"
    rows = [p for p in snap["panels"] if p["type"] == "row"]
    assert [r["title"] for r in rows] == ["Host I/O (iostat -x)", "All selected targets", "Target: db1", "Target: shard.2"]
    # The dashboard's own panels keep their ids (the first copy of a repeated row too).
    for pid, p in original.items():
        assert any(q["id"] == pid and q["title"] == p["title"].replace("$target", "db1") for q in all_panels(snap)), p["title"]
    order = snap["panels"]
    for row, name, regex in ((rows[2], "db1", "db1"), (rows[3], "shard.2", "shard\\.2")):
        i = order.index(row)
        later = rows[rows.index(row) + 1:]
        own = order[i + 1:order.index(later[0]) if later else len(order)]
        assert len(own) == 8  # disks, commits, buffers, WAL (6); statements: time per call, in flight
        for p in own:
            assert p["title"].startswith(f"{name}: "), p["title"]
            for t in p["targets"]:
                parsed = [promql.parse_matchers(sel) for sel in promql.selectors(t["expr"])]
                for metric, matchers in parsed:
                    if metric and "node_" in metric:
                        # A host series (node_exporter, once per host): kept for this target's host.
                        assert ("up", [("target", "=~", regex)]) in parsed, (p["title"], t["expr"])
                    else:
                        assert ("target", "=~", regex) in matchers, (p["title"], metric, matchers)
    # The escaped name matches that target only.
    assert re.fullmatch("shard\\.2", "shard.2") and not re.fullmatch("shard\\.2", "shardx2")


def test_without_known_targets_the_row_is_drawn_once_for_all():
    snap = snapshot_dashboard(load(), [])
    assert_grid_is_sound(snap)
    titles = [p["title"] for p in snap["panels"] if p["type"] == "row"]
    assert "Target: all targets" in titles and not any("$target" in t for t in titles)
    variables = snapshot_variables(snap, "R", [])
    assert variables["target"] == ".*" and variables["run_id"] == "R"


def test_targets_from_the_run_metadata():
    assert run_targets({}) == []
    assert run_targets({"targets": ["db1", {"name": "db2", "host": "h"}, {"target": "db3"}, "db1"]}) == ["db1", "db2", "db3"]
    assert target_regex(["a.b", "c"]) == "a\\\\.b|c"  # PromQL string text: the backslash doubled


def test_grafana_snapshot_freezes_the_targets(tmp_path):
    run_dir = str(tmp_path / RUN_ID)
    shutil.copytree(RUN_DIR, run_dir)
    run = rundir.RunDir(run_dir)
    meta = run.read_meta()
    meta["targets"] = ["local"]
    run.write_meta(meta)
    c = collect(run, None, source="raw")
    assert c.targets == ["local"] and c.to_json()["targets"] == ["local"]
    dash = grafana_snapshot.build(c)["dashboard"]
    var = [v for v in dash["templating"]["list"] if v["name"] == "target"][0]
    assert var["current"]["value"] == ["local"] and var["options"] == [{"selected": True, "text": "local", "value": "local"}]
    assert not var["query"] and var["refresh"] == 0
    assert dash["templating"]["list"][-1]["name"] == "run_id"
    assert "Target: local" in [p["title"] for p in dash["panels"] if p["type"] == "row"]
    # Every panel of the snapshot, the per-target ones too, was queried with the run's target.
    queried = {p["id"]: p for p in c.panels}
    for p in dash["panels"]:
        if p["type"] != "row":
            assert p["id"] in queried, p["title"]
            for t in queried[p["id"]]["targets"]:
                assert "$target" not in t["expr"], t["expr"]
