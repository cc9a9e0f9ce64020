"""An experiment's report as a share bundle (``benchwatch report NAME``): index.html, a PNG of TPS against
the swept value per variant with the 95 % intervals, Markdown to paste into a mailing-list post, CSV and
the JSON of ``report --json``; packed as a .tar.gz beside the directory, like ``compare``."""

from __future__ import annotations

import base64
import csv
import html as htmllib
import json
import os
import shutil
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchwatch.share import bundle, html, png
from benchwatch.share.summary import md_table


def _axis(model: dict[str, Any]) -> tuple[str, list[tuple[str, float]]]:
    """What the x axis sweeps ("clients", "scale" or the cell) and each cell's position on it."""
    cells = [c for c in model["cells"] if c["variant"] == model["baseline"]]
    if any(c["clients"] is not None for c in cells) and len({c["clients"] for c in cells}) > 1:
        key = "clients"
    elif any(c["scale"] is not None for c in cells) and len({c["scale"] for c in cells}) > 1:
        key = "scale"
    else:
        return "cell", [(c["cell"], float(i)) for i, c in enumerate(cells)]
    return key, [(c["cell"], float(c[key])) for c in cells]


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _ci(p: list[float] | None, digits: int = 1) -> str:
    return "-" if not p else f"{_fmt(p[0], digits)} – {_fmt(p[1], digits)}"


def _ratio(d: dict[str, Any]) -> str:
    if d.get("ratio") is None:
        return "-"
    ci = d.get("ratio_ci")
    return f"{d['ratio']:.3f}" + (f" ({ci[0]:.3f} – {ci[1]:.3f})" if ci else "")


