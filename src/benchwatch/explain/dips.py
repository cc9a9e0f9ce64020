"""Dips in a TPS curve: stretches well below the run's own steady level.

Input is one sample per progress line, (ms, tps), as the run model writes them:
at pgbench's own time, catch-up lines of old pgbench 1 ms apart, the
exporter's stall zeros once per interval. Each line covers the time since the
previous one, so a catch-up burst adds no time and a stall is counted once.

The steady level at a line is the median TPS of the lines within
``WINDOW_S / 2`` on either side (only the past when the run is still going),
computed twice: the second time without the lines the first pass found low,
so a long dip does not pull its own reference down.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

DEEP = 0.5   # below this share of the steady level: a deep dip, even for one line
MILD = 0.8   # below this share: a mild dip, if it lasts MIN_MILD_INTERVALS
MIN_MILD_INTERVALS = 2
WINDOW_S = 60.0
MIN_LINES = 5  # fewer lines than this: no steady level to speak of


@dataclass
class Dip:
    start: float          # Unix seconds: start of the first low interval
    end: float            # Unix seconds: end of the last low interval
    baseline_tps: float   # the steady level around it
    min_tps: float
    depth: float          # 1 - min_tps / baseline_tps
    level: str            # "deep" (< DEEP of the steady level) or "mild"
    lost_transactions: float  # (steady level - TPS) x time, over the dip
    stall: bool           # some interval had no transaction at all
    lines: int
    ongoing: bool = False  # the run was still in it at the last line

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def to_json(self) -> dict:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


@dataclass
class _Point:
    t: float        # end of the interval the line covers, Unix seconds
    tps: float
    covered: float  # seconds since the previous line


def covered_s(prev_ms: int | None, ts_ms: int, interval_s: float) -> float:
    """Seconds a progress line covers: since the previous line; the first line, an interval."""
    return interval_s if prev_ms is None else max(0.0, ts_ms / 1000 - prev_ms / 1000)


def is_full(covered: float, interval_s: float) -> bool:
    """A line that covers about an interval (not a catch-up line of an old pgbench's burst)."""
    return covered >= 0.5 * interval_s


def _points(samples: list[tuple[int, float]], interval_s: float) -> list[_Point]:
    out: list[_Point] = []
    prev = None
    for ts, v in samples:
        if v != v:  # a staleness marker
            continue
        out.append(_Point(ts / 1000, v, covered_s(prev, ts, interval_s)))
        prev = ts
    return out


def _full(p: _Point, interval_s: float) -> bool:
    return is_full(p.covered, interval_s)


def _baselines(points: list[_Point], interval_s: float, skip: set[int], window_s: float) -> list[float | None]:
    # A sorted window slid along the run, each line put in and taken out once (the full lines not skipped):
    # a 12-hour run of 21,600 lines takes milliseconds, not the half second of sorting every window anew.
    from bisect import bisect_left, insort  # beside its one use

    half = window_s / 2
    usable = [p.tps if j not in skip and _full(p, interval_s) else None for j, p in enumerate(points)]
    window: list[float] = []
    out: list[float | None] = []
    lo = hi = 0
    n = len(points)
    for p in points:
        while hi < n and points[hi].t <= p.t + half:
            if (v := usable[hi]) is not None:
                insort(window, v)
            hi += 1
        while lo < n and points[lo].t < p.t - half:
            if (v := usable[lo]) is not None:
                del window[bisect_left(window, v)]
            lo += 1
        m = len(window)
        out.append((window[m // 2] if m % 2 else (window[m // 2 - 1] + window[m // 2]) / 2) if m >= MIN_LINES else None)
    return out


def detect(samples: list[tuple[int, float]], interval_s: float = 1.0, *, ongoing: bool = False,
           window_s: float = WINDOW_S) -> list[Dip]:
    """The dips of a run's TPS samples. ``ongoing``: the run goes on after the last sample,
    so a low stretch at the end is a dip under way, not the wind-down."""
    points = _points(samples, interval_s)
    if sum(1 for p in points if _full(p, interval_s)) < MIN_LINES:
        return []
    first_pass = _baselines(points, interval_s, set(), window_s)
    low = {i for i, (p, b) in enumerate(zip(points, first_pass)) if b and p.tps < MILD * b}
    # Too few lines left around a point without the low ones: keep the first pass's level there.
    base = [b if b is not None else a for a, b in zip(first_pass, _baselines(points, interval_s, low, window_s))]
    base = [b if b is not None else _nearest(base, i) for i, b in enumerate(base)]

    def is_low(i: int) -> bool:
        b = base[i]
        return bool(b) and points[i].tps < MILD * b  # type: ignore[operator]

    steady = [i for i in range(len(points)) if not is_low(i) and _full(points[i], interval_s)]
    if not steady:
        return []
    first, last = steady[0], steady[-1]  # before: ramp-up; after: wind-down
    end_at = len(points) if ongoing else last + 1

    dips: list[Dip] = []
    i = first
    while i < end_at:
        if not is_low(i):
            i += 1
            continue
        j = i
        while j + 1 < end_at and (is_low(j + 1) or not _full(points[j + 1], interval_s)):
            j += 1
        while j > i and not is_low(j):  # a trailing catch-up line that was not low
            j -= 1
        dips.append(_dip(points[i:j + 1], base[i:j + 1], interval_s, ongoing and j == len(points) - 1))
        i = j + 1
    return [d for d in dips if d.level == "deep" or d.seconds >= MIN_MILD_INTERVALS * interval_s - 1e-6]


def _nearest(base: list[float | None], i: int) -> float | None:
    for d in range(1, len(base)):
        for k in (i - d, i + d):
            if 0 <= k < len(base) and base[k] is not None:
                return base[k]
    return None


def _dip(points: list[_Point], base: list, interval_s: float, ongoing: bool) -> Dip:
    baseline = statistics.median(b for b in base if b)
    full = [p for p in points if _full(p, interval_s)] or points
    min_tps = min(p.tps for p in full)
    lost = sum(max(0.0, b - p.tps) * p.covered for p, b in zip(points, base) if b)
    start = points[0].t - points[0].covered
    return Dip(start=round(start, 3), end=round(points[-1].t, 3), baseline_tps=baseline, min_tps=min_tps,
               depth=max(0.0, 1 - min_tps / baseline), level="deep" if min_tps < DEEP * baseline else "mild",
               lost_transactions=round(lost, 1), stall=any(p.tps == 0 and _full(p, interval_s) for p in points),
               lines=len(points), ongoing=ongoing)
