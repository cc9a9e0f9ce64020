"""Run a dashboard's queries against Prometheus exactly as Grafana would.

Grafana cannot run on these machines, so the dashboards are proven (and, for
snapshots, rendered) by expanding each panel target, annotation and variable
query the way Grafana's Prometheus datasource does, then asking Prometheus.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from benchwatch.query import prometheus

SCRAPE_INTERVAL_S = 1.0   # the datasource's "scrape interval" (timeInterval) as provisioned
MAX_DATA_POINTS = 1000    # about a panel's width in pixels


@dataclass
class Query:
    dashboard: str
    source: str          # "panel 3 'TPS' A", "annotation 'Checkpoints: wal'", "variable run_id"
    expr: str
    instant: bool
    step_s: float | None = None
    panel_id: int | None = None
    ref_id: str | None = None
    legend: str = ""


def interval_s(range_s: float, max_points: int = MAX_DATA_POINTS, min_s: float = SCRAPE_INTERVAL_S) -> float:
    """Grafana's $__interval: range / max data points, rounded to a whole second, at least the scrape interval."""
    return max(min_s, float(math.ceil(range_s / max_points)))


def rate_interval_s(interval: float, scrape_s: float = SCRAPE_INTERVAL_S) -> float:
    """Grafana's $__rate_interval: max($__interval + scrape interval, 4 x scrape interval)."""
    return max(interval + scrape_s, 4 * scrape_s)


def _dur(seconds: float) -> str:
    return f"{int(round(seconds))}s" if float(seconds).is_integer() or seconds >= 1 else f"{int(seconds * 1000)}ms"


def expand(expr: str, variables: dict[str, str], range_s: float, interval: float | None = None) -> str:
    interval = interval if interval is not None else interval_s(range_s)
    builtins = {
        "__rate_interval": _dur(rate_interval_s(interval)),
        "__interval_ms": str(int(interval * 1000)),
        "__interval": _dur(interval),
        "__range_ms": str(int(range_s * 1000)),
        "__range_s": str(int(range_s)),
        "__range": _dur(range_s),
    }
    values = {**builtins, **variables}

    def replace(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))

    # ${name} and $name; longest builtin names first is implied by the regex taking \w+.
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", replace, expr)


def default_variables(dash: dict) -> dict[str, str]:
    """What Grafana substitutes for each variable left at its default: "All" becomes its allValue."""
    out: dict[str, str] = {}
    for v in dash.get("templating", {}).get("list", []):
        value = (v.get("current") or {}).get("value")
        if isinstance(value, list):
            value = value[0] if len(value) == 1 else "|".join(value)
        if value == "$__all" and v.get("includeAll"):
            value = v.get("allValue") or ".*"
        if value:
            out[v["name"]] = str(value)
    return out


def dashboard_queries(dash: dict) -> list[Query]:
    title = dash.get("title", dash.get("uid", "?"))
    out: list[Query] = []
    for panel in _panels(dash.get("panels", [])):
        for t in panel.get("targets", []):
            if not t.get("expr"):
                continue
            out.append(Query(title, f"panel {panel['id']} {panel.get('title')!r} {t.get('refId')}", t["expr"],
                             bool(t.get("instant")) and not t.get("range"), panel_id=panel["id"],
                             ref_id=t.get("refId"), legend=t.get("legendFormat", "")))
    for a in dash.get("annotations", {}).get("list", []):
        expr = a.get("expr") or (a.get("target") or {}).get("expr")
        if expr:
            step = a.get("step", "1s")
            out.append(Query(title, f"annotation {a.get('name')!r}", expr, False, step_s=_parse_dur(step)))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            text = q.get("query") if isinstance(q, dict) else q
            if not text:  # a variable with no query yet: Grafana runs nothing
                continue
            m = re.fullmatch(r"query_result\((.*)\)", text, re.S)
            lv = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", text, re.S)
            if lv:  # Grafana asks for the label's values among the series matching the selector
                out.append(Query(title, f"variable {v['name']}", lv.group(1), True, legend=lv.group(2)))
            else:
                out.append(Query(title, f"variable {v['name']}", m.group(1) if m else text, True))
    return out


def _panels(panels: list[dict]):
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))  # rows


def _parse_dur(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text.strip())
    if not m:
        return SCRAPE_INTERVAL_S
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def run_query(base: str, q: Query, variables: dict[str, str], start: float, end: float) -> list:
    """The result Grafana would get for this query over [start, end]."""
    range_s = max(end - start, 1.0)
    interval = interval_s(range_s)
    expr = expand(q.expr, variables, range_s, interval)
    if q.instant:
        return prometheus.query(base, expr, end)
    step = q.step_s or interval
    return prometheus.query_range(base, expr, start, end, step)


def variable_options(result: list, regex: str) -> list[tuple[str, str]]:
    """(text, value) pairs from a query_result() variable, as Grafana's regex with named groups gives them."""
    m = re.fullmatch(r"/(.*)/([a-z]*)", regex)
    pattern = re.compile(m.group(1).replace("(?<", "(?P<")) if m else None
    out = []
    for r in result:
        labels = r["metric"]
        line = "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "} " + r["value"][1] + " " + str(int(float(r["value"][0]) * 1000))
        if pattern is None:
            out.append((line, line))
            continue
        found = pattern.search(line)
        if found:
            groups = found.groupdict()
            value = groups.get("value") or groups.get("text") or found.group(0)
            out.append((groups.get("text") or value, value))
    return out
