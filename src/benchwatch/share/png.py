"""PNG pictures of a run (matplotlib, Agg: no display, no network, DejaVu fonts from the system).

Time on the x axis is seconds since the tool's clock started, the way TPS
curves are shown in performance write-ups; each engine's regions (checkpoints
by reason with their exact log times, InnoDB's flushing pressure) are shaded.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchwatch import engines, loadgens
from benchwatch.query.frames import prefer_pushed
from benchwatch.share.collect import Collected
from benchwatch.share.summary import one

DPI = 100
SIZES = {"tps.png": (1200, 500), "latency.png": (1200, 450), "disk.png": (1200, 700)}
COLORS = ["#1F78C1", "#E24D42", "#7EB26D", "#EAB839", "#BA43A9", "#EF843C", "#6ED0E0", "#705DA0", "#508642", "#CCA300"]

plt.rcParams.update({"font.family": "DejaVu Sans", "font.size": 10, "axes.titlesize": 11,
                     "axes.grid": True, "grid.color": "#e6e8eb", "axes.edgecolor": "#9aa0a6",
                     "svg.hashsalt": "benchwatch"})


def _figure(size: tuple[int, int], rows: int = 1):
    fig, axes = plt.subplots(rows, 1, figsize=(size[0] / DPI, size[1] / DPI), dpi=DPI, sharex=True, squeeze=False)
    return fig, [a[0] for a in axes]


def _save(fig, path: str) -> str:
    fig.savefig(path, dpi=DPI, metadata={"Software": "benchwatch", "Creation Time": None})
    plt.close(fig)
    return path


def run_spans(c: Collected, t0_ms: float) -> list[tuple[float, float, str, str]]:
    """The regions a run's charts shade, each (start s, end s, colour, legend) relative to t0: each engine's
    (Engine.chart_spans: checkpoints, InnoDB flushing pressure), from the regions its summary holds."""
    return [span for e in engines.load_engines().values() for span in e.chart_spans(c.summary, c.annotations, t0_ms)]


def _tool(c: Collected) -> loadgens.LoadGenerator:
    return loadgens.by_name(c.summary["run"].get("tool"))


def shade(ax, spans, seen: dict) -> None:
    for a, b, colour, name in spans:
        width = max(b - a, 0.15)  # an instant CHECKPOINT still shows
        label = None if name in seen else name
        seen[name] = colour
        ax.axvspan(a, a + width, color=colour, alpha=0.22, lw=0, label=label)


def _run_bounds(ax, c: Collected, t0_ms: float) -> None:
    end = c.meta.get("ended_at")
    ax.axvline(0, color="#9aa0a6", lw=0.8, ls=":")
    if end:
        ax.axvline(end - t0_ms / 1000, color="#9aa0a6", lw=0.8, ls=":")


def _t0(c: Collected) -> float:
    return float(c.meta.get("clock_start_epoch") or c.meta.get("started_at") or c.start) * 1000


def _title(c: Collected, what: str) -> str:
    args = c.summary["run"].get("args") or ""
    return f"{what} — {args}  ({c.run_id})" if args else f"{what} — {c.run_id}"


def _legend_spans(ax) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="lower left", fontsize=9, framealpha=0.9, ncol=min(len(handles), 5))


def _finish_run_chart(fig, ax, c: Collected, t0: float, top: float, ylabel: str, what: str, path: str) -> str:
    """Run bounds, axes, title and legend of a chart over the run's time; saves it."""
    _run_bounds(ax, c, t0)
    ax.set_ylim(bottom=0, top=top * 1.08)
    ax.set_xlabel(f"seconds since {_tool(c).title}'s start")
    ax.set_ylabel(ylabel)
    ax.set_title(_title(c, what), loc="left")
    _legend_spans(ax)
    fig.tight_layout()
    return _save(fig, path)


def tps_png(c: Collected, path: str) -> str:
    t0 = _t0(c)
    fig, (ax,) = _figure(SIZES["tps.png"])
    s = one(c.series, "benchmark_progress_tps", run_id=c.run_id)
    xs = [(ts - t0) / 1000 for ts, _ in (s.samples if s else [])]
    ys = [v for _, v in (s.samples if s else [])]
    seen: dict = {}
    shade(ax, run_spans(c, t0), seen)
    tool = _tool(c)
    ax.plot(xs, ys, color=COLORS[0], lw=1.4, marker="." if len(xs) < 120 else None, ms=4,
            label=f"{tool.title} TPS ({tool.progress_option})")
    median = c.summary["tps"].get("median")
    if median:
        ax.axhline(median, color="#5b6169", lw=0.8, ls="--", label=f"median {median:,.0f}")
    return _finish_run_chart(fig, ax, c, t0, max(ys + [1]), "transactions per second", "TPS", path)


