"""The few statistical routines benchwatch uses, without importing ``scipy.stats`` or ``ruptures``.

Importing ``scipy.stats`` costs seconds of wall time on a busy host (``ruptures`` imports it too), and
every ``benchwatch report``, ``history`` and CI gate paid for it at start-up. These functions compute what
the scipy 1.17 and ruptures 1.1.10 functions named in each docstring compute for the arguments benchwatch
gives them, **bit for bit**: the same arithmetic in the same order on the same array shapes (a sum along a
contiguous row is pairwise, down a column it is not, so the shapes matter), and the same draws from the
generator in the same order, so a seeded test gives the same p-value and interval as before.
tests/unit/test_stattools.py compares each with the original on many inputs.

Only numpy is imported here; the distribution functions take ``scipy.special``'s (a small import, and
the same C code ``scipy.stats`` calls) when first used.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Statistic = Callable[..., Any]


# --- Student's t and the noncentral t (scipy.stats.t, scipy.stats.nct) ---------------------------------

def t_ppf(q: float, df: float) -> float:
    """``scipy.stats.t.ppf(q, df)``: the ``q`` quantile of Student's t with ``df`` degrees of freedom."""
    from scipy import special

    if not df > 0 or math.isnan(q):
        return math.nan
    if q == 0:
        return -math.inf
    if q == 1:
        return math.inf
    if not 0 < q < 1:
        return math.nan
    # rv_continuous.ppf scales and shifts by the default scale 1 and location 0: * 1.0 + 0.0 turns a -0.0 to 0.0
    return float(special.stdtrit(np.float64(df), np.float64(q)) * 1.0 + 0.0)


def _nct_valid(x: float, df: float, nc: float) -> bool:
    return df > 0 and nc == nc and not math.isnan(x)


def nct_sf(x: float, df: float, nc: float) -> float:
    """``scipy.stats.nct.sf(x, df, nc)``: the survival function of the noncentral t."""
    from scipy.special import _ufuncs  # the private ufunc scipy.stats.nct._sf calls (boost's), no public name

    if not _nct_valid(x, df, nc):
        return math.nan
    if x == -math.inf:
        return 1.0
    if x == math.inf:
        return 0.0
    with np.errstate(over="ignore"):  # as scipy (its gh-17432)
        return float(np.clip(_ufuncs._nct_sf(np.float64(x), np.float64(df), np.float64(nc)), 0, 1))


def nct_cdf(x: float, df: float, nc: float) -> float:
    """``scipy.stats.nct.cdf(x, df, nc)``: the distribution function of the noncentral t."""
    from scipy import special

    if not _nct_valid(x, df, nc):
        return math.nan
    if x == math.inf:
        return 1.0
    if x == -math.inf:
        return 0.0
    return float(special.nctdtr(np.float64(df), np.float64(nc), np.float64(x)))


@dataclass(frozen=True)
class TTest:
    statistic: float
    pvalue: float
    df: float


