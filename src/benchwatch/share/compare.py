"""Comparing runs: TPS curves overlaid from their start, summaries side by side with % change,
and sweeps (TPS against client count, or any run label) per variant.

The first run is the baseline (HEAD in a HEAD vs PATCH post); every other
column's change is relative to it.
"""

from __future__ import annotations

import csv
import html as htmlmod
import json
import math
import os
import re
import shutil
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchwatch import engines, loadgens, stability
from benchwatch.present import stability as stability_words
from benchwatch.share import bundle, html, png
from benchwatch.share import summary as sm
from benchwatch.share.collect import Collected

SIZES = {"tps.png": png.SIZES["tps.png"], "sweep": (900, 500)}

def _generators(summaries: list[dict]) -> list[loadgens.LoadGenerator]:
    out: list[loadgens.LoadGenerator] = []
    for s in summaries:
        g = loadgens.by_name(s["run"].get("tool"))
        if g not in out:
            out.append(g)
    return out


def _engines(summaries: list[dict]) -> list[engines.Engine]:
    out: list[engines.Engine] = []
    for s in summaries:
        e = engines.get(s["run"].get("engine") or loadgens.by_name(s["run"].get("tool")).engines[0])
        if e not in out:
            out.append(e)
    return out


def metric_rows(summaries: list[dict]) -> list[sm.CompareRow]:
    """The side-by-side table's rows for these runs: what every run has, with the rows of each tool and
    each engine among them in their sections (throughput, latency, events, totals)."""
    tools = _generators(summaries)
    tool_rows = [r for g in tools for r in g.compare_rows]
    engine_rows = [r for e in _engines(summaries) for r in e.compare_rows]

    def section(name: str) -> list[sm.CompareRow]:
        return [r for r in tool_rows + engine_rows if r.section == name]

    summary_tps = f"TPS ({tools[0].title} summary)" if len(tools) == 1 else "TPS (each tool's summary)"
    return [
        sm.CompareRow("throughput", summary_tps, lambda s: s["tps"]["pgbench_summary_tps"], sm.fmt_num, +1),
        *section("throughput"),
        sm.CompareRow("throughput", "TPS mean (progress)", lambda s: s["tps"]["mean"], sm.fmt_num, +1),
        sm.CompareRow("throughput", "TPS min", lambda s: s["tps"]["min"], sm.fmt_num, +1),
        sm.CompareRow("throughput", "TPS stddev", lambda s: s["tps"]["stddev"], sm.fmt_num, -1),
        sm.CompareRow("throughput", "TPS CoV", lambda s: s["tps"]["cov"], sm.fmt_pct, -1),
        sm.CompareRow("latency", "latency avg", lambda s: s["latency"]["avg_s"], sm.fmt_ms, -1),
        sm.CompareRow("latency", "latency p95", lambda s: s["latency"].get("p95_s"), sm.fmt_ms, -1),
        sm.CompareRow("latency", "latency p99", lambda s: s["latency"].get("p99_s"), sm.fmt_ms, -1),
        *section("latency"),
        *section("events"),
        sm.CompareRow("events", "stall seconds (TPS 0)", lambda s: s["stalls"]["seconds"], lambda v: sm.fmt_num(v, 0), -1),
        sm.CompareRow("events", "seconds below 50% of median", lambda s: s["tps"]["below_half_median_s"],
                      lambda v: sm.fmt_num(v, 0), -1),
        sm.CompareRow("totals", "transactions", lambda s: s["tps"]["transactions"], lambda v: sm.fmt_num(v, 0), +1),
        *section("totals"),
    ]


def pct_change(base: float | None, value: float | None) -> float | None:
    if base is None or value is None or base == 0:
        return None
    return (value / base - 1) * 100


def fmt_change(base: float | None, value: float | None) -> str:
    if base is None or value is None:
        return "—"
    if base == 0:
        return "0 → " + sm.fmt_num(value, 0) if value else "="
    return f"{pct_change(base, value):+.1f}%"


