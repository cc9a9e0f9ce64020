"""Dashboards as code: committed JSON is what the generator makes, and every panel is complete."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARDS = os.path.join(ROOT, "dashboards")
FILES = sorted(f for f in os.listdir(DASHBOARDS) if f.endswith(".json"))


def load(name):
    with open(os.path.join(DASHBOARDS, name), encoding="utf-8") as f:
        return json.load(f)


def panels(dash):
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


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
    for p in panels(dash):
        where = f"{name} panel {p['id']}"
        assert p.get("title"), where
        assert p.get("description"), where
        assert p["fieldConfig"]["defaults"].get("unit"), where
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", where
            for window in re.findall(r"(?:rate|increase)\([^\[]*\[([^\]]+)\]", t["expr"]):
                # Per-second curves use $__rate_interval; stats over the selected range use $__range.
                assert window in ("$__rate_interval", "$__range"), f"{where}: rate over [{window}]"
    for a in dash["annotations"]["list"]:
        if a.get("builtIn"):
            continue
        assert a["datasource"]["uid"] == "${datasource}", a["name"]
    ds = [v for v in dash["templating"]["list"] if v["name"] == "datasource"][0]
    assert ds["type"] == "datasource" and ds["current"]["value"] == "benchwatch-prometheus"


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
