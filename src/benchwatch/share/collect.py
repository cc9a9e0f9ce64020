"""Gather everything a snapshot shows: run metadata, raw series, panel data, annotations, summary.

Two sources, one result:
- ``prometheus``: the stack's Prometheus still has the run; every dashboard query
  runs against it exactly as Grafana would (benchwatch.query.grafana);
- ``raw``: the run directory alone: pgbench series rebuilt from the raw output,
  the rest from ``<run_dir>/series/*.csv`` (see save_run_series), loaded into a
  private Prometheus that answers the very same queries.

The time range is the run's, with 5 s either side (what a user looks at);
raw series are kept from 5 minutes earlier, Prometheus' lookback, so the first
steps of every query see what they saw live.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass, field

from benchwatch import resources
from benchwatch.dashboards import run as dashboards
from benchwatch.explain import causes
from benchwatch.grafana.panels import DATASOURCE_UID
from benchwatch.query import archive, longterm, prometheus, promql
from benchwatch.query import frames as fr
from benchwatch.query import grafana as gq
from benchwatch.query.series import Series, fetch, merge, read_csv_dir
from benchwatch.record import replay, rundir
from benchwatch.record.host import host_facts
from benchwatch.share import rebuild, summary
from benchwatch.util import secrets

# The run's range and the series kept from before it, as the archive saves them.
MARGIN_S = archive.MARGIN_S
LOOKBACK_S = archive.LOOKBACK_S
window = archive.window


@dataclass
class Collected:
    run_id: str
    meta: dict
    start: float
    end: float
    source: str                      # "prometheus" or "raw"
    dashboard: dict
    panels: list[dict]
    annotations: list[dict]
    series: list[Series]
    summary: dict
    notes: list[str] = field(default_factory=list)
    run_dir: str = ""
    targets: list[str] = field(default_factory=list)  # the run's targets; empty: unknown (All)

    def to_json(self) -> dict:
        return {"run_id": self.run_id, "meta": self.meta, "start": self.start, "end": self.end,
                "source": self.source, "targets": self.targets, "panels": self.panels,
                "annotations": self.annotations, "summary": self.summary, "notes": self.notes}


# -- metadata -----------------------------------------------------------------------

_SECRET_KEY = re.compile(r"pass(word)?|secret|token|api[_-]?key|credential", re.I)


def scrub(value, key: str = ""):
    """Run metadata as it may leave the machine: no password, token or DSN secret."""
    if _SECRET_KEY.search(key):
        return "<redacted>"
    if isinstance(value, dict):
        return {k: scrub(v, k) for k, v in value.items() if k not in ("pid",)}
    if isinstance(value, list):
        return [scrub(v, key) for v in value]
    if isinstance(value, str):
        return secrets.redact_argv([value])[0]
    return value


def dashboard_file(meta: dict) -> str:
    """The run dashboard of a run: its tool's on its engine (pgbench-run.json, sysbench-innodb.json, ...)."""
    return dashboards.run_dashboard_for(meta.get("tool"), replay.run_engine(meta)).file


