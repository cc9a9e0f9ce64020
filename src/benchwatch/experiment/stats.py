"""The statistics of an experiment: how sure each figure is.

Per cell: the median of the per-run figures with a 95 % interval (Student's t on the logs, the interval of the
geometric mean: a bootstrap is degenerate at n = 3, and an order-statistics interval of the median needs n >= 6). Per
variant against the baseline: Welch's t-test on the logs of the per-run figures (unequal variances; noise
in TPS is a share of it), the ratio of the geometric means with its interval, p-values adjusted by
Holm across every comparison of the report, and a verdict that ignores a change smaller than
--min-effect. Where no difference is shown: the repeats per variant that would show the observed
change (80 % power at the adjusted level, noncentral t). The distributions and the test are
:mod:`benchwatch.util.stattools`' (scipy.stats' figures, bit for bit, without its seconds of import).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from benchwatch.util import stattools

CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.80
MAX_REPEATS = 1000

TEST_NAME = "Welch's t-test on the logs of per-run values (unequal variances, two-sided), Holm-adjusted across the report"
INTERVAL_NAME = "95 % Student's t interval of the geometric mean (on the logs), beside the median"
RATIO_INTERVAL_NAME = "95 % interval of the ratio of geometric means (Welch's t on the logs)"


def median_ci(values: Sequence[float]) -> tuple[float | None, tuple[float, float] | None]:
    """(median, 95 % interval) of per-run values; no interval below n = 2. The interval is Student's t on the
    logs (of the geometric mean), as the test is: never below zero, wider above than below, as TPS spreads
    on a busy host."""
    xs = [float(v) for v in values]
    if not xs:
        return None, None
    med = statistics.median(xs)
    if len(xs) < 2 or min(xs) <= 0:
        return med, None
    logs = [math.log(x) for x in xs]
    centre = statistics.fmean(logs)
    half = stattools.t_ppf(0.5 + CONFIDENCE / 2, len(xs) - 1) * statistics.stdev(logs) / math.sqrt(len(xs))
    return med, (math.exp(centre - half), math.exp(centre + half))


@dataclass
class Comparison:
    ratio: float | None                      # geometric mean(variant) / geometric mean(baseline)
    ratio_ci: tuple[float, float] | None
    p: float | None                          # Welch's t, two-sided, before adjustment
    p_adjusted: float | None = None
    verdict: str = "no difference shown"
    direction: int = 0                       # +1 the variant's values are higher, -1 lower
    repeats_needed: int | None = None
    note: str = ""


def compare(baseline: Sequence[float], variant: Sequence[float]) -> Comparison:
    """The variant's per-run values against the baseline's (before the multiple-comparison adjustment), on a
    log scale: run-to-run noise in TPS is a share of it (a busy host takes a fraction away), so the test is on
    the logs, and the ratio is that of the geometric means, its interval the exponential of Welch's."""
    a, b = [float(x) for x in baseline], [float(x) for x in variant]
    if not a or not b:
        return Comparison(None, None, None, note="no run")
    if min(a) <= 0 or min(b) <= 0:
        return Comparison(None, None, None, note="a run with a value of zero")
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    ratio = math.exp(statistics.fmean(lb) - statistics.fmean(la))
    if len(a) < 2 or len(b) < 2:
        return Comparison(ratio, None, None, note="n < 2: no test")
    va, vb = statistics.variance(la), statistics.variance(lb)
    if va == 0 and vb == 0:
        return Comparison(ratio, (ratio, ratio), 0.0 if ratio != 1 else 1.0, note="no spread at all")
    p = stattools.welch_ttest(lb, la).pvalue
    ga, gb = va / len(a), vb / len(b)
    df = (ga + gb) ** 2 / ((ga * ga / (len(a) - 1)) + (gb * gb / (len(b) - 1)))
    half = stattools.t_ppf(0.5 + CONFIDENCE / 2, df) * math.sqrt(ga + gb)
    return Comparison(ratio, (ratio * math.exp(-half), ratio * math.exp(half)), p)


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of p-values (None stays None); controls the family-wise error rate."""
    known = sorted((p, i) for i, p in enumerate(ps) if p is not None and not math.isnan(p))
    out: list[float | None] = [None] * len(ps)
    m = len(known)
    running = 0.0
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def repeats_needed(baseline: Sequence[float], variant: Sequence[float], alpha: float) -> int | None:
    """Runs per variant for a two-sided t-test at ``alpha`` to show the observed difference of means with
    80 % power (the observed spread taken as the truth); None when there is no spread or no difference."""
    if len(baseline) < 2 or len(variant) < 2 or min([*baseline, *variant]) <= 0:
        return None
    a, b = [math.log(x) for x in baseline], [math.log(x) for x in variant]
    diff = abs(statistics.fmean(b) - statistics.fmean(a))
    sd = math.sqrt((statistics.variance(a) + statistics.variance(b)) / 2)
    if diff == 0 or sd == 0:
        return None
    d = diff / sd
    for n in range(2, MAX_REPEATS + 1):
        df = 2 * n - 2
        crit = stattools.t_ppf(1 - alpha / 2, df)
        nc = d * math.sqrt(n / 2)
        power = stattools.nct_sf(crit, df, nc) + stattools.nct_cdf(-crit, df, nc)
        if power >= POWER:
            return n
    return None


def decide(comparisons: list[tuple[Comparison, Sequence[float], Sequence[float]]], min_effect_pct: float,
           better: int, words: tuple[str, str]) -> None:
    """Adjust the p-values of every comparison together (Holm) and give each its verdict: ``words[0]`` when the
    variant is better (``better`` +1: higher values are better, -1: lower), ``words[1]`` when worse, else
    "no difference shown" with the repeats that would show the observed change."""
    decide_each([(c, a, b, better, words) for c, a, b in comparisons], min_effect_pct)


def decide_each(comparisons: Sequence[tuple[Comparison, Sequence[float], Sequence[float], int, tuple[str, str]]],
                min_effect_pct: float) -> None:
    """:func:`decide` for comparisons of measures that differ in which way is better (one family: Holm across
    all of them)."""
    adjusted = holm([c.p for c, *_ in comparisons])
    m = max(1, sum(1 for c, *_ in comparisons if c.p is not None))
    for (c, a, b, better, words), p in zip(comparisons, adjusted):
        c.p_adjusted = p
        if c.ratio is None:
            continue
        c.direction = 1 if c.ratio > 1 else -1 if c.ratio < 1 else 0
        big_enough = abs(c.ratio - 1) * 100 >= min_effect_pct
        excludes_one = c.ratio_ci is not None and (c.ratio_ci[0] > 1 or c.ratio_ci[1] < 1)
        if p is not None and p < ALPHA and big_enough and excludes_one:
            c.verdict = words[0] if c.direction == better else words[1]
            continue
        c.verdict = "no difference shown"
        if not big_enough:
            c.note = c.note or f"the change is below --min-effect ({min_effect_pct:g} %)"
        else:
            c.repeats_needed = repeats_needed(a, b, ALPHA / m)