def welch_ttest(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> TTest:
    """``scipy.stats.ttest_ind(a, b, equal_var=False)``, two-sided, of two 1-D samples: Welch's t-test."""
    from scipy import special

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("welch_ttest takes two 1-D samples")
    if x.size == 0 or y.size == 0 or np.isnan(x).any() or np.isnan(y).any():
        return TTest(math.nan, math.nan, math.nan)
    n1, n2 = x.size, y.size
    with np.errstate(divide="ignore", invalid="ignore"):
        v1, v2 = _sample_variance(x), _sample_variance(y)
        m1, m2 = np.mean(x), np.mean(y)
        vn1, vn2 = v1 / n1, v2 / n2
        df = (vn1 + vn2) ** 2 / (vn1 ** 2 / (n1 - 1) + vn2 ** 2 / (n2 - 1))
        df = np.where(np.isnan(df), 1.0, df)  # no spread on either side: any df but nan will do (scipy's words)
        t = np.divide(m1 - m2, np.sqrt(vn1 + vn2))
        p = 2 * special.stdtr(np.asarray(df, dtype=t.dtype), -np.abs(t))
    return TTest(float(t), float(p), float(df))


def _sample_variance(x: np.ndarray) -> Any:
    """The variance with n - 1 as scipy.stats' t-tests compute it: the mean square about the mean, times n / (n - 1)."""
    mean = np.mean(x, keepdims=True)
    var = np.mean((x - mean) ** 2)
    n = np.asarray(x.size, dtype=x.dtype)
    return var * (n / (n - 1))


# --- ranks (scipy.stats.rankdata) ------------------------------------------------------------------------

def rankdata(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``scipy.stats.rankdata(values)``: ranks from 1, ties given their average rank, of the values flattened
    (all nan when any value is nan)."""
    x = np.ravel(np.asarray(values))
    if x.size == 0:
        return np.empty(x.shape, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ordinal = np.arange(1, x.size + 1, dtype=np.float64)
    y = x[order]
    first = np.concatenate([np.ones(1, dtype=bool), y[:-1] != y[1:]])  # where each run of equal values starts
    starts = np.arange(x.size)[first]
    counts = np.diff(starts, append=np.asarray([x.size], dtype=starts.dtype))
    by_order = np.repeat(ordinal[first] + (np.asarray(counts, dtype=np.float64) - 1) / 2, counts)
    ranks = np.empty(x.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, by_order, axis=-1)
    if np.isnan(x).any():
        ranks[:] = np.nan
    return ranks


# --- permutation tests (scipy.stats.permutation_test) ----------------------------------------------------

@dataclass(frozen=True)
class PermutationResult:
    statistic: Any
    pvalue: Any
    null_distribution: np.ndarray


def _samples(data: Sequence[Any]) -> list[np.ndarray]:
    samples = [np.atleast_1d(np.asarray(s)) for s in data]
    for s in samples:
        if s.ndim != 1:
            raise ValueError("the samples must be 1-D")
        if s.shape[-1] <= 1:
            raise ValueError("each sample in `data` must contain two or more observations along `axis`.")
    return samples


def _check_counts(n_resamples: int, batch: int | None, alternative: str) -> None:
    if int(n_resamples) != n_resamples or n_resamples <= 0:
        raise ValueError("`n_resamples` must be a positive integer.")
    if batch is not None and (int(batch) != batch or batch <= 0):
        raise ValueError("`batch` must be a positive integer or None.")
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError("`alternative` must be 'two-sided', 'greater' or 'less'")


def _batches(items: Any, batch: int) -> Any:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, batch)):
        yield chunk


def permutation_test_pairings(data: Sequence[Any], statistic: Statistic, *, n_resamples: int,
                              rng: np.random.Generator, alternative: str = "two-sided",
                              batch: int | None = None) -> PermutationResult:
    """``scipy.stats.permutation_test(data, statistic, permutation_type="pairings", vectorized=True, ...)`` of
    1-D samples of one length: each resample permutes every sample's order independently. ``statistic``
    takes the samples and ``axis`` (resamples along the rows of 2-D samples)."""
    samples = _samples(data)
    _check_counts(n_resamples, batch, alternative)
    n = samples[0].shape[-1]
    if any(s.shape[-1] != n for s in samples):
        raise ValueError("pairings: the samples must be as long as each other")
    k = len(samples)
    n_max = math.factorial(n) ** k
    exact = n_resamples >= n_max
    if exact:
        # Every ordering of every sample, in itertools' order, when there are no more than n_resamples.
        n_resamples = n_max
        size = batch or int(n_resamples)
        orderings = itertools.product(*(itertools.permutations(range(n)) for _ in range(k)))
        index_batches: Any = (np.asarray(chunk) for chunk in _batches(orderings, size))
    else:
        index_batches = _random_orderings(n_resamples, k, n, min(batch or int(n_resamples), n_resamples), rng)
    null = []
    for indices in index_batches:
        indices = np.swapaxes(indices, 0, 1)  # (sample, resample, observation)
        null.append(statistic(*(samples[i][..., indices[i, ...]] for i in range(k)), axis=-1))
    return _p_values(statistic(*samples, axis=-1), np.concatenate(null, axis=0), n_resamples, exact, alternative,
                     samples)


def _random_orderings(n_resamples: int, k: int, n: int, batch: int, rng: np.random.Generator) -> Any:
    # One call of Generator.permuted per batch, on a full batch even when fewer are needed (scipy does the
    # same: the draws, so the result, depend on the batch size).
    indices = np.tile(np.arange(n), (batch, k, 1))
    for start in range(0, n_resamples, batch):
        yield rng.permuted(indices, axis=-1)[:min(batch, n_resamples - start)]


def permutation_test_independent(data: Sequence[Any], statistic: Statistic, *, n_resamples: int = 9999,
                                 rng: np.random.Generator, alternative: str = "two-sided",
                                 batch: int | None = None) -> PermutationResult:
    """``scipy.stats.permutation_test(data, statistic, permutation_type="independent", vectorized=True, ...)``
    of 1-D samples: each resample deals the pooled observations out to samples of the same sizes."""
    samples = _samples(data)
    if len(samples) < 2:
        raise ValueError("`data` must be a tuple containing at least two samples")
    _check_counts(n_resamples, batch, alternative)
    sizes = [s.shape[-1] for s in samples]
    edges = list(itertools.accumulate(sizes, initial=0))
    n_max = math.prod(math.comb(n, k) for n, k in zip(edges[1:], edges[:-1]))
    exact = n_resamples >= n_max
    if exact:
        n_resamples = n_max
        deals: Any = _all_deals(sizes)
    else:
        deals = (rng.permutation(edges[-1]) for _ in range(n_resamples))
    pooled = np.concatenate(samples, axis=-1)
    null = []
    for chunk in _batches(deals, batch or int(n_resamples)):
        dealt = pooled[..., np.asarray(chunk)]
        null.append(statistic(*(dealt[..., i:j] for i, j in zip(edges[:-1], edges[1:])), axis=-1))
    return _p_values(statistic(*samples, axis=-1), np.concatenate(null, axis=0), n_resamples, exact, alternative,
                     samples)


def _all_deals(sizes: list[int]) -> Any:
    """Every way to deal range(sum(sizes)) out to groups of these sizes, each group concatenated in the order
    a Python set of it iterates: scipy's exact null distribution is built of sets so, and the order of a
    group's values is the order its mean adds them in (a set of small ints iterates by their value modulo
    its table's size: {3, 9} gives 9 first)."""
    def deal(rest: set[int], sizes: list[int]) -> Any:
        if not sizes:
            yield [rest]
            return
        for first in itertools.combinations(rest, sizes[0]):
            chosen = set(first)
            for tail in deal(rest - chosen, sizes[1:]):
                yield [chosen, *tail]

    for groups in deal(set(range(sum(sizes))), sizes):
        yield np.concatenate([list(g) for g in groups]).astype(int)


def _p_values(observed: Any, null: np.ndarray, n_resamples: int, exact: bool, alternative: str,
              samples: list[np.ndarray]) -> PermutationResult:
    # A resample counts as far out as the data when within 100 ulps of it (values equal in theory, apart
    # in floating point); a random test counts the data among its resamples (+1 above and below).
    adjustment = 0 if exact else 1
    kind = np.asarray(observed).dtype
    eps = np.finfo(kind).eps * 100 if np.issubdtype(kind, np.floating) else 0
    gamma = np.abs(eps * observed)
    float_dtype = np.result_type(*samples, np.float16)  # the samples' type, at least a float

    def less() -> Any:
        return np.asarray(np.count_nonzero(null <= observed + gamma, axis=0) + adjustment).astype(float_dtype) \
            / (n_resamples + adjustment)

    def greater() -> Any:
        return np.asarray(np.count_nonzero(null >= observed - gamma, axis=0) + adjustment).astype(float_dtype) \
            / (n_resamples + adjustment)

    p = less() if alternative == "less" else greater() if alternative == "greater" else np.minimum(less(), greater()) * 2
    p = np.clip(p, 0.0, 1.0)
    return PermutationResult(observed, p[()] if np.ndim(p) == 0 else p, null)


# --- the bootstrap (scipy.stats.bootstrap, method="percentile") ----------------------------------------

def bootstrap_percentile(data: Sequence[Any], statistic: Statistic, *, n_resamples: int, rng: np.random.Generator,
                         confidence_level: float = 0.95, batch: int | None = None) -> tuple[float, float]:
    """The two-sided percentile interval of ``scipy.stats.bootstrap(data, statistic, method="percentile",
    vectorized=True, ...)`` of independent 1-D samples (each resampled with replacement on its own)."""
    samples = _samples(data)
    if int(n_resamples) != n_resamples or n_resamples <= 0:
        raise ValueError("`n_resamples` must be a positive integer.")
    size = batch or n_resamples
    dist = []
    for start in range(0, n_resamples, size):
        count = min(size, n_resamples - start)
        # One draw per sample per batch, in the samples' order.
        resampled = [s[..., rng.integers(0, s.shape[-1], (count, s.shape[-1]), dtype="int64")] for s in samples]
        dist.append(statistic(*resampled, axis=-1))
    theta = np.concatenate(dist, axis=-1)
    alpha = np.asarray((1 - confidence_level) / 2, dtype=theta.dtype)
    lo, hi = _quantile_linear(theta, np.stack([alpha, 1 - alpha], axis=-1))
    return float(lo), float(hi)


def _quantile_linear(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``scipy.stats.quantile(x, p)`` (method "linear", numpy's default) of a 1-D ``x`` at each of ``p``."""
    if np.isnan(x).any():
        return np.full(p.shape, np.nan)
    y = np.sort(x)
    n = np.asarray(y.size, dtype=y.dtype)
    at = p * n + (1 - p)           # 1-based place in the sorted values
    above = at // 1
    below = above - 1
    frac = at % 1
    frac[below < 0] = 0
    below = np.clip(below, 0.0, n - 1)
    above = np.clip(above, 0.0, n - 1)
    return (1 - frac) * y[below.astype(np.int64)] + frac * y[above.astype(np.int64)]


# --- one change point (ruptures.Binseg, cost l2) ---------------------------------------------------------

def best_l2_split(values: Sequence[float] | np.ndarray, min_size: int) -> int:
    """``ruptures.Binseg(model="l2", min_size=min_size, jump=1).fit(values).predict(n_bkps=1)[0]``: where to cut
    a 1-D series in two, each part at least ``min_size`` long, so that the sum of squared deviations from each
    part's mean is least (ties go to the later cut)."""
    signal = np.asarray(values).reshape(-1, 1)
    n = signal.shape[0]
    min_size = max(min_size, 1)
    if 1 * min_size + min_size > n:
        raise ValueError(f"{n} values cannot be cut into two parts of at least {min_size}")

    def cost(start: int, end: int) -> Any:
        # On the (n, 1) column, as ruptures' CostL2: a variance down a column sums in another order than along a row.
        return signal[start:end].var(axis=0).sum() * (end - start)

    whole = cost(0, n)
    if np.isinf(whole) and whole < 0:
        raise ValueError("no cut of this series")
    gains = [(whole - cost(0, cut) - cost(cut, n), cut) for cut in range(0, n) if cut >= min_size and n - cut >= min_size]
    return int(max(gains)[1])