def load_dashboard(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def dashboard_for(meta: dict) -> dict:
    return load_dashboard(resources.path("dashboards", dashboard_file(meta)))


def run_targets(meta: dict) -> list[str]:
    """The names of the targets (database instances) a run watched, from meta.json["targets"]:
    a list of names, or of objects naming one under "name" or "target"."""
    out: list[str] = []
    for t in meta.get("targets") or []:
        name = t if isinstance(t, str) else (t.get("name") or t.get("target")) if isinstance(t, dict) else None
        if name and str(name) not in out:
            out.append(str(name))
    return out


def target_regex(targets: list[str]) -> str:
    """What Grafana puts for $target in a PromQL regex matcher: the selected names, regex-escaped
    (backslashes doubled for the PromQL string), or .* for All."""
    if not targets:
        return ".*"
    return "|".join(re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\\\1", t) for t in targets)


def _expand_repeats(own: list[dict], targets: list[str]) -> list[dict]:
    """Rows repeated by the target variable, drawn once per target of the run, as Grafana would draw
    them for that selection; a snapshot holds the data of each copy, so no repeat is left to Grafana.
    Without known targets the row is drawn once, for every target ($target = All)."""
    next_id = max([p.get("id", 0) for p in gq._panels(own)] + [0]) + 1
    out: list[dict] = []
    i, shift = 0, 0
    while i < len(own):
        p = own[i]
        if p.get("type") != "row" or p.get("repeat") != "target":
            q = dict(p, gridPos=dict(p["gridPos"], y=p["gridPos"]["y"] + shift)) if "gridPos" in p else p
            out.append(q)
            i += 1
            continue
        j = i + 1
        while j < len(own) and own[j].get("type") != "row":
            j += 1
        block = own[i:j]
        top = p["gridPos"]["y"]
        height = max(b["gridPos"]["y"] + b["gridPos"]["h"] for b in block) - top
        for n, value in enumerate(targets or [None]):
            for b in block:
                text = json.dumps(b)
                if value is not None:
                    text = text.replace("$target", json.dumps(target_regex([value]))[1:-1])
                clone = json.loads(text)
                clone["title"] = b["title"].replace("$target", value if value is not None else "all targets")
                clone.pop("repeat", None)
                clone["gridPos"]["y"] = b["gridPos"]["y"] + shift + n * height
                if n:
                    clone["id"] = next_id
                    next_id += 1
                out.append(clone)
        shift += (len(targets or [None]) - 1) * height
        i = j
    return out


def snapshot_dashboard(dash: dict, targets: list[str] | None = None) -> dict:
    """The dashboard as a snapshot shows it: rows repeated by target drawn once per target of the run."""
    dash = json.loads(json.dumps(dash))
    dash["panels"] = _expand_repeats(dash.setdefault("panels", []), targets or [])
    return dash


def snapshot_variables(dash: dict, run_id: str, targets: list[str]) -> dict[str, str]:
    """The variables a snapshot's queries are expanded with: the run, and the run's targets (All when unknown)."""
    return {**gq.default_variables(dash), "run_id": run_id, "datasource": DATASOURCE_UID, "target": target_regex(targets)}


# -- host facts (local, when the run was on this machine) -------------------------

def host_extra(run: rundir.RunDir, meta: dict) -> dict:
    """The host facts recorded with the run (meta.json; series/host.json in runs archived before that),
    else this machine's when the run was on it. Disks keyed by ``device``, as node_exporter names them."""
    facts = meta.get("host")
    if not facts:
        try:
            with open(run.file(os.path.join(rebuild.SERIES_DIR, "host.json")), encoding="utf-8") as f:
                facts = json.load(f)
        except (OSError, ValueError):
            facts = host_facts() if meta.get("hostname") and meta.get("hostname") == socket.gethostname() else {}
    facts = dict(facts)
    if facts.get("disks"):
        facts["disks"] = [{("device" if k == "name" else k): v for k, v in d.items() if v is not None}
                          for d in facts["disks"]]
    return facts


# -- panels ----------------------------------------------------------------------------

def query_panels(base: str, dash: dict, variables: dict[str, str], start: float, end: float) -> list[dict]:
    out = []
    for panel in gq._panels(dash.get("panels", [])):
        if panel.get("type") == "row":
            continue
        entry = {"id": panel.get("id"), "type": panel.get("type"), "title": panel.get("title", ""),
                 "description": panel.get("description", ""), "gridPos": panel.get("gridPos", {}),
                 "unit": ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("unit", ""),
                 "targets": []}
        for t in panel.get("targets", []):
            if not t.get("expr"):
                continue
            q = gq.Query(dash.get("title", ""), f"panel {panel.get('id')}", t["expr"],
                         bool(t.get("instant")) and not t.get("range"), panel_id=panel.get("id"),
                         ref_id=t.get("refId"), legend=t.get("legendFormat", ""))
            expr = gq.expand(q.expr, variables, max(end - start, 1.0))
            try:
                result = gq.run_query(base, q, variables, start, end)
                error = None
            except (prometheus.PrometheusError) as e:
                result, error = [], str(e)
            entry["targets"].append({"refId": t.get("refId"), "expr": expr, "legend": t.get("legendFormat", ""),
                                     "instant": q.instant, "format": t.get("format", "time_series"),
                                     "step_s": gq.interval_s(max(end - start, 1.0)),
                                     "frames": fr.result_to_frames(result, t.get("legendFormat", ""), expr),
                                     **({"error": error} if error else {})})
        out.append(entry)
    return out


def query_annotations(base: str, dash: dict, variables: dict[str, str], start: float, end: float,
                      series: list[Series]) -> list[dict]:
    out = []
    for a in dash.get("annotations", {}).get("list", []):
        expr = a.get("expr") or (a.get("target") or {}).get("expr")
        if not expr:
            continue
        expanded = gq.expand(expr, variables, end - start)
        title, text, tags = a.get("titleFormat", ""), a.get("textFormat", ""), a.get("tagKeys", "")
        boolean = promql.boolean_selector(expanded)
        if boolean:
            # A 0/1 state pushed at its own times (checkpoints): the regions' exact edges,
            # even for one shorter than the step, instead of step-sampled ones.
            name, matchers = promql.parse_matchers(boolean)
            chosen = [s for s in series if (name is None or s.name == name)
                      and promql.matches({**s.labels, "__name__": s.name}, matchers)]
            events = fr.exact_annotation_events(chosen, title, text, tags, int(start * 1000), int(end * 1000))
            how = "exact"
        else:
            step = gq._parse_dur(a.get("step", "1s"))
            q = gq.Query(dash.get("title", ""), "annotation", expr, False, step_s=step)
            try:
                result = gq.run_query(base, q, variables, start, end)
            except (prometheus.PrometheusError):
                result = []
            events = fr.grafana_annotation_events(result, step, title, text, tags)
            how = "grafana"
        out.append({"name": a.get("name", ""), "color": a.get("iconColor", "#888"), "expr": expanded,
                    "regions": how, "events": events})
    return out


# -- sources ----------------------------------------------------------------------------

prometheus_has_run = longterm.has_run


def series_from_run_dir(run: rundir.RunDir) -> tuple[list[Series], list[str]]:
    """pgbench series from the raw output, the rest from series/*.csv; notes on what was used."""
    notes = []
    pgbench = rebuild.samples_to_series(rebuild.run_samples(run))
    notes.append(f"pgbench series rebuilt from the raw output ({', '.join(os.path.basename(p) for p in run.output_files())})")
    saved_dir = run.file(rebuild.SERIES_DIR)
    saved = [s for s in read_csv_dir(saved_dir) if not rebuild.is_run_series(s.name)]
    if saved:
        notes.append(f"other series from {rebuild.SERIES_DIR}/*.csv saved at the end of the run ({len(saved)} series)")
    else:
        notes.append(f"no {rebuild.SERIES_DIR}/*.csv in the run directory: checkpoints, server and host figures are missing")
    return merge(pgbench, saved), notes


def collect(run: rundir.RunDir, prometheus: str | None, source: str = "auto", dashboard: dict | None = None,
            say=lambda m: None) -> Collected:
    meta = scrub(run.read_meta())
    run_id = replay.run_id_of(meta, run.run_id)
    start, end = window(meta)
    targets = run_targets(meta)
    dash = snapshot_dashboard(dashboard or dashboard_for(meta), targets)
    variables = snapshot_variables(dash, run_id, targets)
    sels = archive.run_selectors(run_id)
    notes: list[str] = []
    use_prom = False
    base = None
    if source in ("auto", "prometheus") and prometheus:
        base = longterm.base_for_run(prometheus, run_id, start, end)
        use_prom = base is not None
        if not use_prom:
            msg = f"Prometheus at {prometheus} has no data for run {run_id}"
            if source == "prometheus":
                raise RuntimeError(msg)
            say(msg + ": rebuilding from the run directory")
    if use_prom and base:  # the stack's Prometheus, or what the long-term store has of the run (longterm.base_for_run)
        store = longterm.source_of(base)
        if store is not None:
            say(f"Prometheus at {prometheus} has no data for run {run_id}: reading it from the long-term store {store}")
        series = fetch(base, sels, start - LOOKBACK_S, end)
        panels = query_panels(base, dash, variables, start, end)
        annotations = query_annotations(base, dash, variables, start, end, series)
        notes.append(f"every panel and series from the long-term store {store}" if store is not None
                     else "every panel and series from the stack's Prometheus")
        used = "prometheus"
    else:
        raw_series, notes = series_from_run_dir(run)
        with rebuild.private_prometheus(raw_series) as base:
            series = fetch(base, sels, start - LOOKBACK_S, end)
            panels = query_panels(base, dash, variables, start, end)
            annotations = query_annotations(base, dash, variables, start, end, series)
        used = "raw"
    empty = [f"{p['title']} ({t['legend'] or t['refId']})" for p in panels for t in p["targets"]
             if not t["frames"]]
    if empty:
        notes.append("no data for: " + "; ".join(empty))
    s = summary.build(series, meta, run_id, (start, end), host_extra(run, meta), run.path)
    s["source"] = used
    return Collected(run_id, meta, start, end, used, dash, panels, annotations, series, s, notes, run.path, targets)


def explain_series(run: rundir.RunDir, prometheus: str | None, source: str = "auto") -> tuple[list[Series], dict, str, str]:
    """What ``benchwatch explain`` reads: (series, meta, run_id, "prometheus" or "raw"), from the
    stack's Prometheus while it has the run, else rebuilt from the run directory like a snapshot."""
    meta = run.read_meta()
    run_id = replay.run_id_of(meta, run.run_id)
    start, end = window(meta)
    base = longterm.base_for_run(prometheus, run_id, start, end) if source != "raw" else None
    if base:
        return fetch(base, causes.run_selectors(run_id), start - 60, end), meta, run_id, "prometheus"
    if source == "prometheus":
        raise RuntimeError(f"Prometheus at {prometheus} has no data for run {run_id}")
    series, _notes = series_from_run_dir(run)
    return series, meta, run_id, "raw"