def tables(model: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    cells = [[c["variant"], c["cell"], str(c["n"]), _fmt(c["tps_median"]), _ci(c["tps_ci"]),
              _fmt(c["latency_avg_ms_median"], 3), _ci(c["latency_avg_ms_ci"], 3)] for c in model["cells"]]
    diffs = []
    for d in model["differences"]:
        note = d.get("note") or ""
        if d["verdict"] == "no difference shown" and d.get("repeats_needed"):
            note = f"{d['repeats_needed']} repeats per variant would show a change of this size"
        lat = d["latency"]["avg"]
        diffs.append([d["variant"], d["cell"], _ratio(d), d["verdict"], _ratio(lat), lat["verdict"], note])
    why = [[d["variant"], d["cell"], w["signal"], f"{w['baseline']:g}", f"{w['variant']:g}",
            "-" if w.get("change") is None else f"{w['change'] * 100:+.0f} %", w.get("unit") or ""]
           for d in model["differences"] for w in d.get("why") or []]
    out = [("TPS and latency per variant and cell (median, 95 % interval, n runs)",
            ["variant", "cell", "n", "TPS", "TPS 95 %", "latency avg ms", "latency 95 %"], cells),
           (f"Against {model['baseline']} ({model['test']}; --min-effect {model['min_effect_pct']:g} %)",
            ["variant", "cell", "TPS ratio (95 %)", "verdict", "latency ratio (95 %)", "latency", "note"], diffs)]
    if why:
        out.append(("Why: server-side evidence where the variants differ, ranked",
                    ["variant", "cell", "signal", model["baseline"], "variant's", "change", "unit"], why))
    out += _stability_tables(model)
    return out


# The stability measures the tables show, with how each is printed.
_SHOWN = (("tps_cov", "TPS CoV", 3), ("tps_p5_ratio", "p5 / median", 3), ("tps_min_ratio", "worst / median", 3),
          ("dips", "dips", 2), ("dip_seconds", "dip s", 2), ("stall_seconds", "stall s", 2),
          ("lost_share", "lost share", 3), ("latency_p99_s", "latency p99 s", 3))


def _median_ci(m: dict[str, Any] | None, digits: int) -> str:
    if not m or m.get("median") is None:
        return "-"
    ci = m.get("ci")
    return f"{m['median']:.{digits}g}" + (f" ({ci[0]:.{digits}g} – {ci[1]:.{digits}g})" if ci else "") + f" n={m['n']}"


def _stability_tables(model: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    cells = [[c["variant"], c["cell"], *(_median_ci((c.get("stability") or {}).get(k), d) for k, _, d in _SHOWN)]
             for c in model["cells"] if c.get("stability")]
    if not cells:
        return []
    out = [("Steadiness per variant and cell (median, 95 % interval, n runs)",
            ["variant", "cell", *(h for _, h, _ in _SHOWN)], cells)]
    diffs, causes = [], []
    for d in model["differences"]:
        st = d.get("stability")
        if not st:
            continue
        ms = st["measures"]
        shown = "; ".join(f"{k} ×{ms[k]['ratio']:.3g}" + (f" p_adj {ms[k]['p_adjusted']:.2g}" if ms[k]["p_adjusted"] is not None else "")
                          for k in st["decided_by"] if ms[k]["ratio"] is not None)
        note = st.get("note") or (f"{st['repeats_needed']} repeats per variant would show it" if st.get("repeats_needed") else "")
        diffs.append([d["variant"], d["cell"], st["verdict"], shown or "-", note])
        for r in (st.get("why") or {}).get("causes") or []:
            causes.append([d["variant"], d["cell"], r["cause"], f"{r['baseline']['dips']:g}", f"{r['variant']['dips']:g}",
                           f"{r['baseline']['lost_transactions']:,.0f}", f"{r['variant']['lost_transactions']:,.0f}"])
    out.append((f"Steadiness against {model['baseline']} ({model.get('stability_test', '')})",
                ["variant", "cell", "verdict", "ratios of (value + floor), Holm-adjusted p", "note"], diffs))
    if causes:
        out.append(("Why: dips and transactions lost per run, by leading cause",
                    ["variant", "cell", "cause", f"dips {model['baseline']}", "dips variant",
                     f"tx lost {model['baseline']}", "tx lost variant"], causes))
    return out


def _where(d: dict[str, Any]) -> str:
    return f"{d['variant']} at {d['cell']}" if d.get("cell") and d["cell"] != "all" else d["variant"]


def _measure(cells: dict[tuple[str, str], dict[str, Any]], d: dict[str, Any], baseline: str, key: str) -> str | None:
    """"seconds in dips 12 → 0" from the two cells' medians."""
    a = ((cells.get((baseline, d["cell"])) or {}).get("stability") or {}).get(key) or {}
    b = ((cells.get((d["variant"], d["cell"])) or {}).get("stability") or {}).get(key) or {}
    if a.get("median") is None or b.get("median") is None:
        return None
    label = {"tps_cov": "TPS CoV", "tps_p5_ratio": "5th percentile / median", "dip_seconds": "seconds in dips",
             "stall_seconds": "seconds stalled", "lost_share": "transactions lost in dips"}.get(key, key)
    if key == "lost_share":
        return f"{label} {a['median'] * 100:.2g} % → {b['median'] * 100:.2g} %"
    return f"{label} {a['median']:.3g} → {b['median']:.3g}"


def verdict_lines(model: dict[str, Any]) -> list[str]:
    """Each difference in words, speed then steadiness, each with its why: what ``report`` says on the
    terminal and the Markdown and HTML reports say above their tables."""
    cells = {(c["variant"], c["cell"]): c for c in model["cells"]}
    base = model["baseline"]
    out = []
    for d in model["differences"]:
        where = _where(d)
        if d["verdict"] == "no difference shown":
            more = d.get("note") or (f"{d['repeats_needed']} runs per variant would show a change of this size"
                                     if d.get("repeats_needed") else "")
            speed = f"{where}: speed: no difference shown against {base} (TPS ×{_ratio(d)}" + (f"; {more}" if more else "") + ")"
        else:
            speed = f"{where}: {d['verdict']} than {base}, TPS ×{_ratio(d)}"
            if d.get("why_text"):
                speed += f"; why ({d.get('why_scope', 'server and host')}): {d['why_text'].split(': ', 1)[-1]}"
        out.append(speed)
        st = d.get("stability")
        if not st:
            continue
        shown = [m for m in (_measure(cells, d, base, k) for k in st.get("decided_by") or []) if m]
        if st["verdict"] == "no difference shown":
            more = st.get("note") or (f"{st['repeats_needed']} runs per variant would show it"
                                      if st.get("repeats_needed") else "")
            line = f"{where}: steadiness: no difference shown against {base}" + (f" ({'; '.join(shown)})" if shown else "")
            out.append(line + (f"; {more}" if more else ""))
            continue
        line = f"{where}: {st['verdict']} than {base} ({'; '.join(shown)})"
        why = st.get("why") or {}
        if why.get("text"):
            line += "; why: " + why["text"].split("; ", 1)[-1] if "; " in why["text"] else ""
        out.append(line)
    return out


def chart_png(model: dict[str, Any], path: str) -> str:
    """Above: the median TPS of the runs per variant against the swept value, bars the 95 % intervals. Below:
    the per-interval TPS of each variant's runs pooled per cell, as boxes (25th–75th percentile, the median's
    line, whiskers at the 5th and 95th, dots at the 1st and the worst interval): the valleys a median hides."""
    key, positions = _axis(model)
    where = dict(positions)
    boxes = [c for c in model["cells"] if c.get("interval_tps")]
    fig, axes = plt.subplots(2 if boxes else 1, 1, figsize=(1000 / png.DPI, (860 if boxes else 480) / png.DPI),
                             dpi=png.DPI, squeeze=False)
    ax = axes[0][0]
    top = 1.0
    for i, v in enumerate(model["variants"]):
        pts = sorted((where[c["cell"]], c["tps_median"], c["tps_ci"]) for c in model["cells"]
                     if c["variant"] == v["name"] and c["tps_median"] is not None)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        lo = [max(0.0, p[1] - p[2][0]) if p[2] else 0.0 for p in pts]
        hi = [max(0.0, p[2][1] - p[1]) if p[2] else 0.0 for p in pts]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", lw=1.5, capsize=4, color=png.COLORS[i % len(png.COLORS)],
                    label=v["name"])
        top = max([top] + [p[1] + h for p, h in zip(pts, hi)])
    if key == "cell":
        ax.set_xticks([p for _, p in positions], [n for n, _ in positions])
    else:
        xs = sorted({p for _, p in positions})
        if len(xs) > 2 and xs[0] > 0 and xs[-1] / xs[0] >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.set_ylim(0, top * 1.1)
    ax.set_xlabel(key)
    ax.set_ylabel("TPS (median of runs, bars: 95 % interval)")
    ax.set_title(f"sweep {model['sweep']}: TPS by {key} per variant", loc="left")
    ax.legend(loc="best", fontsize=9, framealpha=0.9)
    if boxes:
        _interval_boxes(axes[1][0], model, boxes)
    fig.tight_layout()
    return png._save(fig, path)


def _interval_boxes(ax, model: dict[str, Any], boxes: list[dict[str, Any]]) -> None:
    names = [v["name"] for v in model["variants"]]
    cells = list(dict.fromkeys(c["cell"] for c in model["cells"]))
    width = 0.8 / max(1, len(names))
    top = 1.0
    for i, name in enumerate(names):
        color = png.COLORS[i % len(png.COLORS)]
        mine = [(cells.index(c["cell"]), c["interval_tps"]) for c in boxes if c["variant"] == name]
        if not mine:
            continue
        spots = [k + (i - (len(names) - 1) / 2) * width for k, _ in mine]
        stats_ = [{"med": d["median"], "q1": d["p25"], "q3": d["p75"], "whislo": d["p5"], "whishi": d["p95"],
                   "fliers": [d["p1"], d["min"]], "label": name} for _, d in mine]
        ax.bxp(stats_, positions=spots, widths=width * 0.85, patch_artist=True, showfliers=True,
               boxprops={"facecolor": color, "alpha": 0.45, "edgecolor": color},
               medianprops={"color": color, "lw": 2}, whiskerprops={"color": color}, capprops={"color": color},
               flierprops={"marker": ".", "markeredgecolor": color})
        ax.plot([], [], color=color, lw=6, alpha=0.45, label=f"{name} ({sum(d['n'] for _, d in mine):,} intervals)")
        top = max([top] + [d["max"] for _, d in mine])
    ax.set_xticks(range(len(cells)), cells)
    ax.set_xlim(-0.6, len(cells) - 0.4)
    ax.set_ylim(0, top * 1.05)
    ax.set_ylabel("TPS per interval")
    ax.set_title("per-interval TPS of the runs, pooled (box 25–75 %, whiskers 5–95 %, dots: 1 % and the worst)",
                 loc="left", fontsize=9)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)