def side_by_side(names: list[str], summaries: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: metric, each run's value, then the change of each later run vs the first."""
    header = ["", *names] + (["change"] if len(names) == 2 else [f"Δ {n}" for n in names[1:]])
    rows = []
    for row in metric_rows(summaries):
        values = [row.get(s) for s in summaries]
        if all(v is None for v in values):
            continue
        rows.append([row.label, *(row.fmt(v) for v in values), *(fmt_change(values[0], v) for v in values[1:])])
    return header, rows


# -- stability -------------------------------------------------------------------

def stability_side_by_side(names: list[str], summaries: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the runs' stability profiles (benchwatch.stability): each measure, each run's value,
    and which run is steadier on it (by the measure's direction; "same" when equal, "—" when one lacks it).
    One run each: a difference here is a difference of these two runs, not a verdict on their settings
    (benchwatch sweep and report repeat runs for that)."""
    profiles = [s.get("stability") or {} for s in summaries]
    header = ["", *names, "steadier"]
    rows = [["steady part", *(stability_words.steady_part(p) if p else "—" for p in profiles), ""]]
    kinds = {key: (label, kind) for key, label, kind in stability_words.ROWS}
    rows.append(["TPS median (steady part)", *(stability_words.fmt("num", p.get("tps_median")) for p in profiles), ""])
    for name, (key, _direction) in stability.MEASURES.items():
        values = [stability.measure(p, name) for p in profiles]
        if all(v is None for v in values):
            continue
        label, kind = kinds.get(key, (name, "num"))
        rows.append([label, *(stability_words.fmt(kind, v) for v in values), _steadier(name, names, values)])
    causes = sorted({c for p in profiles for c in (p.get("dips_by_cause") or {})})
    for cause in causes:
        cells = []
        for p in profiles:
            row = (p.get("dips_by_cause") or {}).get(cause) if p.get("dips_by_cause") is not None else None
            cells.append("—" if p.get("dips_by_cause") is None else
                         "0" if row is None else f"{row['dips']} ({sm.fmt_num(row['lost_transactions'], 0)} tx lost)")
        rows.append([f"dips: {cause}", *cells, ""])
    return header, rows


def _steadier(name: str, names: list[str], values: list[float | None]) -> str:
    known = [(v, n) for v, n in zip(values, names) if v is not None]
    if len(known) < len(values):
        return "—"
    if len({v for v, _ in known}) == 1:
        return "same"
    best = known[0]
    for v, n in known[1:]:
        if stability.steadier(name, best[0], v) > 0:
            best = (v, n)
    return best[1]


def steadier_counts(names: list[str], summaries: list[dict]) -> dict[str, int]:
    """How many measures each run is the steadiest on (runs lacking a measure: that measure not counted)."""
    counts = dict.fromkeys(names, 0)
    _h, rows = stability_side_by_side(names, summaries)
    for row in rows:
        if row[-1] in counts:
            counts[row[-1]] += 1
    return counts


# -- sweeps -----------------------------------------------------------------------

# The pgbench options that set a run label: stripped from the arguments to find the variant.
LABEL_OPTIONS = {"clients": ("-c", "--client"), "threads": ("-j", "--jobs"), "rate_limit_tps": ("-R", "--rate"),
                 "duration_seconds": ("-T", "--time"), "transactions_per_client": ("-t", "--transactions"),
                 "protocol": ("-M", "--protocol")}


def run_labels(s: dict) -> dict[str, str]:
    labels = dict(s["run"].get("labels") or {})
    for k in ("pgbench_version", "server_version", "scale", "hostname"):
        if s["run"].get(k) is not None:
            labels.setdefault(k, str(s["run"][k]))
    return labels


def strip_options(args: str, options: tuple[str, ...]) -> str:
    """pgbench arguments without the given options (and their values), for grouping runs."""
    words = args.split()
    out = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        hit = False
        for o in options:
            if w == o:
                hit = skip = True
            elif o.startswith("--") and w.startswith(o + "="):
                hit = True
            elif not o.startswith("--") and w.startswith(o) and len(w) > len(o):
                hit = True  # -c8
        if not hit:
            out.append(w)
    return " ".join(out)


def variant_of(s: dict, by: str, variant_key: str | None, name: str | None) -> str:
    if name:
        return name
    labels = run_labels(s)
    if variant_key:
        return f"{variant_key}={labels.get(variant_key, '?')}"
    strip: tuple[str, ...] = LABEL_OPTIONS.get(by, ())
    if by == "clients":
        strip = strip + LABEL_OPTIONS["threads"]  # threads usually follow clients in a sweep
    words = (s["run"].get("args") or "").split(" ", 1)
    if words[0] in loadgens.by_name(s["run"].get("tool")).programs:
        words = words[1:]  # the program, not a difference between runs
    return strip_options(" ".join(words), strip) or "runs"


def _sort_key(v: str):
    try:
        return (0, float(v), v)
    except ValueError:
        return (1, 0.0, v)


def sweep(names: list[str], summaries: list[dict], by: str, variant_key: str | None = None,
          named: bool = False) -> dict:
    """{"by", "variants": [...], "values": [...], "tps": {variant: {value: tps}}, "latency": {...}}."""
    variants: list[str] = []
    values: list[str] = []
    tps: dict[str, dict[str, list[float | None]]] = {}
    lat: dict[str, dict[str, list[float | None]]] = {}
    for n, s in zip(names, summaries):
        v = variant_of(s, by, variant_key, n if named else None)
        x = run_labels(s).get(by)
        if x is None:
            continue
        if v not in variants:
            variants.append(v)
        if x not in values:
            values.append(x)
        t = s["tps"]["pgbench_summary_tps"] if s["tps"]["pgbench_summary_tps"] is not None else s["tps"]["mean"]
        tps.setdefault(v, {}).setdefault(x, []).append(t)
        lat.setdefault(v, {}).setdefault(x, []).append(s["latency"]["avg_s"])
    values.sort(key=_sort_key)
    # Repeated runs of one variant at one value: their median, and how many there were.
    counts = {v: {x: len(ts) for x, ts in per.items()} for v, per in tps.items()}
    return {"by": by, "variants": variants, "values": values, "tps": _medians(tps), "latency": _medians(lat),
            "runs": counts}


def _medians(table: dict[str, dict[str, list]]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for v, per in table.items():
        for x, vals in per.items():
            known = [y for y in vals if y is not None]
            out.setdefault(v, {})[x] = statistics.median(known) if known else None
    return out


def sweep_table(sw: dict, what: str = "tps") -> tuple[list[str], list[list[str]]]:
    variants = sw["variants"]
    fmt = sm.fmt_num if what == "tps" else sm.fmt_ms
    header = [sw["by"], *variants] + (["change"] if len(variants) == 2 else [f"Δ {v}" for v in variants[1:]])
    rows = []
    for x in sw["values"]:
        vals = [sw[what].get(v, {}).get(x) for v in variants]
        counts = [sw.get("runs", {}).get(v, {}).get(x, 0) for v in variants]
        cells = [fmt(val) + (f" (median of {n})" if n > 1 else "") for val, n in zip(vals, counts)]
        rows.append([x, *cells, *(fmt_change(vals[0], v) for v in vals[1:])])
    return header, rows


# -- pictures -----------------------------------------------------------------------

def _aligned(c: Collected) -> list[tuple[float, float]]:
    t0 = float(c.meta.get("clock_start_epoch") or c.meta.get("started_at") or c.start)
    s = sm.one(c.series, "benchmark_progress_tps", run_id=c.run_id)
    return [((ts / 1000) - t0, v) for ts, v in (s.samples if s else [])]


def _aligned_latency(c: Collected) -> list[tuple[float, float]]:
    t0 = float(c.meta.get("clock_start_epoch") or c.meta.get("started_at") or c.start)
    s = sm.one(c.series, "benchmark_progress_latency_seconds", run_id=c.run_id)
    return [((ts / 1000) - t0, v) for ts, v in (s.samples if s else [])]


def overlay_png(names: list[str], collected: list[Collected], path: str) -> str:
    fig, ax = plt.subplots(figsize=(SIZES["tps.png"][0] / png.DPI, SIZES["tps.png"][1] / png.DPI), dpi=png.DPI)
    top = 1.0
    for i, (n, c) in enumerate(zip(names, collected)):
        pts = _aligned(c)
        colour = png.COLORS[i % len(png.COLORS)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.3, color=colour,
                marker="." if len(pts) < 120 else None, ms=3, label=n)
        top = max([top] + [p[1] for p in pts])
        # Each run's checkpoints as a tick band at the bottom in its colour.
        t0 = float(c.meta.get("clock_start_epoch") or c.start)
        # ... and InnoDB's flushing-pressure regions (MySQL/MariaDB runs) the same way.
        for row in c.summary.get("checkpoints", []) + (c.summary.get("flushing_pressure") or []):
            ax.axvspan(row["start"] - t0, max(row["end"] - t0, row["start"] - t0 + 0.15),
                       ymin=0.0 + 0.025 * i, ymax=0.02 + 0.025 * i, color=colour, alpha=0.8, lw=0)
    ax.set_ylim(0, top * 1.08)
    tools = _generators([c.summary for c in collected])
    regions = " and ".join(e.regions_name for e in _engines([c.summary for c in collected]))
    ax.set_xlabel(f"seconds since {tools[0].title if len(tools) == 1 else 'each tool'}'s start "
                  f"(bars at the bottom: each run's {regions})")
    ax.set_ylabel("transactions per second")
    ax.set_title("TPS, runs aligned at their start", loc="left")
    ax.legend(loc="lower right", fontsize=9, framealpha=0.9)
    fig.tight_layout()
    return png._save(fig, path)


def sweep_png(sw: dict, path: str) -> str:
    fig, ax = plt.subplots(figsize=(SIZES["sweep"][0] / png.DPI, SIZES["sweep"][1] / png.DPI), dpi=png.DPI)
    numeric = all(_sort_key(x)[0] == 0 for x in sw["values"])
    positions = {x: (float(x) if numeric else i) for i, x in enumerate(sw["values"])}
    top = 1.0
    for i, v in enumerate(sw["variants"]):
        pts = [(positions[x], t) for x, t in sw["tps"][v].items() if t is not None]
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", lw=1.5, color=png.COLORS[i % len(png.COLORS)], label=v)
        top = max([top] + [p[1] for p in pts])
    if numeric:
        xs = sorted(positions.values())
        if len(xs) > 2 and all(x > 0 for x in xs) and xs[-1] / xs[0] >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [x for x in sorted(sw["values"], key=_sort_key)])
    else:
        ax.set_xticks(list(positions.values()), list(positions))
    ax.set_ylim(0, top * 1.1)
    ax.set_xlabel(sw["by"])
    ax.set_ylabel("TPS")
    ax.set_title(f"TPS by {sw['by']}", loc="left")
    ax.legend(loc="lower right", fontsize=9, framealpha=0.9)
    fig.tight_layout()
    return png._save(fig, path)


# -- the page and files ---------------------------------------------------------------

def compare_model(names: list[str], collected: list[Collected], sw: dict | None) -> dict:
    series, lat_series = [], []
    xmax = 1.0
    gap = 1.5
    for i, (n, c) in enumerate(zip(names, collected)):
        colour = html.PALETTE[i % len(html.PALETTE)]
        pts = [[round(x, 3), v] for x, v in _aligned(c)]
        series.append({"name": n, "color": colour, "pts": pts})
        lat_series.append({"name": n, "color": colour, "pts": [[round(x, 3), v] for x, v in _aligned_latency(c)]})
        if pts:
            xmax = max(xmax, pts[-1][0])
        gap = max(gap, 1.5 * float(c.summary["run"].get("progress_interval_s") or 1))
    panels = [
        {"kind": "chart", "title": "TPS, runs aligned at their start", "x": 0, "y": 0, "w": 24, "h": 11,
         "description": "Each run's TPS per progress interval; x is seconds since each run's clock started.",
         "chart": {"series": series, "regions": [], "unit": "tps", "xmode": "seconds", "xmin": 0, "xmax": xmax + 1,
                   "gap": gap, "min0": True, "xlabel": "t ="}},
        {"kind": "chart", "title": "Latency average, runs aligned at their start", "x": 0, "y": 11, "w": 24, "h": 8,
         "chart": {"series": lat_series, "regions": [], "unit": "s", "xmode": "seconds", "xmin": 0, "xmax": xmax + 1,
                   "gap": gap, "min0": True, "xlabel": "t ="}},
    ]
    if sw and sw["values"]:
        numeric = all(_sort_key(x)[0] == 0 for x in sw["values"])
        pos = {x: (float(x) if numeric else i) for i, x in enumerate(sw["values"])}
        sseries = [{"name": v, "color": html.PALETTE[i % len(html.PALETTE)],
                    "pts": sorted([[pos[x], t] for x, t in sw["tps"][v].items() if t is not None])}
                   for i, v in enumerate(sw["variants"])]
        xs = sorted(pos.values())
        pad = max((xs[-1] - xs[0]) * 0.05, 0.5)
        panels.append({"kind": "chart", "title": f"TPS by {sw['by']}", "x": 0, "y": 19, "w": 24, "h": 10,
                       "chart": {"series": sseries, "regions": [], "unit": "tps", "xmode": "linear",
                                 "xmin": xs[0] - pad, "xmax": xs[-1] + pad, "points": True, "min0": True,
                                 "xlabel": sw["by"] + " ="}})
    return {"panels": panels, "zoomMode": "seconds"}


def targets_text(c: Collected) -> str:
    """The database instances a run watched: "db1 on hostA, local on vm"."""
    return ", ".join(sm.watched_targets(c.meta))


def absent_text(c: Collected) -> str:
    """The explain signals a run's dips could not be weighed on, and why ("" when none): a dip with
    "no cause found" on a server without pg_stat_wal is not the same finding as on one with it."""
    absent = (c.summary.get("dip_signals") or {}).get("absent") or {}
    return "dips not weighed on " + "; ".join(f"{k} ({v})" for k, v in absent.items()) if absent else ""


def _what(collected: list[Collected]) -> str:
    """"pgbench runs", "sysbench runs", or "runs" when the tools differ."""
    tools = _generators([c.summary for c in collected])
    return f"{tools[0].title} runs" if len(tools) == 1 else "runs"


def compare_markdown(names: list[str], collected: list[Collected], sw: dict | None, pictures: list[str]) -> str:
    parts = [f"# {_what(collected)} compared", ""]
    for n, c in zip(names, collected):
        r = c.summary["run"]
        facts = " · ".join(x for x in [f"`{r['args']}`" if r.get("args") else None,
                                       f"server {r['server_version']}" if r.get("server_version") else None,
                                       sm.fmt_time(r.get("start"), True) if r.get("start") else None,
                                       f"targets {targets_text(c)}" if targets_text(c) else None,
                                       absent_text(c) or None] if x)
        parts.append(f"- **{n}**" + (f" ({c.run_id})" if n != c.run_id else "") + f": {facts}")
    parts.append("")
    for p in pictures:
        parts += [f"![{p}]({p})", ""]
    header, rows = side_by_side(names, [c.summary for c in collected])
    parts += ["## Summary", "", sm.md_table(header, rows), ""]
    header, rows = stability_side_by_side(names, [c.summary for c in collected])
    parts += ["## Stability (steady part of each run)", "", sm.md_table(header, rows), "",
              "One run each: which run is steadier on each measure, not yet a verdict on the settings "
              "(`benchwatch sweep` and `report` repeat runs and say how sure they are).", ""]
    if sw and sw["values"]:
        h, r = sweep_table(sw, "tps")
        parts += [f"## TPS by {sw['by']}", "", sm.md_table(h, r), ""]
        h, r = sweep_table(sw, "latency")
        parts += [f"## Latency average by {sw['by']}", "", sm.md_table(h, r), ""]
    return "\n".join(parts)


def compare_page(names: list[str], collected: list[Collected], sw: dict | None) -> str:
    header = [f"<h1>{_what(collected)} compared</h1><ul class=\"sub\">"]
    for n, c in zip(names, collected):
        r = c.summary["run"]
        header.append(f"<li><b>{htmlmod.escape(n)}</b>" + (f" ({htmlmod.escape(c.run_id)})" if n != c.run_id else "")
                      + (f": <code>{htmlmod.escape(r['args'])}</code>" if r.get("args") else "")
                      + (f" · server {htmlmod.escape(str(r['server_version']))}" if r.get("server_version") else "")
                      + f" · {htmlmod.escape(sm.fmt_time(r.get('start'), True))}"
                      + (f" · targets {htmlmod.escape(targets_text(c))}" if targets_text(c) else "")
                      + (f" · {htmlmod.escape(absent_text(c))}" if absent_text(c) else "") + "</li>")
    header.append("</ul>")
    tables = [("Summary (change relative to the first run)", *side_by_side(names, [c.summary for c in collected])),
              ("Stability (steady part of each run; one run each)",
               *stability_side_by_side(names, [c.summary for c in collected]))]
    if sw and sw["values"]:
        tables.append((f"TPS by {sw['by']}", *sweep_table(sw, "tps")))
        tables.append((f"Latency average by {sw['by']}", *sweep_table(sw, "latency")))
    return html.page(f"{_what(collected)} compared", "".join(header), compare_model(names, collected, sw),
                     html.tables_html(tables))


def write_compare(names: list[str], collected: list[Collected], out_dir: str, by: str | None = None,
                  variant_key: str | None = None, named: bool = False, secrets: list[str] | None = None,
                  dir_name: str | None = None, variant_names: list[str] | None = None) -> tuple[str, str, dict | None]:
    ids = [c.run_id for c in collected]
    default = "compare-" + ("-vs-".join(ids) if len(ids) <= 3 else f"{ids[0]}-and-{len(ids) - 1}-more")
    target = os.path.join(out_dir, dir_name or default)
    if os.path.exists(target):
        shutil.rmtree(target)
    os.makedirs(target)
    sw = sweep(variant_names or names, [c.summary for c in collected], by, variant_key, named) if by else None
    pictures = [overlay_png(names, collected, os.path.join(target, "tps.png"))]
    if sw and sw["values"]:
        pictures.append(sweep_png(sw, os.path.join(target, f"tps-by-{bundle.slug(sw['by'])}.png")))
    rel = [os.path.basename(p) for p in pictures]
    with open(os.path.join(target, "compare.md"), "w", encoding="utf-8") as f:
        f.write(compare_markdown(names, collected, sw, rel))
    with open(os.path.join(target, "index.html"), "w", encoding="utf-8") as f:
        f.write(compare_page(names, collected, sw))
    data = os.path.join(target, "data")
    os.makedirs(data)
    aligned = [dict((round(x, 3), v) for x, v in _aligned(c)) for c in collected]
    with open(os.path.join(data, "tps-aligned.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["seconds", *names])
        for x in sorted({x for a in aligned for x in a}):
            w.writerow([f"{x:.3f}", *("" if a.get(x) is None else repr(a[x]) for a in aligned)])
    _header, _rows = side_by_side(names, [c.summary for c in collected])
    with open(os.path.join(data, "summary.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["metric", *names])
        for row in metric_rows([c.summary for c in collected]):
            w.writerow([row.label, *("" if row.get(c.summary) is None else repr(row.get(c.summary)) for c in collected)])
        for name in stability.MEASURES:  # the stability profile's measures, by their names (summary.json's keys)
            values = [stability.measure(c.summary.get("stability"), name) for c in collected]
            w.writerow([f"stability {name}", *("" if v is None else repr(v) for v in values)])
    for n, c in zip(names, collected):
        with open(os.path.join(data, f"summary-{bundle.slug(c.run_id)}.json"), "w", encoding="utf-8") as f:
            json.dump({"name": n, **c.summary}, f, indent=1, sort_keys=True)
            f.write("\n")
    if sw:
        with open(os.path.join(data, f"sweep-by-{bundle.slug(sw['by'])}.json"), "w", encoding="utf-8") as f:
            json.dump(sw, f, indent=1)
            f.write("\n")
    bundle.check_secrets(target, secrets or [])
    return target, bundle.pack(target), sw


def default_names(collected: list[Collected]) -> list[str]:
    return [c.run_id for c in collected]


def parse_names(text: str | None, count: int) -> list[str] | None:
    if not text:
        return None
    names = [n.strip() for n in re.split(r",", text)]
    if len(names) != count or not all(names):
        raise ValueError(f"--names needs {count} comma-separated names, one per run")
    return names


def finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)
