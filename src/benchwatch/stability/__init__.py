"""How steady a run was: its stability profile, from its own per-interval TPS (and latency tail).

Pure over the run's progress samples, as the run model writes them and explain reads them: one
``(ms, tps)`` per progress line, at the tool's own time. The profile is summary.json's ``"stability"``
object (``version`` 2; :data:`benchwatch.record.outcome.STABILITY_MEASURES` names the measures a
history or a report compares, each with the way that is steadier).

The steady part of a run, found the same way for every run (so two variants are weighed alike):

- **warm-up**: the leading progress lines before per-interval TPS first reaches :data:`REACH`
  (90 %) of the median of all the run's full lines, at most :data:`WARMUP_CAP` (20 %) of them;
- **wind-down**: the trailing lines after TPS last reaches that level, at most :data:`WINDDOWN_CAP`
  (5 %) of them (the tool's last, often partial, interval);
- what is left is the steady part. Catch-up lines (an old pgbench's burst after a stall, covering
  under half an interval) add no interval of their own; their time is the stall's.

Dips come from explain's detector (:func:`benchwatch.explain.dips.detect`) over the whole run (so the
steady level around a dip near the edges is right), counted where they overlap the steady part,
their seconds and lost transactions in proportion to that overlap. A stall is time without a
transaction: a full interval at 0 TPS, or the time a line covers beyond one interval when it came
more than 1.5 intervals after the previous one (the tool printed nothing meanwhile).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchwatch.explain import dips as _dips
from benchwatch.explain.ending import NO_CAUSE
from benchwatch.model.histogram import histogram_quantile
from benchwatch.record.outcome import STABILITY_MEASURES

__all__ = [
    "MEASURES",
    "MIN_INTERVALS",
    "REACH",
    "WARMUP_CAP",
    "WINDDOWN_CAP",
    "LatencyTail",
    "by_cause",
    "latency_from_buckets",
    "measure",
    "profile",
    "steadier",
]

MEASURES: Mapping[str, tuple[str, int]] = STABILITY_MEASURES
"""name -> (key in the ``stability`` object, +1 higher is steadier / -1 lower is steadier)."""

REACH = 0.9          # the warm-up ends at the first line at this share of the run's median TPS
WARMUP_CAP = 0.2     # ... excluding at most this share of the run's lines
WINDDOWN_CAP = 0.05  # the wind-down: trailing lines below REACH, at most this share of the lines
STALL_GAP = 1.5      # a line later than this many intervals after the previous one: the time between, a stall
MIN_INTERVALS = 5    # fewer steady intervals than this: no profile to speak of (the measures are None)
CAUSE_SOURCE = "explain over the archived series"

Detector = Callable[[list[tuple[int, float]], float], list[_dips.Dip]]


@dataclass(frozen=True)
class LatencyTail:
    """The latency tail of a run, where a per-transaction log or the tool's histogram gives it."""
    p99_s: float | None
    p999_s: float | None
    max_s: float | None
    source: str


