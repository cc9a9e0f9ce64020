"""benchwatch.util.stattools against what it replaces (scipy.stats, ruptures), on random and edge inputs: the
same floats, p-values, null distributions, intervals and change points, compared with ``==`` (every function
there repeats the original's arithmetic in its order and its draws from the generator, so nothing is only
close). scipy.stats and ruptures are test dependencies for this file; benchwatch itself must not load them."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import ruptures
from scipy import stats

from benchwatch.history import changepoints
from benchwatch.util import stattools

SEED = 20261128


def same(ours: float, theirs: float) -> bool:
    """Equal as floats, nan equal to nan, and -0.0 told from 0.0."""
    theirs = float(theirs)
    if math.isnan(theirs):
        return math.isnan(ours)
    return ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs)


def test_t_ppf_is_scipys():
    rng = np.random.default_rng(SEED)
    qs = [0.0, 1.0, 0.5, 0.975, 0.025, 1e-12, 1 - 1e-12, -0.1, 1.1, math.nan, *rng.uniform(size=200)]
    dfs = [0.3, 1, 2, 2.5, 3, 29, 1e3, 1e7, math.inf, 0, -1, math.nan, *rng.uniform(0.5, 60, size=50)]
    for q in qs:
        for df in dfs:
            assert same(stattools.t_ppf(q, df), stats.t.ppf(q, df)), (q, df)


def test_noncentral_t_is_scipys():
    rng = np.random.default_rng(SEED)
    xs = [-math.inf, math.inf, 0.0, -0.0, math.nan, *rng.uniform(-8, 8, size=40)]
    for x in xs:
        for df in [1, 2, 7, 38, 398, 1998, 0, math.nan, *rng.uniform(1, 100, size=5)]:
            for nc in [0.0, 0.3, 2.8, 12.0, -1.5, math.nan]:
                assert same(stattools.nct_sf(x, df, nc), stats.nct.sf(x, df, nc)), (x, df, nc)
                assert same(stattools.nct_cdf(x, df, nc), stats.nct.cdf(x, df, nc)), (x, df, nc)


def welch_cases():
    rng = np.random.default_rng(SEED)
    yield [1.0, 2.0], [3.0, 4.0]                               # n at the minimum
    yield [5.0, 5.0, 5.0], [5.0, 5.0, 6.0]                     # one side constant
    yield [5.0, 5.0, 5.0], [6.0, 6.0]                          # both constant: t infinite
    yield [5.0, 5.0], [5.0, 5.0]                               # both constant and equal: t is nan
    yield [1.0, 1.0 + 1e-15, 1.0], [1.0, 1.0, 1.0 + 2e-15]     # nearly identical (scipy warns of precision)
    yield [1, 2, 3], [2, 3, 4, 5]                              # ints
    for _ in range(300):
        n1, n2 = rng.integers(2, 30, size=2)
        a = rng.lognormal(rng.normal(), rng.uniform(0.001, 1.0), n1)
        b = rng.lognormal(rng.normal(), rng.uniform(0.001, 1.0), n2)
        yield list(np.log(np.round(a, int(rng.integers(0, 3))) + 1)), list(np.log(b))  # with ties


def test_welch_ttest_is_scipys():
    for a, b in welch_cases():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            theirs = stats.ttest_ind(a, b, equal_var=False)
        ours = stattools.welch_ttest(a, b)
        assert same(ours.pvalue, theirs.pvalue), (a, b)
        assert same(ours.statistic, theirs.statistic), (a, b)
        assert same(ours.df, theirs.df), (a, b)


def test_rankdata_is_scipys():
    rng = np.random.default_rng(SEED)
    cases = [[], [3.0], [2.0, 2.0, 2.0], [1.0, math.nan, 0.0], [3, 1, 2, 1], [-0.0, 0.0, 1.0]]
    cases += [list(rng.integers(0, k, size=int(rng.integers(1, 90)))) for k in (2, 5, 50) for _ in range(30)]
    cases += [list(rng.normal(size=int(rng.integers(1, 200)))) for _ in range(30)]
    for values in cases:
        ours, theirs = stattools.rankdata(values), stats.rankdata(values)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert np.array_equal(ours, theirs, equal_nan=True), values


def pairings_cases():
    rng = np.random.default_rng(SEED)
    yield np.arange(6.0), 1999, None            # 6! = 720 <= 1999 resamples: scipy's exact test (every order)
    yield np.array([1.0, 1, 1, 1, 1, 1]), 1999, 100  # constant, exact, in batches
    yield np.arange(6.0), 199, None             # random at n at the minimum
    for n in (7, 9, 13, 40, 41):
        x = rng.normal(size=n) + np.where(np.arange(n) >= int(rng.integers(3, n - 2)), rng.uniform(0, 2), 0)
        ranks = stats.rankdata(np.round(x, 1))  # ties
        yield ranks, 199, max(1, 2_000_000 // n)
        yield ranks, 1999, max(1, 2_000_000 // n)
        yield ranks, 1999, 600                  # several batches, the last one short
        yield ranks, 500, 7


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_permutation_test_pairings_is_scipys(alternative):
    for x, resamples, batch in pairings_cases():
        theirs = stats.permutation_test((x,), changepoints._best_gain, permutation_type="pairings", n_resamples=resamples,
                                        vectorized=True, alternative=alternative, rng=np.random.default_rng(SEED),
                                        batch=batch)
        ours = stattools.permutation_test_pairings((x,), changepoints._best_gain, n_resamples=resamples,
                                                   alternative=alternative, rng=np.random.default_rng(SEED), batch=batch)
        assert same(float(ours.pvalue), theirs.pvalue), (x, resamples, batch)
        assert np.array_equal(ours.null_distribution, theirs.null_distribution), (x, resamples, batch)
        assert float(ours.statistic) == float(theirs.statistic)


def mean_step(a, b, axis=-1):
    return np.mean(b, axis=axis) - np.mean(a, axis=axis)


def independent_cases():
    rng = np.random.default_rng(SEED)
    yield np.array([1.0, 2.0]), np.array([3.0, 4.0]), None      # exact: 6 ways to deal four values
    yield np.array([5.0, 5.0, 5.0]), np.array([5.0, 5.0]), None  # constant
    yield np.array([1, 2, 3, 4]), np.array([2, 3, 9]), None      # ints
    yield np.array([3.0, 9.0, 1.0, 4.0]), np.arange(12.0), None   # exact, 1820 ways: the order of sets matters
    for _ in range(12):
        n1, n2 = (int(v) for v in rng.integers(2, 30, size=2))
        a = np.round(rng.normal(100, 5, n1))
        b = np.round(rng.normal(100 + rng.uniform(-8, 8), 5, n2))
        yield a, b, None
        yield a, b, int(rng.integers(100, 4000))                   # in batches


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
def test_permutation_test_independent_is_scipys(alternative):
    for a, b, batch in independent_cases():
        theirs = stats.permutation_test((a, b), mean_step, vectorized=True, n_resamples=9999, alternative=alternative,
                                        rng=np.random.default_rng(SEED), batch=batch)
        ours = stattools.permutation_test_independent((a, b), mean_step, n_resamples=9999, alternative=alternative,
                                                      rng=np.random.default_rng(SEED), batch=batch)
        assert same(float(ours.pvalue), theirs.pvalue), (a, b, batch)
        assert np.array_equal(ours.null_distribution, theirs.null_distribution), (a, b, batch)


def test_permutation_tests_refuse_what_scipy_refuses():
    rng = np.random.default_rng(SEED)
    with pytest.raises(ValueError, match="two or more observations"):
        stattools.permutation_test_independent(([1.0], [2.0, 3.0]), mean_step, rng=rng)
    with pytest.raises(ValueError, match="n_resamples"):
        stattools.permutation_test_pairings((np.arange(6.0),), changepoints._best_gain, n_resamples=0, rng=rng)


def step_pct(b, a, axis=-1):
    return changepoints.percent_step(np.mean(b, axis=axis), np.mean(a, axis=axis))


def bootstrap_cases():
    rng = np.random.default_rng(SEED)
    yield np.array([1.0, 2.0]), np.array([3.0, 5.0]), None       # n at the minimum
    yield np.array([0.0, 0.0, 0.0]), np.array([0.0, 2.0, 0.0]), None  # a mean of zero before (+100 % or 0 %)
    yield np.array([7.0, 7.0, 7.0]), np.array([7.0, 7.0, 7.0]), None  # constant
    yield np.array([1, 2, 3]), np.array([2, 2, 9]), None          # ints
    for _ in range(40):
        n1, n2 = (int(v) for v in rng.integers(3, 41, size=2))
        yield rng.lognormal(5, 0.1, n1), rng.lognormal(5 + rng.uniform(-0.2, 0.2), 0.1, n2), None
    yield rng.normal(50, 3, 20), rng.normal(45, 3, 20), 333      # in batches, the last one short


def test_bootstrap_percentile_is_scipys():
    for before, after, batch in bootstrap_cases():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = stats.bootstrap((before, after), step_pct, n_resamples=2000, confidence_level=0.95,
                                     method="percentile", vectorized=True, rng=np.random.default_rng(SEED), batch=batch)
        lo, hi = stattools.bootstrap_percentile((before, after), step_pct, n_resamples=2000, confidence_level=0.95,
                                                rng=np.random.default_rng(SEED), batch=batch)
        assert same(lo, theirs.confidence_interval.low), (before, after)
        assert same(hi, theirs.confidence_interval.high), (before, after)


def split_cases():
    rng = np.random.default_rng(SEED)
    yield np.arange(6.0)                     # n at the minimum: one cut possible
    yield np.ones(10)                        # constant: every cut gains nothing, ruptures takes the last
    yield np.array([1.0, 1, 1, 5, 5, 5, 1, 1, 1])  # two equal best cuts
    yield np.log(np.array([1300.0, 1290, 260, 1310, 1305, 45, 44, 46, 45, 47]))
    for n in list(rng.integers(6, 90, size=60)):
        x = rng.normal(size=int(n)) + np.where(np.arange(n) >= int(rng.integers(0, n)), rng.uniform(0, 3), 0)
        yield np.round(x, int(rng.integers(0, 3)))
        yield stats.rankdata(x)


def test_best_l2_split_is_ruptures():
    for x in split_cases():
        theirs = ruptures.Binseg(model="l2", min_size=3, jump=1).fit(x.reshape(-1, 1)).predict(n_bkps=1)[0]
        assert stattools.best_l2_split(x, 3) == theirs, x
    with pytest.raises(ValueError):
        stattools.best_l2_split(np.arange(5.0), 3)


def test_change_points_are_those_scipy_and_ruptures_found(monkeypatch):
    """The whole of detect() with the originals in place of stattools gives the same change points to the bit."""
    rng = np.random.default_rng(SEED)
    series = [np.concatenate([rng.normal(1000, 20, 30), rng.normal(920, 20, 30), rng.normal(1000, 20, 25)]),
              np.concatenate([rng.normal(50, 1, 12), rng.normal(60, 1, 6)]),
              rng.normal(100, 2, 40)]
    ours = [changepoints.detect(s) for s in series]

    def pairings(data, statistic, *, n_resamples, rng, alternative="two-sided", batch=None):
        return stats.permutation_test(data, statistic, permutation_type="pairings", vectorized=True,
                                      n_resamples=n_resamples, rng=rng, alternative=alternative, batch=batch)

    def boot(data, statistic, *, n_resamples, rng, confidence_level=0.95, batch=None):
        ci = stats.bootstrap(data, statistic, n_resamples=n_resamples, rng=rng, confidence_level=confidence_level,
                             method="percentile", vectorized=True, batch=batch).confidence_interval
        return float(ci.low), float(ci.high)

    monkeypatch.setattr(stattools, "rankdata", stats.rankdata)
    monkeypatch.setattr(stattools, "permutation_test_pairings", pairings)
    monkeypatch.setattr(stattools, "bootstrap_percentile", boot)
    monkeypatch.setattr(stattools, "best_l2_split", lambda x, m: ruptures.Binseg(model="l2", min_size=m, jump=1)
                        .fit(x.reshape(-1, 1)).predict(n_bkps=1)[0])
    theirs = [changepoints.detect(s) for s in series]
    assert ours == theirs
    assert [len(c) for c in ours] == [2, 1, 0]


def test_reports_and_the_gate_load_neither_scipy_stats_nor_ruptures():
    """Their import took 2 s of every report, history and gate command: benchwatch computes those figures itself."""
    code = ("import sys, benchwatch.experiment.report, benchwatch.history.report, benchwatch.gate.history, "
            "benchwatch.profile.variants, benchwatch.cli\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ruptures' or m.startswith('scipy.stats')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
