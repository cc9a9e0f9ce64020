"""A Grafana snapshot of the run: the dashboard with every panel's data and the annotations embedded.

Grafana's snapshot model (what its "Share > Snapshot" stores and what
POST /api/snapshots takes as ``{"dashboard": ..., "name": ..., "expires": ...}``):
- each panel carries its query results as ``snapshotData``, a list of data
  frames (``{"refId", "meta", "fields": [{"name", "type", "config", "labels",
  "values"}]}``); newer Grafana versions also read them from a single target of
  the built-in "grafana" data source with ``queryType: "snapshot"``, so both
  are written;
- each annotation keeps its definition plus ``snapshotData``, the events it
  produced (``time``/``timeEnd`` in ms, ``title``, ``text``, ``tags``), which
  Grafana's own snapshot dialog leaves out for data-source annotations: here
  the checkpoint regions and the run region stay;
- variables are frozen at the run (no query): the run and its targets; the
  time range is the run's.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

from benchwatch.share.collect import Collected

GRAFANA_DS = {"type": "grafana", "uid": "grafana"}
TOKEN_ENV = "GRAFANA_TOKEN"


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def target_frames(target: dict) -> list[dict]:
    """Data frames as Grafana's Prometheus data source returns them for one target."""
    meta = {"executedQueryString": f"Expr: {target['expr']}\nStep: {target['step_s']:g}s",
            "type": "timeseries-multi" if not target["instant"] else "numeric-multi", "typeVersion": [0, 1]}
    if target.get("format") == "table":
        rows = target["frames"]
        label_names = sorted({k for f in rows for k in f["labels"]})
        fields = [{"name": "Time", "type": "time", "config": {}, "values": [f["points"][0][0] for f in rows]}]
        fields += [{"name": k, "type": "string", "config": {"filterable": True},
                    "values": [f["labels"].get(k, "") for f in rows]} for k in label_names]
        fields.append({"name": "Value", "type": "number", "config": {}, "values": [f["points"][0][1] for f in rows]})
        return [{"refId": target["refId"], "meta": {**meta, "type": "table"}, "fields": fields}]
    out = []
    for f in target["frames"]:
        config = {"displayNameFromDS": f["name"]} if target.get("legend") and target["legend"] != "__auto" else {}
        out.append({
            "refId": target["refId"], "meta": meta,
            "fields": [
                {"name": "Time", "type": "time", "typeInfo": {"frame": "time.Time"},
                 "config": {"interval": int(target["step_s"] * 1000)}, "values": [p[0] for p in f["points"]]},
                {"name": "Value", "type": "number", "typeInfo": {"frame": "float64", "nullable": True},
                 "labels": f["labels"], "config": config, "values": [p[1] for p in f["points"]]},
            ]})
    return out


def build(c: Collected, name: str | None = None, expires: int = 0) -> dict:
    """The body of POST /api/snapshots: {"dashboard", "name", "expires"}."""
    dash = json.loads(json.dumps(c.dashboard))
    by_id = {p["id"]: p for p in c.panels}

    def convert(panels: list[dict]) -> None:
        for panel in panels:
            if panel.get("type") == "row":
                convert(panel.get("panels", []))
                continue
            got = by_id.get(panel.get("id"))
            frames = [fr for t in (got or {}).get("targets", []) for fr in target_frames(t)]
            panel["snapshotData"] = frames
            panel["datasource"] = GRAFANA_DS
            panel["targets"] = [{"refId": "A", "datasource": GRAFANA_DS, "queryType": "snapshot", "snapshot": frames}]

    convert(dash.get("panels", []))
    events = {a["name"]: a["events"] for a in c.annotations}
    for a in dash.get("annotations", {}).get("list", []):
        if a.get("builtIn"):
            a["snapshotData"] = []
            continue
        a["snapshotData"] = events.get(a.get("name"), [])
    for v in dash.get("templating", {}).get("list", []):
        if v.get("name") == "run_id":
            current = {"selected": True, "text": c.run_id, "value": c.run_id}
            v.update({"current": current, "options": [current], "query": "", "definition": "", "refresh": 0})
        elif v.get("name") == "target":
            # The run's targets (rows repeated by target are already drawn once per target).
            names = c.targets
            current = {"selected": True, "text": names or ["All"], "value": names or ["$__all"]}
            options = [{"selected": True, "text": n, "value": n} for n in names] or [
                {"selected": True, "text": "All", "value": "$__all"}]
            v.update({"current": current, "options": options, "query": "", "definition": "", "refresh": 0})
        elif v.get("type") == "datasource":
            v["options"] = [v.get("current", {})]
    dash.pop("id", None)
    dash.update({"editable": False, "refresh": "", "time": {"from": _iso(c.start), "to": _iso(c.end)},
                 "snapshot": {"timestamp": _iso(time.time())},
                 "title": f"{dash.get('title', 'pgbench run')} — {c.run_id}"})
    tool = c.summary.get("run", {}).get("tool") or "pgbench"
    return {"dashboard": dash, "name": name or f"{tool} run {c.run_id}", "expires": int(expires)}


class UploadError(RuntimeError):
    pass


def upload(grafana_url: str, body: dict, token: str | None = None, timeout: float = 30.0) -> dict:
    """POST the snapshot to Grafana's snapshot API; returns Grafana's answer (url, key, deleteUrl, ...).
    The token (default: $GRAFANA_TOKEN) is sent as a Bearer header and never written or printed."""
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    parts = urllib.parse.urlsplit(grafana_url)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if parts.username is not None:  # http://user:password@grafana:3000: basic auth, never echoed
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    url = urllib.parse.urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path.rstrip("/") + "/api/snapshots", "", ""))
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as r:
            answer = json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        detail = e.read()[:300].decode("utf-8", "replace")
        hint = f" (set {TOKEN_ENV} to a service account token)" if e.code in (401, 403) and not token else ""
        raise UploadError(f"Grafana at {_safe(grafana_url)} answered HTTP {e.code}: {detail}{hint}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise UploadError(f"could not upload to Grafana at {_safe(grafana_url)}: {getattr(e, 'reason', e)}") from None
    if not isinstance(answer, dict) or not answer.get("url"):
        raise UploadError(f"Grafana at {_safe(grafana_url)} gave no snapshot URL: {str(answer)[:200]}")
    return answer


def _safe(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
