"""Acceptance 1 of issue 22: change points of synthetic per-run TPS series (fixed seeds)."""

from __future__ import annotations

import numpy as np

from benchwatch.history.changepoints import detect


def _noise(seed: int, n: int) -> np.ndarray:
    return 1000.0 * (1 + 0.02 * np.random.default_rng(seed).standard_normal(n))


def test_a_step_of_minus_8_percent_at_run_20_of_40_is_found_with_its_size():
    for seed in (0, 1, 2):
        x = _noise(seed, 40)
        x[20:] *= 0.92
        (cp,) = detect(x)
        assert abs(cp.index - 20) <= 1
        assert cp.step_ci[0] <= -8.0 <= cp.step_ci[1], cp
        assert cp.step_ci[0] <= cp.step_pct <= cp.step_ci[1] and cp.step_pct < 0
        assert cp.p_value < 0.01


def test_one_outlier_run_of_minus_30_percent_is_no_change_point():
    for seed, at in ((0, 25), (1, 5), (2, 37), (3, 0), (4, 39)):
        x = _noise(seed, 40)
        x[at] *= 0.70
        assert detect(x) == [], (seed, at)


def test_plain_noise_has_no_change_point():
    for seed in range(5):
        assert detect(_noise(100 + seed, 40)) == []


def test_two_steps_are_both_found():
    for seed in (0, 1):
        x = _noise(seed, 60)
        x[20:] *= 0.92
        x[40:] *= 1.08  # a dip that comes back: no good single split of the whole
        cps = detect(x)
        assert [abs(c.index - want) <= 1 for c, want in zip(cps, (20, 40), strict=True)] == [True, True], cps
        assert cps[0].step_pct < 0 < cps[1].step_pct
    x = _noise(7, 60)
    x[20:] *= 0.92
    x[40:] *= 0.92  # two steps the same way
    assert [c.index for c in detect(x)] in ([20, 40], [19, 40], [21, 40], [20, 39], [20, 41])


def test_the_same_runs_give_the_same_answer():
    x = _noise(3, 40)
    x[20:] *= 0.92
    assert detect(x) == detect(x.copy())


def test_short_and_flat_series():
    assert detect([]) == [] and detect([1.0]) == [] and detect([5.0] * 10) == []


def test_a_fast_run_that_fell_far_stays_before_the_step():
    # TPS of a real test_history run (2 shared cores under load): the 6th run fell to 260 before the step
    # to about 42 at the 7th. On a linear scale 260 is nearer the 42s; by ratio it is one of the fast runs.
    tps = [1811.748736, 1417.954316, 687.525375, 1213.375385, 1594.554016, 260.168993,
           40.0, 45.0, 43.0, 44.0, 37.0, 43.0]
    (cp,) = detect(tps)
    assert cp.index == 6 and cp.step_pct < -90
