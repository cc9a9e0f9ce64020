"""MySQL/MariaDB's part of a run's summary: InnoDB's flushing-pressure regions with TPS during and around
each, the server's settings as the run recorded them; their tables and compare rows."""

from __future__ import annotations

from benchwatch.present.summary import AROUND_S, CompareRow, Context, Table, fmt_num, fmt_time


def pressure_rows(ctx: Context, around_s: float = AROUND_S) -> list[dict]:
    """InnoDB flushing-pressure regions (instance:mysql_innodb_flushing_pressure:bool, one series per
    target) during the run, with TPS during each and around it, as PostgreSQL's checkpoint rows."""
    rows = [{"target": r["series"].labels.get("target", ""), "start": r["start"], "end": r["end"],
             "duration_s": r["end"] - r["start"], "tps_during": r["tps_during"], "tps_around": r["tps_around"],
             "change_pct": r["change_pct"]}
            for r in ctx.regions_with_tps("instance:mysql_innodb_flushing_pressure:bool", around_s)]
    return sorted(rows, key=lambda r: (r["start"], r["target"]))


def figures(ctx: Context) -> dict:
    # The server's settings as the run's meta.json recorded them (InnoDB's).
    return {"flushing_pressure": pressure_rows(ctx), "server_settings": dict(ctx.meta.get("settings") or {})}


def tables(s: dict) -> list[Table]:
    rows = []
    t0 = s["run"].get("start")
    for r in s.get("flushing_pressure") or []:
        rows.append([r["target"], fmt_time(r["start"]), "—" if t0 is None else f"{r['start'] - t0:+.1f} s",
                     f"{r['duration_s']:.1f} s", fmt_num(r["tps_during"]), fmt_num(r["tps_around"]),
                     "—" if r["change_pct"] is None else f"{r['change_pct']:+.1f}%"])
    return [("InnoDB flushing pressure", ["target", "start (UTC)", "run time", "duration", "TPS during",
                                          f"TPS around (±{AROUND_S:g} s)", "change"],
             rows or [["no flushing pressure during the run"] + [""] * 6])]


def settings_tables(s: dict) -> list[Table]:
    settings = s.get("server_settings") or {}
    return [("Server settings", ["setting", "value"], [[k, str(v)] for k, v in sorted(settings.items())])] if settings else []


COMPARE_ROWS = [
    CompareRow("events", "InnoDB flushing pressure seconds",
               lambda s: sum(r["duration_s"] for r in s["flushing_pressure"]) if "flushing_pressure" in s else None,
               lambda v: fmt_num(v, 0), -1),
]


def chart_spans(summary: dict, annotations: list[dict], t0_ms: float) -> list[tuple[float, float, str, str]]:
    """(start s, end s, colour, legend) of each InnoDB flushing-pressure region, relative to t0."""
    colour = next((a["color"] for a in annotations if a["name"] == "InnoDB flushing pressure"), "#FF9830")
    return [(r["start"] - t0_ms / 1000, r["end"] - t0_ms / 1000, colour, f"flushing pressure ({r['target']})")
            for r in summary.get("flushing_pressure") or []]