def latency_from_buckets(buckets: Iterable[tuple[float, float]], source: str,
                         max_s: float | None = None) -> LatencyTail | None:
    """The tail from cumulative ``(le, count)`` buckets (the +Inf one included), as Prometheus'
    histogram_quantile reads them; ``max_s``: the exact maximum when the source has one."""
    pairs = sorted(buckets)
    if not pairs:
        return None
    p99, p999 = histogram_quantile(0.99, pairs), histogram_quantile(0.999, pairs)
    if p99 is None and p999 is None and max_s is None:
        return None
    return LatencyTail(p99, p999, max_s, source)


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), of a sorted list."""
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _ratio(value: float, median: float) -> float | None:
    return round(value / median, 4) if median > 0 else None


def _empty(why: str, interval_s: float) -> dict[str, Any]:
    return {"warmup_s": None, "warmup": why, "interval_s": interval_s, "intervals": 0,
            "steady_from": None, "steady_to": None,
            "tps_median": None, "tps_cov": None, "tps_p1_ratio": None, "tps_p5_ratio": None, "tps_min_ratio": None,
            "dips": None, "dip_seconds": None, "stall_seconds": None, "lost_transactions": None, "lost_share": None,
            "dips_by_cause": None, "dips_by_cause_source": None,
            "latency_p99_s": None, "latency_p999_s": None, "latency_max_s": None, "latency_source": None}


def profile(samples: Sequence[tuple[int, float]], interval_s: float, *, latency: LatencyTail | None = None,
            detect: Detector = _dips.detect) -> dict[str, Any]:
    """summary.json's ``"stability"`` object for a run's progress TPS samples ``(ms, tps)`` reported every
    ``interval_s`` seconds. JSON-ready; every measure None when the run has fewer than MIN_INTERVALS steady
    intervals (``warmup`` then says why). ``dips_by_cause`` stays None: it needs explain over the run's
    archived series (:func:`by_cause`)."""
    interval_s = float(interval_s) if interval_s and interval_s > 0 else 1.0
    # (end of the interval, Unix s; tps; seconds covered): each line covers the time since the previous one
    # (explain.dips.covered_s, written out here: a 12-hour run has 21,600 lines), the first an interval.
    clean = [(ts, tps) for ts, tps in samples if 0 <= tps < math.inf]  # not NaN (a staleness marker)
    points: list[tuple[float, float, float]] = []
    prev: int | None = None
    for ts, tps in clean:
        points.append((ts / 1000, float(tps), interval_s if prev is None else max(0.0, (ts - prev) / 1000)))
        prev = ts
    interval_s = _cadence(points, interval_s)
    out = _empty("", interval_s)
    if latency is not None:
        out.update(latency_p99_s=latency.p99_s, latency_p999_s=latency.p999_s, latency_max_s=latency.max_s,
                   latency_source=latency.source)
    half_interval = 0.5 * interval_s  # a line covering less is a catch-up line (explain.dips.is_full)
    full = [i for i, p in enumerate(points) if p[2] >= half_interval]
    if len(full) < MIN_INTERVALS:
        out["warmup"] = f"too few progress lines ({len(full)} full intervals; a profile needs {MIN_INTERVALS})"
        return out
    run_median = statistics.median(points[i][1] for i in full)
    level = REACH * run_median
    cap_head = int(WARMUP_CAP * len(full))
    cap_tail = int(WINDDOWN_CAP * len(full))
    head = next((k for k, i in enumerate(full) if points[i][1] >= level), len(full))
    tail = next((k for k, i in enumerate(reversed(full)) if points[i][1] >= level), len(full))
    head, tail = min(head, cap_head), min(tail, cap_tail)
    steady_idx = full[head:len(full) - tail]
    if len(steady_idx) < MIN_INTERVALS:
        out["warmup"] = f"too few steady intervals ({len(steady_idx)}; a profile needs {MIN_INTERVALS})"
        return out
    first, last = steady_idx[0], steady_idx[-1]
    steady_from = points[first][0] - points[first][2]
    steady_to = points[last][0]
    run_from = points[0][0] - points[0][2]
    out["warmup_s"] = round(steady_from - run_from, 3)
    out["warmup"] = (f"{head} progress line(s) before TPS first reached {REACH:.0%} of the run's median "
                     f"({run_median:.6g}), at most {WARMUP_CAP:.0%} of the lines; {tail} trailing line(s) after it "
                     f"last did, at most {WINDDOWN_CAP:.0%}, left out as the wind-down")
    out["steady_from"], out["steady_to"] = round(steady_from, 3), round(steady_to, 3)

    values = sorted(points[i][1] for i in steady_idx)
    median = statistics.median(values)
    mean = statistics.fmean(values)
    out["intervals"] = len(values)
    out["tps_median"] = round(median, 3)
    # statistics.pstdev's exact fractions cost a 12-hour run's profile a quarter of its time; fsum keeps the
    # float sum exact, and the CoV kept (4 decimals) is the same.
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    out["tps_cov"] = round(spread / mean, 4) if mean > 0 else None
    out["tps_p1_ratio"] = _ratio(_percentile(values, 0.01), median)
    out["tps_p5_ratio"] = _ratio(_percentile(values, 0.05), median)
    out["tps_min_ratio"] = _ratio(values[0], median)

    # The steady part's lines, catch-up ones too: their transactions are done, their time is the stall's.
    done = stall = 0.0
    late = STALL_GAP * interval_s
    for _end, tps, covered in points[first:last + 1]:
        done += tps * covered
        if covered > late:
            stall += covered - interval_s
        if tps == 0 and covered >= half_interval:
            stall += min(covered, interval_s)
    found = detect(clean, interval_s)
    count, seconds, lost = 0, 0.0, 0.0
    for d in found:
        share = _overlap(d.start, d.end, steady_from, steady_to)
        if share is None:
            continue
        count += 1
        seconds += d.seconds * share
        lost += d.lost_transactions * share
    out["dips"] = count
    out["dip_seconds"] = round(seconds, 3)
    out["stall_seconds"] = round(stall, 3)
    out["lost_transactions"] = round(lost, 1)
    out["lost_share"] = round(lost / (lost + done), 6) if lost + done > 0 else None
    return out


def _cadence(points: list[tuple[float, float, float]], stated_s: float) -> float:
    """The interval the lines actually came at: the median time between consecutive lines (catch-up lines
    aside), which a run's first two lines (where a stated interval may come from) do not always show."""
    gaps = sorted(p[2] for p in points[1:] if p[2] >= 0.25 * stated_s)
    return round(statistics.median(gaps), 3) if len(gaps) >= MIN_INTERVALS else stated_s


