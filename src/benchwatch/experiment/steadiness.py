"""Steadiness in an experiment: each run's stability profile (summary.json's ``stability``) per cell with
intervals, and per variant against the baseline a verdict of "steadier", "less steady" or "no difference shown".

Measures that are often zero (a calm run has no dip, no stall, no transaction lost) have no logarithm, and
the statistics of TPS are on the logs; so each measure has a *floor*, the smallest amount it can tell from
nothing (one dip, one second — a dip lasts at least one progress interval —, 0.1 % of the run's transactions,
1 % of the median TPS), and every measure is read as log(value + floor): the interval of a cell is Student's t
on those (the floor taken off again), the test is Welch's t on those, the ratio is that of
(value + floor)'s geometric means. A measure that never leaves zero on either side is "no spread at all" and
no difference, as it should be.

Five measures decide the verdict (:data:`DECIDING`): how much the per-interval TPS varies (its coefficient
of variation), how deep its valleys go (the 5th percentile of the intervals against their median: in a
run of a few seconds, where a dip detector sees too few lines for a steady level, it still does), the
seconds in dips, the seconds stalled (no transaction at all: the clearest valley, and on a busy machine
the one its noise does not make) and the share of the run's transactions lost in dips: the jitter, the
valleys, the stalls and their cost. Their p-values join one family across the whole report, adjusted by
Holm, each with the --min-effect of the TPS verdicts; the variant is "steadier" when at least one of them
is shown better and none shown worse, "less steady" the other way round, and "no difference shown" when
none is shown or they disagree (said in the note). The other measures (the 1st percentile and the worst
interval against the median, dips, transactions lost, the latency tail) have their medians, intervals
and ratios in the report but do not decide: the latency tail moves with speed as much as with
steadiness, and the rest say again, another way, what the deciding five measure.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchwatch.experiment import stats

STEADIER, LESS_STEADY, NONE = "steadier", "less steady", "no difference shown"


@dataclass(frozen=True)
class Measure:
    key: str          # summary.json's stability key
    label: str
    better: int       # +1 higher is steadier, -1 lower is
    floor: float      # added before the logarithm: the smallest amount told from nothing
    unit: str = ""
    decides: bool = False
    top: float | None = None  # the most it can be (a share, a ratio to the median): an interval stops there


MEASURES: tuple[Measure, ...] = (
    Measure("tps_cov", "TPS coefficient of variation", -1, 0.001, decides=True),
    Measure("tps_p5_ratio", "5th percentile of interval TPS / median", +1, 0.01, decides=True, top=1.0),
    Measure("dip_seconds", "seconds in dips", -1, 1.0, "s", decides=True),
    Measure("lost_share", "share of transactions lost in dips", -1, 0.001, decides=True, top=1.0),
    Measure("stall_seconds", "seconds stalled", -1, 1.0, "s", decides=True),
    Measure("dips", "dips", -1, 1.0),
    Measure("lost_transactions", "transactions lost in dips", -1, 1.0, "tx"),
    Measure("tps_p1_ratio", "1st percentile of interval TPS / median", +1, 0.01, top=1.0),
    Measure("tps_min_ratio", "worst interval's TPS / median", +1, 0.01, top=1.0),
    Measure("latency_p99_s", "latency p99", -1, 0.0, "s"),
    Measure("latency_p999_s", "latency p99.9", -1, 0.0, "s"),
    Measure("latency_max_s", "latency max", -1, 0.0, "s"),
)
DECIDING = tuple(m.key for m in MEASURES if m.decides)
TEST_NAME = ("Welch's t-test on log(value + floor) of per-run values of " + ", ".join(DECIDING) + " (floors "
             + ", ".join(f"{m.key} {m.floor:g}" for m in MEASURES if m.decides) + "), Holm-adjusted across the "
             "report's stability tests, --min-effect on the ratio of (value + floor)'s geometric means; steadier: "
             "at least one shown better and none shown worse")
INTERVAL_NAME = "95 % Student's t interval on log(value + floor), the floor taken off again, beside the median"


def _values(profiles: Sequence[dict[str, Any] | None], key: str) -> list[float]:
    out = []
    for p in profiles:
        v = (p or {}).get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
            out.append(float(v))
    return out


def _round(x: float | None, digits: int = 6) -> float | None:
    return float(f"{x:.{digits}g}") if x is not None else None


def cell(profiles: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """A cell's ``stability``: per measure its median, 95 % interval and n (runs that have it), the dips by
    leading cause as means per run, and a note on runs without a profile."""
    out: dict[str, Any] = {}
    for m in MEASURES:
        xs = _values(profiles, m.key)
        med, ci = stats.median_ci([x + m.floor for x in xs])
        out[m.key] = {"median": _round(med - m.floor if med is not None else None),
                      "ci": [_round(max(0.0, ci[0] - m.floor)),
                             _round(ci[1] - m.floor if m.top is None else min(m.top, ci[1] - m.floor))] if ci else None,
                      "n": len(xs)}
    out["dips_by_cause"] = by_cause(profiles)
    missing = sum(1 for p in profiles if not p)
    if missing:
        out["note"] = f"{missing} of {len(profiles)} runs have no stability profile"
    return out


def by_cause(profiles: Sequence[dict[str, Any] | None]) -> dict[str, dict[str, float]] | None:
    """Leading cause -> dips, seconds and transactions lost per run (the mean over the runs whose profile has
    its dips by cause: they need the run's archived series); None when no run has them."""
    known = [p["dips_by_cause"] for p in profiles if p and isinstance(p.get("dips_by_cause"), dict)]
    if not known:
        return None
    causes = sorted({c for d in known for c in d})
    out = {}
    for c in causes:
        rows = [d.get(c) or {} for d in known]
        out[c] = {k: round(statistics.fmean(float(r.get(k) or 0) for r in rows), 2)
                  for k in ("dips", "seconds", "lost_transactions")}
    return out


@dataclass
class Difference:
    """One variant against the baseline in one cell: a comparison per measure."""

    comparisons: dict[str, tuple[stats.Comparison, list[float], list[float]]]
    verdict: str = NONE
    note: str = ""


def compare(base: Sequence[dict[str, Any] | None], variant: Sequence[dict[str, Any] | None]) -> Difference:
    out = {}
    for m in MEASURES:
        a = [x + m.floor for x in _values(base, m.key)]
        b = [x + m.floor for x in _values(variant, m.key)]
        out[m.key] = (stats.compare(a, b), a, b)
    return Difference(out)


def decide(differences: Sequence[Difference], min_effect_pct: float) -> None:
    """Every deciding comparison of the report in one Holm family; each difference its verdict."""
    family = []
    for d in differences:
        for m in MEASURES:
            if m.decides:
                c, a, b = d.comparisons[m.key]
                family.append((c, a, b, m.better, (STEADIER, LESS_STEADY)))
    stats.decide_each(family, min_effect_pct)
    for d in differences:
        # the measures that do not decide get their verdict on their own (unadjusted), said as such
        rest = [(c, a, b, m.better, (STEADIER, LESS_STEADY)) for m in MEASURES if not m.decides
                for c, a, b in [d.comparisons[m.key]]]
        for item in rest:
            stats.decide_each([item], min_effect_pct)
        shown = {k: d.comparisons[k][0].verdict for k in DECIDING}
        better = [k for k, v in shown.items() if v == STEADIER]
        worse = [k for k, v in shown.items() if v == LESS_STEADY]
        if better and not worse:
            d.verdict = STEADIER
        elif worse and not better:
            d.verdict = LESS_STEADY
        elif better and worse:
            d.note = f"mixed: steadier by {', '.join(better)}, less steady by {', '.join(worse)}"
        elif not any(d.comparisons[k][0].ratio is not None for k in DECIDING):
            d.note = "no stability profile to compare"


def to_json(d: Difference) -> dict[str, Any]:
    measures = {}
    for m in MEASURES:
        c, a, b = d.comparisons[m.key]
        measures[m.key] = {"ratio": _round(c.ratio, 4), "ratio_ci": [_round(c.ratio_ci[0], 4), _round(c.ratio_ci[1], 4)]
                           if c.ratio_ci else None, "p_value": _round(c.p, 4), "p_adjusted": _round(c.p_adjusted, 4),
                           "verdict": c.verdict, "decides": m.decides, "n_baseline": len(a), "n_variant": len(b),
                           "repeats_needed": c.repeats_needed, "note": c.note or None}
    needed = [n for k in DECIDING for n in [d.comparisons[k][0].repeats_needed] if n]
    return {"verdict": d.verdict, "test": TEST_NAME, "decided_by": list(DECIDING), "note": d.note or None,
            "repeats_needed": min(needed) if needed and d.verdict == NONE else None, "measures": measures}


def causes_why(base: dict[str, dict[str, float]] | None, variant: dict[str, dict[str, float]] | None,
               top: int = 5) -> list[dict[str, Any]]:
    """The dips and transactions lost per leading cause on each side (per run), ranked by what changed most:
    the transactions lost, then the dips, then the seconds."""
    if base is None and variant is None:
        return []
    zero = {"dips": 0.0, "seconds": 0.0, "lost_transactions": 0.0}
    rows = []
    for c in sorted({*(base or {}), *(variant or {})}):
        a, b = (base or {}).get(c, zero), (variant or {}).get(c, zero)
        key = tuple(abs(float(b.get(k, 0)) - float(a.get(k, 0))) for k in ("lost_transactions", "dips", "seconds"))
        if not any(key):
            continue
        rows.append((key, {"cause": c, "baseline": dict(a), "variant": dict(b)}))
    rows.sort(key=lambda r: tuple(-x for x in r[0]))
    return [r for _, r in rows[:top]]


def causes_sentence(rows: Sequence[dict[str, Any]], limit: int = 3) -> str:
    """"checkpoint: 11 dips and 9,200 tx lost per run → 1 dip and 300 tx"."""
    def side(s: dict[str, float]) -> str:
        dips = s.get("dips", 0)
        return f"{dips:,.3g} dip{'' if dips == 1 else 's'} and {s.get('lost_transactions', 0):,.0f} tx"

    return "; ".join(f"{r['cause']}: {side(r['baseline'])} lost per run → {side(r['variant'])}" for r in rows[:limit])