def markdown(model: dict[str, Any], picture: str) -> str:
    lines = [f"# sweep {model['sweep']}", "",
             f"`{' '.join(model['argv'])}` on {model['engine']}; {model['runs']['done']} of {model['runs']['planned']} "
             f"runs, {model['repeat']} rounds, order {model['order']}" + (f" (seed {model['seed']})" if model['order'] == 'interleaved' else "")
             + f"; before each run: {', '.join(model['between_runs']) or 'nothing'}.", "",
             "Variants: " + "; ".join(f"**{v['name']}** ({v['what']}"
                                      + (f", server {', '.join(v['server_versions'])}" if v['server_versions'] else "") + ")"
                                      for v in model["variants"]), "",
             f"![TPS per variant]({picture})", "", "## In words", "",
             *[f"- {line}" for line in verdict_lines(model)], ""]
    for title, header, rows in tables(model):
        lines += [f"## {title}", "", md_table(header, rows), ""]
    lines += profile_markdown(model)
    return "\n".join(lines).rstrip() + "\n"


def profile_markdown(model: dict[str, Any]) -> list[str]:
    """The report's CPU profile section (a sweep --profile): the top changes in words, then a table."""
    from benchwatch.profile import variants

    part = model.get("profile")
    if not part or not part.get("differences"):
        return []
    lines = ["", "## Where the database's CPU went (CPU profiles)", "", part["method"] + ".", ""]
    lines += [f"- {line}" for line in variants.text_lines(part)]
    for d in part["differences"]:
        rows = [[f"`{r['function']}`", r["measure"], f"{100 * r['baseline']:.1f} %", f"{100 * r['variant']:.1f} %",
                 f"{100 * r['change']:+.1f}",
                 f"{100 * r['change_ci'][0]:+.1f} to {100 * r['change_ci'][1]:+.1f}" if r["change_ci"] else "—"]
                for r in d["functions"]]
        if rows:
            lines += ["", f"### {d['variant']}" + (f" at {d['cell']}" if d.get("cell") else ""), "",
                      md_table(["function", "share of", f"{model['baseline']}", d["variant"], "change (points)",
                                "95 % interval"], rows)]
    return lines