def _overlap(start: float, end: float, lo: float, hi: float) -> float | None:
    """The share of [start, end] inside [lo, hi]; None when they do not meet (a point dip inside: 1)."""
    if end < lo or start > hi:
        return None
    if end <= start:
        return 1.0
    return max(0.0, min(end, hi) - max(start, lo)) / (end - start)


def by_cause(explained: Iterable[Mapping[str, Any]], stability: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``dips_by_cause`` from explain's dips (each with ``cause``, ``start``, ``end``, ``seconds``,
    ``lost_transactions``; explain's report's ``"dips"``), counted like :func:`profile` counts them:
    where they overlap the steady part. A dip whose cause explain could not name is ``"unexplained"``."""
    lo, hi = stability.get("steady_from"), stability.get("steady_to")
    out: dict[str, dict[str, float]] = {}
    if lo is None or hi is None:
        return out
    for d in explained:
        share = _overlap(float(d["start"]), float(d["end"]), float(lo), float(hi))
        if share is None:
            continue
        cause = str(d.get("cause") or "")
        cause = cause if cause and cause != NO_CAUSE else "unexplained"
        row = out.setdefault(cause, {"dips": 0, "seconds": 0.0, "lost_transactions": 0.0})
        row["dips"] += 1
        row["seconds"] = round(row["seconds"] + float(d.get("seconds") or 0.0) * share, 3)
        row["lost_transactions"] = round(row["lost_transactions"] + float(d.get("lost_transactions") or 0.0) * share, 1)
    return dict(sorted(out.items(), key=lambda kv: (-kv[1]["lost_transactions"], kv[0])))


def measure(stability: Mapping[str, Any] | None, name: str) -> float | None:
    """One measure (a :data:`MEASURES` name) of a ``stability`` object; None when absent or not a number."""
    if not stability:
        return None
    value = stability.get(MEASURES[name][0])
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def steadier(name: str, a: float | None, b: float | None) -> int:
    """Which of two values of a measure is steadier: -1 ``a``, +1 ``b``, 0 equal or not comparable."""
    if a is None or b is None or a == b:
        return 0
    direction = MEASURES[name][1]
    return -1 if (a - b) * direction > 0 else 1
