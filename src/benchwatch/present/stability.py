"""A run's stability profile (summary.json's ``"stability"``, benchwatch.stability) in words and rows:
the lines ``run`` prints before its last one, the demo's summary, the snapshot's and compare's rows.

Plain formatting of the profile's dict, below the plug-in folders so an engine's demo can print it too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchwatch.present.summary import fmt_ms, fmt_num, fmt_pct

# name, label, format: the rows of the profile, in the order the snapshot and compare show them.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("tps_median", "TPS median (steady part)", "num"),
    ("tps_cov", "TPS coefficient of variation", "ratio"),
    ("tps_p1_ratio", "p1 interval / median", "ratio"),
    ("tps_p5_ratio", "p5 interval / median", "ratio"),
    ("tps_min_ratio", "worst interval / median", "ratio"),
    ("dips", "dips", "count"),
    ("dip_seconds", "seconds in dips", "seconds"),
    ("stall_seconds", "seconds stalled", "seconds"),
    ("lost_transactions", "transactions lost in dips", "num0"),
    ("lost_share", "share of transactions lost", "pct"),
    ("latency_p99_s", "latency p99", "ms"),
    ("latency_p999_s", "latency p99.9", "ms"),
    ("latency_max_s", "latency max", "ms"),
)


def fmt(kind: str, value: Any) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    if kind == "ratio":
        return f"{value:.3f}"
    if kind == "count":
        return f"{value:.0f}"
    if kind == "seconds":
        return f"{value:,.1f} s"
    if kind == "num0":
        return fmt_num(value, 0)
    if kind == "pct":
        return fmt_pct(value, 2)
    if kind == "ms":
        return fmt_ms(value)
    return fmt_num(value)


def steady_part(stab: Mapping[str, Any]) -> str:
    """What the profile was computed over, in words."""
    if not stab.get("intervals"):
        return f"no stability profile: {stab.get('warmup') or 'no progress lines'}"
    return (f"{stab['intervals']} intervals of {stab.get('interval_s'):g} s after {stab.get('warmup_s') or 0:g} s "
            f"of warm-up")


def lines(stab: Mapping[str, Any] | None) -> list[str]:
    """The profile in two or three short lines (none without a profile)."""
    if not isinstance(stab, Mapping):
        return []
    if not stab.get("intervals"):
        return [f"stability: {steady_part(stab)}"]
    out = [f"stability over {steady_part(stab)}: TPS median {fmt_num(stab.get('tps_median'))}, "
           f"CoV {fmt('ratio', stab.get('tps_cov'))}, p5/median {fmt('ratio', stab.get('tps_p5_ratio'))}, "
           f"worst/median {fmt('ratio', stab.get('tps_min_ratio'))}"]
    dips = f"{stab.get('dips')} dip{'s' if stab.get('dips') != 1 else ''} ({fmt('seconds', stab.get('dip_seconds'))})"
    out.append(f"stability: {dips}, {fmt('seconds', stab.get('stall_seconds'))} stalled, "
               f"{fmt('num0', stab.get('lost_transactions'))} transactions lost in dips "
               f"({fmt('pct', stab.get('lost_share'))})" + _causes(stab.get("dips_by_cause")))
    if stab.get("latency_source"):
        out.append(f"stability: latency p99 {fmt('ms', stab.get('latency_p99_s'))}, "
                   f"p99.9 {fmt('ms', stab.get('latency_p999_s'))}, max {fmt('ms', stab.get('latency_max_s'))} "
                   f"({stab['latency_source']})")
    return out


def short(stab: Mapping[str, Any] | None) -> str:
    """The profile in one line, for a table of runs ("" without a profile)."""
    if not isinstance(stab, Mapping) or not stab.get("intervals"):
        return ""
    return (f"CoV {fmt('ratio', stab.get('tps_cov'))}, p5/median {fmt('ratio', stab.get('tps_p5_ratio'))}, "
            f"worst/median {fmt('ratio', stab.get('tps_min_ratio'))}, {stab.get('dips')} dip(s) "
            f"({fmt('seconds', stab.get('dip_seconds'))}), {fmt('seconds', stab.get('stall_seconds'))} stalled, "
            f"{fmt('pct', stab.get('lost_share'))} of transactions lost")


def _causes(by_cause: Any) -> str:
    if not isinstance(by_cause, Mapping) or not by_cause:
        return ""
    parts = [f"{cause} {row.get('dips')} ({fmt('num0', row.get('lost_transactions'))} tx)"
             for cause, row in by_cause.items() if isinstance(row, Mapping)]
    return "; by cause: " + ", ".join(parts)


def rows(stab: Mapping[str, Any] | None) -> list[list[str]]:
    """[label, value] per measure, for a table."""
    if not isinstance(stab, Mapping):
        return []
    out = [[label, fmt(kind, stab.get(key))] for key, label, kind in ROWS]
    by_cause = stab.get("dips_by_cause")
    if isinstance(by_cause, Mapping):
        for cause, row in by_cause.items():
            if isinstance(row, Mapping):
                out.append([f"dips: {cause}", f"{row.get('dips')} ({fmt('seconds', row.get('seconds'))}, "
                                              f"{fmt('num0', row.get('lost_transactions'))} tx lost)"])
    return out
