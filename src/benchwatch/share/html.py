"""A self-contained HTML page: every script, style and datum inline; it opens with no network.

The charts are a small canvas renderer written for benchwatch (offline.js,
beside this module, inlined in every page): line charts with shaded regions (checkpoints, the run), a shared
crosshair with a tooltip, drag-to-zoom on the time axis (all charts follow;
double-click or "Reset zoom" to go back), legend entries that hide a series
on click. Python prepares the page model; the script only draws it.

The page writes what it rendered into ``#bw-status`` (panels, charts, charts
with data, errors caught by window.onerror), so a headless browser can check
it with --dump-dom.
"""

from __future__ import annotations

import functools
import html
import importlib.resources
import json

from benchwatch import loadgens
from benchwatch.share import summary as sm
from benchwatch.share.collect import Collected

# Grafana's classic palette, so a screenshot reads like the dashboard.
PALETTE = ["#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0",
           "#508642", "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477"]

CSS = """
:root { --fg:#1f2328; --muted:#5b6169; --line:#d8dce2; --panel:#ffffff; --bg:#f4f5f7; }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 20px 40px; background: var(--bg); color: var(--fg);
       font: 13px/1.45 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
.sub { color: var(--muted); margin: 2px 0; }
code { font: 12px "DejaVu Sans Mono", Menlo, monospace; background: #eaecef; padding: 1px 4px; border-radius: 3px; }
#bw-toolbar { margin: 10px 0; display: flex; gap: 12px; align-items: center; color: var(--muted); }
#bw-toolbar button { font: inherit; padding: 2px 10px; border: 1px solid var(--line); border-radius: 3px; background: #fff; cursor: pointer; }
.bw-grid { display: grid; grid-template-columns: repeat(24, minmax(0, 1fr)); grid-auto-rows: 30px; gap: 8px; }
.bw-panel { background: var(--panel); border: 1px solid var(--line); border-radius: 3px; padding: 6px 8px 4px;
            display: flex; flex-direction: column; min-width: 0; position: relative; }
.bw-panel h3 { font-size: 13px; font-weight: 600; margin: 0 0 2px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.bw-row { grid-column: 1 / span 24; align-self: end; font-weight: 600; font-size: 14px; border-bottom: 1px solid var(--line); }
.bw-plot { position: relative; flex: 1 1 auto; min-height: 60px; }
.bw-plot canvas { position: absolute; left: 0; top: 0; cursor: crosshair; }
.bw-legend { flex: 0 0 auto; max-height: 44px; overflow: auto; font-size: 11px; color: var(--muted); }
.bw-legend span { display: inline-block; margin-right: 10px; cursor: pointer; white-space: nowrap; }
.bw-legend span.off { opacity: .35; }
.bw-legend i { display: inline-block; width: 12px; height: 3px; margin: 0 4px 3px 0; vertical-align: middle; }
.bw-nodata { color: var(--muted); position: absolute; top: 45%; width: 100%; text-align: center; }
.bw-stat { flex: 1; display: flex; align-items: center; justify-content: center; font-size: 28px; font-weight: 600; color: #37872D; }
.bw-tip { position: absolute; pointer-events: none; background: rgba(255,255,255,.96); border: 1px solid var(--line);
          border-radius: 3px; padding: 4px 6px; font-size: 11px; z-index: 5; white-space: nowrap; display: none;
          box-shadow: 0 2px 6px rgba(0,0,0,.15); }
.bw-tip b { font-weight: 600; }
.bw-tip i { display: inline-block; width: 8px; height: 8px; margin-right: 4px; }
.bw-tablewrap { overflow: auto; flex: 1; }
table { border-collapse: collapse; background: #fff; font-size: 12px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f1f3; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.bw-tables { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
.bw-tables section { max-width: 100%; overflow-x: auto; }
.bw-notes { color: var(--muted); font-size: 12px; }
"""

# The page's script: offline.js beside this module (package data, so `node --check` and an editor see
# it as JavaScript; tests/unit/test_offline_js.py checks it). Read once, at the first page rendered.
SCRIPT = "offline.js"


@functools.cache
def chart_js() -> str:
    return importlib.resources.files("benchwatch.share").joinpath(SCRIPT).read_text(encoding="utf-8")


