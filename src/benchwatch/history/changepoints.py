"""Where a series of per-run figures steps, by how much, and how sure that is.

Method (chosen against Apache Otava on the same series: docs/history.md says why and with what):

- **Where**: binary segmentation (ruptures' ``Binseg``, cost ``l2`` on the ranks of the values) proposes
  the best split of a stretch of runs, each side at least :data:`MIN_RUNS` runs long.
- **Whether**: a permutation test (as ``scipy.stats.permutation_test``'s) of that stretch: the statistic is the
  best split's gain over every split, so the test pays for having chosen the split (a split picked as the
  best of 40 is always "significant" by a plain two-sample test). Ranks make one wild run count as one
  lowest value, not as -30 %: a single noisy night is no change point. Significant at :data:`ALPHA`, the
  stretch is split and each side searched again (E-divisive's recursion, Matteson and James 2014).
- **Kept**: once no stretch splits further, each change point is tested again between its neighbours
  (Otava's merge step): the weakest that is no longer significant is dropped, until all are.
- **How much**: the step in percent of the mean before it (the runs since the previous change point
  against those up to the next one) with a 95 % bootstrap interval (percentile, as ``scipy.stats.bootstrap``'s).

Every random draw comes from a generator seeded with :data:`SEED`: the same runs give the same answer. The
search, the tests and the interval are :mod:`benchwatch.util.stattools`' (what ruptures and scipy.stats compute,
bit for bit, without their seconds of import).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchwatch.util import stattools

MIN_RUNS = 3            # runs on each side of a change point at the least
ALPHA = 0.005           # significance of a split (permutation p-value)
PERMUTATIONS = 1999     # resamples of each permutation test (p-values from 0.0005)
SCREEN, SCREEN_STOP = 199, 0.05  # resamples of the first look, and the p-value above which it is final
BOOTSTRAP = 2000        # resamples of the step's confidence interval
CONFIDENCE = 0.95
WINDOW = 40             # runs in each window searched (half overlapping), and tested either side of a cut
SEED = 20261124         # fixed: the same runs give the same change points and intervals


@dataclass(frozen=True)
class ChangePoint:
    index: int                       # 0-based place in the series of the first run after the change
    step_pct: float                  # mean after / mean before - 1, in percent
    step_ci: tuple[float, float]     # its CONFIDENCE interval, in percent
    p_value: float                   # the permutation test of the split between its neighbours
    mean_before: float
    mean_after: float


def _best_gain(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The l2 cost reduction of the best split of ``x`` along ``axis`` into two parts of MIN_RUNS runs or more:
    max over k of k(n-k)/n (mean of the first k - mean of the rest)^2. What Binseg maximises, vectorised."""
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    n = x.shape[-1]
    k = np.arange(MIN_RUNS, n - MIN_RUNS + 1)
    if k.size == 0:
        return np.zeros(x.shape[:-1])
    csum = np.cumsum(x, axis=-1)
    total = csum[..., -1:]
    left = csum[..., k - 1] / k
    right = (total - csum[..., k - 1]) / (n - k)
    gain = k * (n - k) / n * (left - right) ** 2
    return np.asarray(gain.max(axis=-1))


def _split(values: np.ndarray) -> tuple[int, float] | None:
    """The best split of a stretch (index inside it) and its permutation p-value; None when too short."""
    n = len(values)
    if n < 2 * MIN_RUNS:
        return None
    ranks = stattools.rankdata(values)
    p = _p_value(ranks)
    return (_locate(ranks, 0, n) if p < ALPHA else -1), p  # located only when it is a step (it costs more)


