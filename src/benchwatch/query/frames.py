"""What Grafana makes of Prometheus answers: series names, annotation regions.

Pure functions over Prometheus API results, shared by the snapshot JSON, the
HTML page and the pictures so they all show the same thing.
"""

from __future__ import annotations

import math
import re

from benchwatch.query.series import Series

_LEGEND_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def render_legend(fmt: str, labels: dict[str, str]) -> str:
    """Grafana's legendFormat / titleFormat: {{label}} replaced, an unknown label gives ''."""
    return _LEGEND_VAR.sub(lambda m: labels.get(m.group(1), ""), fmt)


def display_name(legend: str, labels: dict[str, str], expr: str) -> str:
    """The series name Grafana shows for a Prometheus result."""
    if legend and legend != "__auto":
        return render_legend(legend, labels)
    name = labels.get("__name__", "")
    rest = {k: v for k, v in labels.items() if k != "__name__"}
    if not name and not rest:
        return expr
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(rest.items()))
    return f"{name}{{{inner}}}" if inner else name


def number(text) -> float | None:
    """A Prometheus sample value; NaN and infinities become None (no point drawn)."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def result_to_frames(result: list, legend: str, expr: str) -> list[dict]:
    """One frame per series: {name, labels, points: [[ms, value|None], ...]}."""
    frames = []
    for r in result:
        labels = dict(r.get("metric", {}))
        if "values" in r:
            points = [[int(round(float(t) * 1000)), number(v)] for t, v in r["values"]]
        else:
            t, v = r["value"]
            points = [[int(round(float(t) * 1000)), number(v)]]
        frames.append({"name": display_name(legend, labels, expr), "labels": labels, "points": points})
    return frames


def grafana_annotation_events(result: list, step_s: float, title_fmt: str, text_fmt: str,
                              tag_keys: str) -> list[dict]:
    """Regions as Grafana's Prometheus data source builds them from a range query:
    the steps with a value > 0, merged while they are no more than one step apart."""
    step_ms = int(step_s * 1000)
    events = []
    for r in result:
        labels = r.get("metric", {})
        active = [int(round(float(t) * 1000)) for t, v in r.get("values", []) if (number(v) or 0) > 0]
        current = None
        for ts in active:
            if current and current["timeEnd"] + step_ms >= ts:
                current["timeEnd"] = ts
                continue
            if current:
                events.append(current)
            current = _event(ts, ts, labels, title_fmt, text_fmt, tag_keys)
        if current:
            events.append(current)
    return sorted(events, key=lambda e: e["time"])


def _event(start_ms: int, end_ms: int, labels: dict, title_fmt: str, text_fmt: str, tag_keys: str) -> dict:
    tags = [labels[k.strip()] for k in (tag_keys or "").split(",") if k.strip() and labels.get(k.strip())]
    return {"time": start_ms, "timeEnd": end_ms, "title": render_legend(title_fmt or "", labels),
            "text": render_legend(text_fmt or "", labels), "tags": tags}


SCRAPE_LABELS = ("job", "instance", "component")


def prefer_pushed(series: list[Series]) -> list[Series]:
    """Where a series reached Prometheus both pushed at its own timestamps (no job label) and
    scraped (job, instance), keep the pushed one: its edges are the exact log times."""
    pushed = {(s.name, tuple(sorted(s.labels.items()))) for s in series if "job" not in s.labels}
    out = []
    for s in series:
        if "job" in s.labels:
            core = {k: v for k, v in s.labels.items() if k not in SCRAPE_LABELS}
            if (s.name, tuple(sorted(core.items()))) in pushed:
                continue
        out.append(s)
    return out


# A state series repeats its value at least this often while it holds (the exporter's
# heartbeat is 1 s); a longer silence ends a region (e.g. after a staleness marker).
MAX_SILENCE_MS = 2500


def boolean_regions(series: Series, max_silence_ms: int = MAX_SILENCE_MS) -> list[tuple[int, int]]:
    """(start, end) in ms of each stretch where a state series is > 0, at its samples' own times:
    it starts at the first sample > 0 and ends at the next sample <= 0 or, after a silence, at
    the last sample > 0."""
    regions: list[tuple[int, int]] = []
    start: int | None = None
    last_on: int | None = None  # set whenever start is
    for ts, v in series.samples:
        on = v == v and v > 0  # NaN (a staleness marker) is off
        if start is not None and last_on is not None and ts - last_on > max_silence_ms:
            regions.append((start, last_on))
            start = None
        if on:
            if start is None:
                start = ts
            last_on = ts
        elif start is not None:
            regions.append((start, ts))
            start = None
    if start is not None and last_on is not None:
        regions.append((start, last_on))
    return regions


def exact_annotation_events(series: list[Series], title_fmt: str, text_fmt: str, tag_keys: str,
                            start_ms: int, end_ms: int) -> list[dict]:
    events = []
    for s in prefer_pushed(series):
        labels = {"__name__": s.name, **s.labels}
        for a, b in boolean_regions(s):
            if b < start_ms or a > end_ms:
                continue
            events.append(_event(a, b, labels, title_fmt, text_fmt, tag_keys))
    return sorted(events, key=lambda e: (e["time"], e["title"]))