STDDEV_SUFFIX = "_progress_latency_stddev_seconds"


def latency_png(c: Collected, path: str) -> str:
    t0 = _t0(c)
    fig, (ax,) = _figure(SIZES["latency.png"])
    seen: dict = {}
    shade(ax, run_spans(c, t0), seen)
    top = 0.0
    tool = _tool(c)
    # A tool may print a percentile per interval rather than an average.
    for quantile in [x for x in c.series if x.name == "benchmark_progress_latency_quantile_seconds" and x.labels.get("run_id") == c.run_id]:
        ys = [v * 1000 for _, v in quantile.samples]
        ax.plot([(ts - t0) / 1000 for ts, _ in quantile.samples], ys, color=COLORS[0], lw=1.4,
                label=f"p{float(quantile.labels.get('quantile', '0')) * 100:g} ({tool.progress_option})")
        top = max([top] + ys)
    avg = one(c.series, "benchmark_progress_latency_seconds", run_id=c.run_id)
    if avg:
        ys = [v * 1000 for _, v in avg.samples]
        ax.plot([(ts - t0) / 1000 for ts, _ in avg.samples], ys, color=COLORS[0], lw=1.4, label=f"average ({tool.progress_option})")
        top = max([top] + ys)
    # The tool's own stddev per progress line, where it prints one (<tool>_progress_latency_stddev_seconds).
    sd = next((x for x in prefer_pushed(c.series) if x.name.endswith(STDDEV_SUFFIX) and x.labels.get("run_id") == c.run_id),
              None)
    if sd:
        ys = [v * 1000 for _, v in sd.samples]
        ax.plot([(ts - t0) / 1000 for ts, _ in sd.samples], ys, color="#9aa0a6", lw=1, ls="--",
                label=f"stddev ({tool.progress_option})")
        top = max([top] + ys)
    # Percentiles: the dashboard's histogram_quantile series, when the run used -l.
    for p in c.panels:
        if p["title"] != "Latency":
            continue
        for i, t in enumerate(p["targets"]):
            if not t["legend"].startswith("p"):
                continue
            for f in t["frames"]:
                pts = [(x, v) for x, v in f["points"] if v is not None]
                if pts:
                    ys = [v * 1000 for _, v in pts]
                    ax.plot([(x - t0) / 1000 for x, _ in pts], ys, lw=1.2, color=COLORS[(i + 1) % len(COLORS)], label=f["name"])
                    top = max([top] + ys)
    return _finish_run_chart(fig, ax, c, t0, top or 1, "latency (ms)", "Latency", path)


def _panel(c: Collected, title: str) -> dict | None:
    return next((p for p in c.panels if p["title"] == title), None)


def disk_png(c: Collected, path: str) -> str:
    t0 = _t0(c)
    fig, (ax_await, ax_util) = _figure(SIZES["disk.png"], rows=2)
    spans = run_spans(c, t0)
    # Every run dashboard's host panels (iostat's names; benchwatch.dashboards.run.host_rows).
    for ax, title, scale, ylabel in ((ax_await, "Wait per request (r_await, w_await)", 1000, "await (ms)"),
                                     (ax_util, "Utilisation (%util)", 100, "%util")):
        seen: dict = {}
        shade(ax, spans, seen)
        panel = _panel(c, title)
        i = 0
        top = 0.0
        for t in (panel or {}).get("targets", []):
            for f in t["frames"]:
                pts = [(x, v) for x, v in f["points"] if v is not None]
                if not pts or not any(v for _, v in pts):
                    continue  # a device that did nothing during the run
                ys = [v * scale for _, v in pts]
                ax.plot([(x - t0) / 1000 for x, _ in pts], ys, lw=1.2, color=COLORS[i % len(COLORS)], label=f["name"])
                top = max([top] + ys)
                i += 1
        if i == 0:
            ax.text(0.5, 0.5, "no disk data", transform=ax.transAxes, ha="center", color="#5b6169")
        _run_bounds(ax, c, t0)
        ax.set_ylim(bottom=0, top=(top or 1) * 1.08)
        ax.set_ylabel(ylabel)
        ax.set_title(_title(c, title) if ax is ax_await else title, loc="left")
        _legend_spans(ax)
    ax_util.set_xlabel(f"seconds since {_tool(c).title}'s start")
    fig.tight_layout()
    return _save(fig, path)


def snapshot_pngs(c: Collected, directory: str) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    return [tps_png(c, os.path.join(directory, "tps.png")),
            latency_png(c, os.path.join(directory, "latency.png")),
            disk_png(c, os.path.join(directory, "disk.png"))]


def png_size(path: str) -> tuple[int, int]:
    """Width and height from the IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