def _p_value(ranks: np.ndarray, at: int | None = None) -> float:
    """Permutation p-value of a split of this stretch (its ranks in their order): of its best split, or of
    the split before index ``at``, against the best split's gain of each permuted order."""
    n = len(ranks)
    observed = None if at is None else at * (n - at) / n * (ranks[:at].mean() - ranks[at:].mean()) ** 2
    p = 1.0
    # A few resamples first: a stretch that is plainly no step (most of a long history's windows) stops
    # there; only a likely step pays for PERMUTATIONS (a sequential Monte Carlo test, Besag and Clifford 1991).
    for resamples in (SCREEN, PERMUTATIONS):
        # One sample, 'pairings': each resample permutes the runs' order and the split is chosen afresh.
        res = stattools.permutation_test_pairings((ranks,), _best_gain, n_resamples=resamples, alternative="greater",
                                                  rng=np.random.default_rng(SEED),
                                                  batch=max(1, 2_000_000 // max(n, 1)))  # memory bound for long stretches
        if observed is None:
            p = float(res.pvalue)
        else:
            null = np.asarray(res.null_distribution)
            p = float((1 + np.count_nonzero(null >= observed * (1 - 1e-12))) / (1 + null.size))
        if p > SCREEN_STOP:
            break
    return p


def percent_step(before: np.ndarray | float, after: np.ndarray | float) -> np.ndarray:
    """after / before - 1, in percent; from a mean of 0 (a run history's stall seconds, its dips: figures
    whose steady value is none at all) a step up is +100 % and none is 0 %, so it compares with a threshold."""
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b == 0, np.sign(a) * 100.0, (a / np.where(b == 0, 1.0, b) - 1.0) * 100.0)
    return ratio


def _step(before: np.ndarray, after: np.ndarray) -> tuple[float, tuple[float, float]]:
    def pct(b: np.ndarray, a: np.ndarray, axis: int = -1) -> np.ndarray:
        return percent_step(np.mean(b, axis=axis), np.mean(a, axis=axis))

    step = float(pct(before, after))
    return step, stattools.bootstrap_percentile((before, after), pct, n_resamples=BOOTSTRAP,
                                                confidence_level=CONFIDENCE, rng=np.random.default_rng(SEED))


def step_interval(before: np.ndarray, after: np.ndarray) -> tuple[float, tuple[float, float]]:
    """The step from ``before`` to ``after`` in percent of the mean with its 95 % bootstrap interval, as a change
    point's (history --fail-on-regression's latest runs against those before them)."""
    return _step(np.asarray(before, dtype=float), np.asarray(after, dtype=float))


def _locate(x: np.ndarray, lo: int, hi: int) -> int:
    """The best split of the values ``x[lo:hi]`` (ruptures' binary segmentation, l2 cost, one change point)."""
    return lo + stattools.best_l2_split(x[lo:hi], MIN_RUNS)


def detect(series: list[float] | np.ndarray) -> list[ChangePoint]:
    """The change points of a series of per-run figures, in order."""
    x = np.asarray(series, dtype=float)
    n = len(x)
    found: set[int] = set()
    # Windows of WINDOW runs, half overlapping (the whole series when shorter), each split recursively:
    # every run sits at least WINDOW/4 runs from the edge of some window, and a dip that comes back (a step
    # down, then up again) is a single step in a window where it would not split the whole well.
    half = WINDOW // 2
    stretches = [(s, min(s + WINDOW, n)) for s in range(0, max(n - half, 1), half)]
    while stretches:
        start, end = stretches.pop()
        got = _split(x[start:end])
        if got is None or got[1] >= ALPHA:
            continue
        cut = start + got[0]
        found.add(cut)
        stretches += [(start, cut), (cut, end)]
    cuts = sorted(found)
    tested: dict[tuple[int, int, int], float] = {}

    def p_of(i: int, bounds: list[int]) -> float:
        # Up to WINDOW runs either side of the cut, within its neighbours: a cut with fewer than MIN_RUNS
        # runs to a neighbour (found twice, a run apart) goes first.
        lo, cut, hi = max(bounds[i], cuts[i] - WINDOW), cuts[i], min(bounds[i + 2], cuts[i] + WINDOW)
        if min(cut - bounds[i], bounds[i + 2] - cut) < MIN_RUNS:
            return 1.0
        if (lo, cut, hi) not in tested:
            tested[lo, cut, hi] = _p_value(stattools.rankdata(x[lo:hi]), cut - lo)
        return tested[lo, cut, hi]

    # Merge: each change point tested between its neighbours; the weakest insignificant one goes first.
    while cuts:
        bounds = [0, *cuts, n]
        p = [p_of(i, bounds) for i in range(len(cuts))]
        worst = int(np.argmax(p))
        if p[worst] < ALPHA:
            break
        del cuts[worst]
    # Where exactly: the best split of the values (not their ranks: a step's size pins its place) near the
    # cut, within its neighbours; of their logarithms, since runs differ by ratios: a fast run that fell to
    # 260 TPS among runs of 1,300 stays with them before a step to 45, not with the 45s (a real history did).
    y = np.log(x) if n and np.all(x > 0) else x
    for i in range(len(cuts)):
        lo = max(cuts[i - 1] if i else 0, cuts[i] - WINDOW)
        hi = min(cuts[i + 1] if i + 1 < len(cuts) else n, cuts[i] + WINDOW)
        if hi - lo >= 2 * MIN_RUNS:
            cuts[i] = _locate(y, lo, hi)
    bounds = [0, *cuts, n]
    out = []
    for i, cut in enumerate(cuts):
        before, after = x[bounds[i]:cut], x[cut:bounds[i + 2]]
        step, ci = _step(before, after)
        out.append(ChangePoint(cut, step, ci, p_of(i, bounds), float(before.mean()), float(after.mean())))
    return out