def flames_html(flames: list[tuple[str, str]]) -> str:
    """The report page's differential flame graphs (a sweep --profile), one section per comparison."""
    if not flames:
        return ""
    return ('<section class="bw-flames"><h2>Where the database\'s CPU went: differential flame graphs</h2>'
            "<p>Frames as wide as the variant's CPU samples; red where a frame's share of the database's samples "
            "grew against the baseline, blue where it fell (full colour at 5 points); hover a frame for both "
            "shares. [unknown] is a frame the unwinder could not name (docs/profiles.md).</p>"
            + "".join(f"<h3>{htmllib.escape(name)}</h3>{svg}" for name, svg in flames) + "</section>")


def write_report(model: dict[str, Any], out_dir: str, secrets: list[str] | None = None,
                 flames: list[tuple[str, str]] | None = None) -> list[str]:
    """The bundle's directory and its .tar.gz; ``flames``: (comparison, differential flame graph SVG) of a
    profiled sweep, on the page and as flame-<comparison>.svg files."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)  # and its parents: <state dir>/shares/ on a first report
    key, _ = _axis(model)
    picture = chart_png(model, os.path.join(out_dir, f"tps-by-{bundle.slug(key)}.png"))
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(markdown(model, os.path.basename(picture)))
    with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as f:
        json.dump(model, f, indent=1)
        f.write("\n")
    _write_csv(os.path.join(out_dir, "cells.csv"),
               ["variant", "clients", "scale", "cell", "n", "tps_median", "tps_ci_lo", "tps_ci_hi",
                "latency_avg_ms_median", "run_ids"],
               ([c["variant"], c["clients"], c["scale"], c["cell"], c["n"], c["tps_median"], *(c["tps_ci"] or [None, None]),
                 c["latency_avg_ms_median"], " ".join(c["run_ids"])] for c in model["cells"]))
    _write_csv(os.path.join(out_dir, "differences.csv"),
               ["variant", "clients", "scale", "cell", "ratio", "ratio_ci_lo", "ratio_ci_hi", "verdict",
                "p_adjusted", "repeats_needed"],
               ([d["variant"], d["clients"], d["scale"], d["cell"], d["ratio"], *(d["ratio_ci"] or [None, None]),
                 d["verdict"], d["p_adjusted"], d["repeats_needed"]] for d in model["differences"]))
    with open(picture, "rb") as f:
        image = base64.b64encode(f.read()).decode()
    header = (f"<header><h1>sweep {htmllib.escape(model['sweep'])}</h1><p>{htmllib.escape(' '.join(model['argv']))}"
              f" — baseline {htmllib.escape(model['baseline'])}</p><ul>"
              + "".join(f"<li>{htmllib.escape(line)}</li>" for line in verdict_lines(model)) + "</ul>"
              f'<img alt="TPS per variant" style="max-width:100%" src="data:image/png;base64,{image}"></header>')
    for name, svg in flames or []:
        with open(os.path.join(out_dir, f"flame-{bundle.slug(name)}.svg"), "w", encoding="utf-8") as f:
            f.write(svg)
    with open(os.path.join(out_dir, "index.html"), "w", encoding="utf-8") as f:
        f.write(html.page(f"sweep {model['sweep']}", header, {"panels": [], "zoomMode": "seconds"},
                          html.tables_html(tables(model)) + flames_html(flames or [])))
    bundle.check_secrets(out_dir, secrets or [])
    return [out_dir, bundle.pack(out_dir)]


def _write_csv(path: str, header: list[str], rows) -> None:
    """One CSV of the bundle: its header, then its rows."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
