"""Dips in a TPS curve: stretches well below the run's own steady level.

Input is one sample per progress line, (ms, tps), as the run model writes them:
at pgbench's own time, catch-up lines of old pgbench 1 ms apart, the
exporter's stall zeros once per interval. Each line covers the time since the
previous one, so a catch-up burst adds no time and a stall is counted once.

The steady level at a line is the median TPS of the lines within
``WINDOW_S / 2`` on either side (only the past when the run is still going),
computed twice: the second time without the lines the first pass found low,
so a long dip does not pull its own reference down.

That rolling level follows a fall that lasts: once most of its window is low,
low is the median (and a run shorter than the window has one median). So
wherever the rolling level is below MILD of the highest level the run held
before (the lower median of the HELD_LINES or more full lines of the
``WINDOW_S / 2`` up to a line), lines are held against that level instead: a
collapse that does not come back, a slow slide, a stall longer than half the
window is one long dip against the level before it (``Dip.lasting``). A run
slower from its start has no higher level before; a ramp-up rises to its level.
Ramp-up and wind-down are judged against the rolling level, so the end of a
collapsed run is its dip, not its wind-down.

A line is low only when its transactions fall short of the level by more than
counting noise (NOISE_Z standard deviations of a Poisson count): at 3 TPS a
line of 2 is how the count falls, not a dip.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

DEEP = 0.5   # below this share of the steady level: a deep dip, even for one line
MILD = 0.8   # below this share: a mild dip, if it lasts MIN_MILD_INTERVALS
MIN_MILD_INTERVALS = 2
WINDOW_S = 60.0
MIN_LINES = 5  # fewer lines than this: no steady level to speak of
# A line's transactions must fall short of the level's by this many standard deviations of a Poisson count
# of that level (sqrt of the transactions expected in the interval): only runs under ~150 TPS feel it; a
# closed-loop client whose transaction outlasts an interval prints 0 lines at a few TPS.
NOISE_Z = 2.5
# Full lines that make a level the run held (the lower median of the WINDOW_S / 2 before a line).
HELD_LINES = 2 * MIN_LINES


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
    lasting: bool = False  # held against the level before a fall the rolling level followed (a level shift)

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def to_json(self) -> dict:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


@dataclass(slots=True)  # 21,600 of them in a 12-hour run, each read several times
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


def _usable(tps_full: list[float | None], skip: set[int]) -> list[float | None]:
    """The TPS of the full lines (None for the others), the lines in ``skip`` left out too."""
    return [None if j in skip else v for j, v in enumerate(tps_full)] if skip else tps_full


def _baselines(points: list[_Point], usable: list[float | None], window_s: float) -> list[float | None]:
    # A sorted window slid along the run, each line put in and taken out once (``usable``: the TPS of the
    # lines that count, None for the others): a 12-hour run of 21,600 lines takes milliseconds, not the half
    # second of sorting every window anew.
    from bisect import bisect_left, insort  # beside its one use

    half = window_s / 2
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


def below(tps: float, covered: float, level: float | None, interval_s: float) -> bool:
    """A line at ``tps`` over ``covered`` seconds is low against ``level``: under MILD of it, and short of it by
    more than counting noise (a catch-up line covering no time is judged as an interval's)."""
    if not level or tps >= MILD * level:
        return False
    expected = level * max(covered, interval_s)
    return (level - tps) * max(covered, interval_s) >= NOISE_Z * math.sqrt(expected)


def detect(samples: list[tuple[int, float]], interval_s: float = 1.0, *, ongoing: bool = False,
           window_s: float = WINDOW_S, level_before: float | None = None) -> list[Dip]:
    """The dips of a run's TPS samples. ``ongoing``: the run goes on after the last sample,
    so a low stretch at the end is a dip under way, not the wind-down. ``level_before``: the
    steady level of the run before the first sample (a live pass that sees only the end of a
    long run), held like the level before a fall."""
    points = _points(samples, interval_s)
    full = [is_full(p.covered, interval_s) for p in points]  # once: every pass below asks
    if sum(full) < MIN_LINES:
        return []
    tps_full = [p.tps if f else None for p, f in zip(points, full, strict=True)]

    def low_against(levels: list[float | None], i: int) -> bool:
        return below(points[i].tps, points[i].covered, levels[i], interval_s)

    first_pass = _baselines(points, tps_full, window_s)
    low = {i for i in range(len(points)) if low_against(first_pass, i)}
    kept = _usable(tps_full, low)
    # Too few lines left around a point without the low ones: keep the first pass's level there.
    base = [b if b is not None else a for a, b in zip(first_pass, _baselines(points, kept, window_s))]
    base = [b if b is not None else _nearest(base, i) for i, b in enumerate(base)]
    level, held = _held(base, _levels_before(points, kept, window_s), level_before)

    def is_low(i: int) -> bool:
        return low_against(level, i)

    # Ramp-up and wind-down against the rolling level: a collapsed run's last lines are at their own level.
    steady = [i for i in range(len(points)) if full[i] and not low_against(base, i)]
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
        while j + 1 < end_at and (is_low(j + 1) or not full[j + 1]):
            j += 1
        while j > i and not is_low(j):  # a trailing catch-up line that was not low
            j -= 1
        dip = _dip(points[i:j + 1], level[i:j + 1], interval_s, ongoing and j == len(points) - 1)
        dip.lasting = any(held[i:j + 1])
        dips.append(dip)
        i = j + 1
    return [d for d in dips if d.level == "deep" or d.seconds >= MIN_MILD_INTERVALS * interval_s - 1e-6]


def _levels_before(points: list[_Point], usable: list[float | None], window_s: float) -> list[float | None]:
    """The level the run held up to each line: the lower median of the full lines of the WINDOW_S / 2 before it
    (that one included, the first pass's low lines left out), once there are HELD_LINES of them. The lower
    median: a burst of half the lines or less does not make a level (nor does a run too short for the
    rolling window hide one)."""
    # The same sorted window as _baselines', slid along the run (the lower median is window[(m - 1) // 2]):
    # sorting every half window anew made a 12-hour run's profile cost most of a second.
    from bisect import bisect_left, insort  # beside its one use

    window: list[float] = []
    out: list[float | None] = []
    lo = 0
    for i, p in enumerate(points):
        if (v := usable[i]) is not None:
            insort(window, v)
        # Line i itself is never past the window's start, so lo stays at or before it.
        while points[lo].t < p.t - window_s / 2:
            if (v := usable[lo]) is not None:
                del window[bisect_left(window, v)]
            lo += 1
        m = len(window)
        out.append(window[(m - 1) // 2] if m >= HELD_LINES else None)
    return out


def _held(base: list[float | None], before: list[float | None],
          given: float | None) -> tuple[list[float | None], list[bool]]:
    """The level each line is held against: its rolling level, or the highest level the run held before it
    where the rolling level is below MILD of that (it followed a fall that lasts); and where it was held so."""
    level: list[float | None] = []
    held: list[bool] = []
    top = given
    for b, h in zip(base, before):
        if h is not None and (top is None or h > top):
            top = h
        fell = b is not None and top is not None and b < MILD * top
        level.append(top if fell else b)
        held.append(fell)
    return level, held


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
