"""PostgreSQL's part of a run's summary: its checkpoints with TPS during and around each, its settings;
their tables and compare rows."""

from __future__ import annotations

from benchwatch.present.summary import (
    AROUND_S,
    CompareRow,
    Context,
    Table,
    fmt_bytes,
    fmt_num,
    fmt_seconds,
    fmt_time,
    last_value,
    one,
    value_at,
)
from benchwatch.query.frames import prefer_pushed

KEY_SETTINGS = ("shared_buffers_bytes", "max_wal_size_bytes", "min_wal_size_bytes", "checkpoint_timeout_seconds",
                "checkpoint_completion_target", "wal_buffers_bytes", "fsync", "full_page_writes",
                "synchronous_commit", "wal_compression", "max_connections", "work_mem_bytes",
                "effective_io_concurrency", "bgwriter_lru_maxpages", "checkpoint_flush_after_bytes")

def checkpoint_rows(ctx: Context, around_s: float = AROUND_S) -> list[dict]:
    """Every checkpoint (or restartpoint) overlapping the run: reason, duration, write/sync, buffers,
    distance, and the run's TPS during it and around it."""
    rows = []
    for r in ctx.regions_with_tps("pg_checkpoint_in_progress", around_s):
        s, a, b = r["series"], int(r["start"] * 1000), int(r["end"] * 1000)
        kind = s.labels.get("kind", "checkpoint")
        completed = any(ts == b and v == 0 for ts, v in s.samples)

        def at_end(name: str, **labels: str) -> float | None:
            return value_at(one(ctx.series, name, kind=kind, **labels), b) if completed else None

        total = at_end("pg_checkpoint_last_duration_seconds", phase="total")
        rows.append({
            "start": r["start"], "end": r["end"], "kind": kind, "reason": s.labels.get("reason", ""),
            "completed": completed, "duration_s": total if total is not None else (b - a) / 1000,
            "write_s": at_end("pg_checkpoint_last_duration_seconds", phase="write"),
            "sync_s": at_end("pg_checkpoint_last_duration_seconds", phase="sync"),
            "buffers": at_end("pg_checkpoint_last_buffers_written"),
            "buffers_ratio": at_end("pg_checkpoint_last_buffers_written_ratio"),
            "distance_bytes": at_end("pg_checkpoint_last_distance_bytes"),
            "tps_during": r["tps_during"], "tps_around": r["tps_around"], "change_pct": r["change_pct"],
        })
    return sorted(rows, key=lambda row: row["start"])


def settings_from(series: list, end_ms: int) -> dict[str, float]:
    out = {}
    for s in sorted(prefer_pushed(series), key=lambda s: s.key):
        if s.name.startswith("pg_settings_") and s.name[len("pg_settings_"):] not in out:
            v = last_value(s, end_ms)
            if v is not None:
                out[s.name[len("pg_settings_"):]] = v
    return out


def figures(ctx: Context) -> dict:
    return {"checkpoints": checkpoint_rows(ctx), "settings": settings_from(ctx.series, int(ctx.end_s * 1000))}


def fmt_setting(name: str, v: float) -> tuple[str, str]:
    for suffix, f in (("_bytes", fmt_bytes), ("_seconds", fmt_seconds)):
        if name.endswith(suffix):
            return name[: -len(suffix)], f(v)
    if name in ("fsync", "full_page_writes", "wal_log_hints", "wal_init_zero", "wal_recycle", "data_checksums"):
        return name, "on" if v else "off"
    return name, f"{v:g}"


def tables(s: dict) -> list[Table]:
    rows = []
    t0 = s["run"].get("start")
    for c in s.get("checkpoints") or []:
        rows.append([fmt_time(c["start"]), "—" if t0 is None else f"{c['start'] - t0:+.1f} s",
                     c["reason"] + ("" if c["kind"] == "checkpoint" else f" ({c['kind']})"),
                     f"{c['duration_s']:.3f} s" + ("" if c["completed"] else " (not complete)"),
                     "—" if c["write_s"] is None else f"{c['write_s']:.3f} / {c['sync_s'] or 0:.3f} s",
                     fmt_num(c["buffers"], 0) + ("" if c["buffers_ratio"] is None else f" ({c['buffers_ratio'] * 100:.1f}%)"),
                     fmt_bytes(c["distance_bytes"]), fmt_num(c["tps_during"]), fmt_num(c["tps_around"]),
                     "—" if c["change_pct"] is None else f"{c['change_pct']:+.1f}%"])
    return [("Checkpoints", ["start (UTC)", "run time", "reason", "duration", "write / sync", "buffers", "distance",
                             "TPS during", f"TPS around (±{AROUND_S:g} s)", "change"],
             rows or [["no checkpoint during the run"] + [""] * 9])]


def settings_tables(s: dict) -> list[Table]:
    settings = s.get("settings") or {}
    rows = [list(fmt_setting(k, settings[k])) for k in KEY_SETTINGS if k in settings]
    return [("Server settings", ["setting", "value"], rows)] if rows else []


COMPARE_ROWS = [
    CompareRow("events", "checkpoints", lambda s: len(s["checkpoints"]) if "checkpoints" in s else None,
               lambda v: fmt_num(v, 0), 0),
]


def chart_spans(summary: dict, annotations: list[dict], t0_ms: float) -> list[tuple[float, float, str, str]]:
    """(start s, end s, colour, legend) of each checkpoint, relative to t0: the exact log times
    from the summary, coloured like the dashboard annotation that draws it (by reason)."""
    out = []
    reason_annotations = [a for a in annotations
                          if not a["name"].lower().endswith(" run") and "progress" not in a["name"].lower()]
    for row in summary.get("checkpoints", []):
        a_ms, b_ms = row["start"] * 1000, row["end"] * 1000
        colour, name = "#8F8F8F", f"checkpoint ({row['reason']})"
        for a in reason_annotations:
            if any(e["time"] <= b_ms + 1000 and e["timeEnd"] >= a_ms - 1000 and row["reason"] in " ".join(e["tags"] + [e["title"]])
                   for e in a["events"]):
                colour, name = a["color"], a["name"]
                break
        out.append(((a_ms - t0_ms) / 1000, (b_ms - t0_ms) / 1000, colour, name))
    return out
