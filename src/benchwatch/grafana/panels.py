"""Grafana panel builders: the one place that knows the JSON of a panel.

Used by the committed dashboards (benchwatch.grafana.dashboards) and by the
panels a snapshot appends (benchwatch.share.collect). Every panel has a title,
a description and a unit, and takes its datasource from the ``datasource``
variable.
"""

from __future__ import annotations

from typing import Any

DATASOURCE_UID = "benchwatch-prometheus"
DS = {"type": "prometheus", "uid": "${datasource}"}


class Layout:
    """Places panels left to right in rows of 24 columns, from row ``y`` on, with ids from ``next_id``."""

    def __init__(self, y: int = 0, next_id: int = 1):
        self.x = self.row_h = 0
        self.y = y
        self.next_id = next_id

    def place(self, w: int, h: int) -> dict:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def new_row(self) -> None:
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0

    def take_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False, fmt: str = "time_series") -> dict:
    t: dict[str, Any] = {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend, "format": fmt}
    if instant:
        t.update({"instant": True, "range": False})
    else:
        t.update({"range": True, "instant": False})
    return t


def targets(*specs) -> list[dict]:
    return [target(*spec) if isinstance(spec, tuple) else spec for spec in specs]


def timeseries(layout: Layout, title: str, description: str, unit: str, tgts: list[dict], w: int = 12, h: int = 8,
               overrides: list | None = None, stack: bool = False, min_zero: bool = True) -> dict:
    for i, t in enumerate(tgts):
        t["refId"] = chr(ord("A") + i)
    defaults: dict[str, Any] = {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
                                         "spanNulls": False, "stacking": {"mode": "normal" if stack else "none"}}}
    if min_zero:
        defaults["min"] = 0
    return {
        "id": layout.take_id(), "type": "timeseries", "title": title, "description": description,
        "datasource": DS, "gridPos": layout.place(w, h), "targets": tgts,
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "none"}},
    }


def stat(layout: Layout, title: str, description: str, unit: str, expr: str, w: int = 4, h: int = 4,
         decimals: int | None = 1, legend: str = "") -> dict:
    defaults: dict[str, Any] = {"unit": unit, "color": {"mode": "thresholds"},
                "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}]}}
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "id": layout.take_id(), "type": "stat", "title": title, "description": description, "datasource": DS,
        "gridPos": layout.place(w, h), "targets": [target(expr, legend, instant=True)],
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "value", "graphMode": "none", "textMode": "value_and_name" if legend else "value",
                    "justifyMode": "auto"},
    }


def table(layout: Layout, title: str, description: str, unit: str, expr: str, rename: dict, w: int = 24, h: int = 10) -> dict:
    return {
        "id": layout.take_id(), "type": "table", "title": title, "description": description, "datasource": DS,
        "gridPos": layout.place(w, h), "targets": [target(expr, instant=True, fmt="table")],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"showHeader": True, "sortBy": [{"displayName": "latency", "desc": True}]},
        "transformations": [{"id": "organize", "options": {
            "excludeByName": {"Time": True, "__name__": True, "run_id": True},
            "renameByName": rename}}],
    }


def row(layout: Layout, title: str) -> dict:
    layout.new_row()
    panel = {"id": layout.take_id(), "type": "row", "title": title, "collapsed": False, "panels": [],
             "gridPos": layout.place(24, 1)}
    layout.new_row()
    return panel
