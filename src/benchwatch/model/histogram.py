"""The latency bucket ladder every latency histogram of benchwatch uses (pgbench's per-transaction
log, sysbench's --histogram), so histograms of different tools compare bucket for bucket."""

from __future__ import annotations

import math


def _ladder() -> tuple[float, ...]:
    steps = (100, 125, 150, 200, 250, 300, 400, 500, 600, 800)  # x 10^k microseconds
    us = [m * 10**k for k in range(5) for m in steps] + [10_000_000]
    return tuple(u / 1e6 for u in us)


DEFAULT_BUCKETS: tuple[float, ...] = _ladder()
"""Upper bounds in seconds: 0.1 ms to 10 s, ten per decade (1, 1.25, 1.5, 2,
2.5, 3, 4, 5, 6, 8 x 10^k), 51 bounds plus ``+Inf``.

Why this ladder: ``histogram_quantile`` interpolates linearly inside the
bucket holding the quantile, so its error is bounded by that bucket's width.
Consecutive bounds differ by a factor of at most 4/3 (1.2 to 1.33), so an
estimated percentile is always inside the bucket of the exact one, at most 33 %
(typically under 10 %) away from it, at every scale from 0.1 ms to 10 s.  That
is as fine as a per-second p99 read from a few thousand transactions needs,
at 52 bucket series per run.  The bounds are round numbers of microseconds, the unit
of the log, so comparisons are exact integer ones.  Latencies under 0.1 ms
fall in the first bucket, over 10 s in ``+Inf``."""


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (le, count) buckets: linear within a bucket,
    the lower bound of the first bucket is 0, a quantile in the +Inf bucket is the last finite bound."""
    buckets = sorted(buckets)
    if not buckets or not math.isinf(buckets[-1][0]):
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for i, (le, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(le):
                return buckets[-2][0] if len(buckets) > 1 else None
            if i == 0 and le <= 0:
                return le
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return None