def _json_for_script(obj) -> str:
    # Inside <script>, "</" would end the element; "<!--" and U+2028/9 are the other traps.
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False)
            .replace("</", "<\\/").replace("<!--", "<\\!--").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def tables_html(tables: list[tuple[str, list[str], list[list[str]]]]) -> str:
    parts = ['<div class="bw-tables">']
    for title, header, rows in tables:
        parts.append(f"<section><h2>{html.escape(title)}</h2><table><tr>"
                     + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
        for row in rows:
            parts.append("<tr>" + "".join(
                f'<td class="num">{html.escape(str(c))}</td>' if _numeric(c) else f"<td>{html.escape(str(c))}</td>"
                for c in row) + "</tr>")
        parts.append("</table></section>")
    parts.append("</div>")
    return "".join(parts)


def _numeric(text) -> bool:
    t = str(text).replace(",", "").replace("%", "").replace("+", "").split(" ")[0]
    try:
        float(t)
        return True
    except ValueError:
        return False


def page(title: str, header_html: str, model: dict, after_html: str = "") -> str:
    """The whole document. model: {"panels": [...], "zoomMode": "time"|"seconds"}."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        # No request may leave the page: nothing to fetch, and the policy says so.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"{header_html}"
        "<div id=\"bw-toolbar\"><span>Drag across a chart to zoom, double-click to zoom out; "
        "click a legend entry to hide its series.</span>"
        "<button id=\"bw-reset\" style=\"visibility:hidden\">Reset zoom</button></div>"
        "<div id=\"bw-grid\" class=\"bw-grid\"></div>"
        f"{after_html}"
        "<div id=\"bw-status\" hidden></div>"
        f"<script type=\"application/json\" id=\"bw-model\">{_json_for_script(model)}</script>"
        f"<script>\n{chart_js()}</script></body></html>\n"
    )


# -- the snapshot page ------------------------------------------------------------------

def is_run_annotation(name: str) -> bool:
    """The run's own region ("pgbench run", "sysbench run", ...; see benchwatch.dashboards.run), drawn faintly."""
    return name == "benchmark run" or any(name == f"{g.title} run" for g in loadgens.load_generators().values())


def region_list(annotations: list[dict]) -> list[dict]:
    out = []
    for a in annotations:
        run_region = is_run_annotation(a["name"])
        for e in a["events"]:
            out.append({"from": e["time"], "to": e["timeEnd"], "color": a["color"],
                        "alpha": 0.06 if run_region else 0.16,
                        "label": e["title"] + (f" — {e['text']}" if e.get("text") and not run_region else "")})
    return out


def panel_model(p: dict, dash_panel: dict, regions: list[dict], xmin: int, xmax: int) -> dict:
    pos = p.get("gridPos") or {"x": 0, "y": 0, "w": 12, "h": 8}
    base = {"title": p["title"], "description": p.get("description", ""), "x": pos.get("x", 0),
            "y": pos.get("y", 0), "w": pos.get("w", 12), "h": pos.get("h", 8), "unit": p.get("unit", "")}
    if p["type"] == "stat":
        value = None
        for t in p["targets"]:
            for f in t["frames"]:
                vals = [v for _, v in f["points"] if v is not None]
                if vals:
                    value = vals[-1]
        return {**base, "kind": "stat", "value": value}
    if p["type"] == "table":
        organize: dict = next((t.get("options", {}) for t in dash_panel.get("transformations", []) if t.get("id") == "organize"), {})
        exclude = {k for k, v in organize.get("excludeByName", {}).items() if v} | {"Time", "__name__"}
        rename = organize.get("renameByName", {})
        frames = [f for t in p["targets"] for f in t["frames"]]
        label_names = [k for k in sorted({k for f in frames for k in f["labels"]}) if k not in exclude]
        columns = [rename.get(k, k) for k in label_names] + ([rename.get("Value", "Value")] if "Value" not in exclude else [])
        rows = [[f["labels"].get(k, "") for k in label_names] + [f["points"][0][1]] for f in frames]
        sort_by = (dash_panel.get("options", {}).get("sortBy") or [{}])[0]
        if sort_by.get("displayName") in columns:
            i = columns.index(sort_by["displayName"])
            rows.sort(key=lambda r: (r[i] is None, r[i] if r[i] is not None else 0), reverse=bool(sort_by.get("desc")))
        return {**base, "kind": "table", "columns": columns, "rows": rows}
    series: list[dict] = []
    step_ms = 1000
    for t in p["targets"]:
        step_ms = int(t.get("step_s", 1) * 1000)
        for f in t["frames"]:
            series.append({"name": f["name"], "color": PALETTE[len(series) % len(PALETTE)], "pts": f["points"]})
    defaults = ((dash_panel.get("fieldConfig") or {}).get("defaults") or {})
    return {**base, "kind": "chart", "chart": {
        "series": series, "regions": regions, "unit": p.get("unit", ""), "xmode": "time",
        "xmin": xmin, "xmax": xmax, "gap": step_ms * 1.5, "min0": defaults.get("min") == 0}}


def snapshot_model(c: Collected) -> dict:
    regions = region_list(c.annotations)
    xmin, xmax = int(c.start * 1000), int(c.end * 1000)
    dash_panels = {p.get("id"): p for p in _all_panels(c.dashboard.get("panels", []))}
    panels = []
    for dp in _all_panels(c.dashboard.get("panels", [])):
        if dp.get("type") == "row":
            pos = dp.get("gridPos", {})
            panels.append({"kind": "row", "title": dp.get("title", ""), "y": pos.get("y", 0), "h": pos.get("h", 1)})
    for p in c.panels:
        panels.append(panel_model(p, dash_panels.get(p["id"], {}), regions, xmin, xmax))
    return {"panels": panels, "zoomMode": "time"}


def _all_panels(panels: list[dict]):
    for p in panels:
        yield p
        yield from _all_panels(p.get("panels", []))


def legend_html(annotations: list[dict]) -> str:
    items = []
    for a in annotations:
        if a["events"]:
            items.append(f'<span style="white-space:nowrap"><i style="display:inline-block;width:12px;height:10px;'
                         f'background:{html.escape(a["color"])};opacity:.5;margin-right:4px"></i>'
                         f'{html.escape(a["name"])} ({len(a["events"])})</span>')
    return ('<p class="sub">Shaded regions: ' + " &nbsp; ".join(items) + "</p>") if items else ""


def snapshot_page(c: Collected, notes: list[str]) -> str:
    s = c.summary
    lines = sm.header_lines(s)
    tool = loadgens.by_name(s["run"].get("tool")).title
    header = [f"<h1>{html.escape(tool)} run {html.escape(c.run_id)}</h1>"]
    first = lines[0]
    if first.startswith("`") and first.endswith("`"):
        header.append(f'<p class="sub"><code>{html.escape(first[1:-1])}</code></p>')
    else:
        header.append(f'<p class="sub">{html.escape(first)}</p>')
    header += [f'<p class="sub">{html.escape(l)}</p>' for l in lines[1:]]
    header.append(f'<p class="sub">Time range {html.escape(sm.fmt_time(c.start, True))} to '
                  f'{html.escape(sm.fmt_time(c.end, True))} (the run ± 5 s); times in UTC.</p>')
    header.append(legend_html(c.annotations))
    after = ["<h2>Summary</h2>", tables_html(sm.tables(s))]
    after.append(profile_html(c.run_dir, s.get("dips") or []))
    if notes:
        after.append('<h2>Data</h2><ul class="bw-notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    return page(f"{tool} run {c.run_id}", "".join(header), snapshot_model(c), "".join(after))


def profile_html(run_dir: str, dips: list[dict]) -> str:
    """A profiled run's dips as differential flame graphs of the database's CPU (docs/profiles.md): for each
    dip, what grew (widths: the dip's samples) and what shrank (widths: the rest's), against the rest of
    the run; "" for a run without a profile or without dips."""
    from benchwatch.profile import flamegraph, window

    profile = window.load(run_dir) if run_dir else None
    if profile is None or not dips:
        return ""
    parts = ["<h2>Where the database's CPU went in the dips</h2>",
             "<p class=\"sub\">Differential flame graphs of the database's CPU samples (perf, every second of the run): "
             "a frame is red where its share of the database's samples grew in the dip against the rest of the run, "
             "blue where it fell; hover a frame for both shares.</p>"]
    for number, dip in enumerate(dips, 1):
        inside = profile.window([(dip["start"], dip["end"])])
        rest = profile.window([(dip["start"], dip["end"])], outside=True)
        parts.append(f"<h3>Dip {number}: {inside.database} samples of the database in {inside.seconds:g} s, "
                     f"{rest.database} in the rest of the run ({rest.seconds:g} s)</h3>")
        for widths, what in (("right", "what grew (widths: the dip's samples)"),
                             ("left", "what shrank (widths: the rest's samples)")):
            parts.append(flamegraph.diff_svg(rest.stacks, inside.stacks, f"dip {number}: {what}", "the rest of the run",
                                             "the dip", widths_from=widths) or f"<p>dip {number}: no samples</p>")
    return "".join(parts)
