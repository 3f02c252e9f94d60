import math

import numpy as np
import pytest
from scipy import stats

from envs.statistics import iqm, stratified_bootstrap_ci, wilson_ci


def _wilson_by_inversion(k: int, n: int, z: float) -> tuple[float, float]:
    # Independent check: the Wilson interval is the set of p whose score test |p̂-p|/sqrt(p(1-p)/n) <= z.
    grid = np.linspace(0, 1, 200_001)
    ok = np.abs(k / n - grid) <= z * np.sqrt(grid * (1 - grid) / n) + 1e-15
    return float(grid[ok].min()), float(grid[ok].max())


@pytest.mark.parametrize("k,n", [(0, 10), (5, 10), (10, 10), (25, 50), (3, 7), (49, 50)])
def test_wilson_matches_score_test_inversion(k, n):
    lo, hi = wilson_ci(k, n)
    ref_lo, ref_hi = _wilson_by_inversion(k, n, float(stats.norm.ppf(0.975)))
    assert lo == pytest.approx(ref_lo, abs=2e-5)
    assert hi == pytest.approx(ref_hi, abs=2e-5)


def test_wilson_half_width_at_fifty_trials_is_about_fourteen_points():
    lo, hi = wilson_ci(25, 50)
    assert (hi - lo) / 2 == pytest.approx(0.134, abs=0.005)
    assert wilson_ci(0, 0) == (0.0, 1.0)


def test_iqm_matches_scipy_trimmed_mean_and_is_robust():
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    assert iqm(x) == pytest.approx(stats.trim_mean(x, 0.25), rel=1e-12)
    assert iqm(np.r_[x, 1e9]) < 1.0  # one outlier does not move it
    # n not divisible by 4: fractional weights (1,2,3,4,5 -> middle half is ranks 1.25..3.75)
    assert iqm(np.array([1, 2, 3, 4, 5.0])) == pytest.approx((0.75 * 2 + 3 + 0.75 * 4) / 2.5)


def test_stratified_bootstrap_single_task_agrees_with_scipy_bootstrap():
    rng = np.random.default_rng(1)
    x = rng.normal(loc=3.0, size=60)
    est, lo, hi = stratified_bootstrap_ci({"t": x}, statistic=np.mean, reps=4000, seed=0)
    ref = stats.bootstrap((x,), np.mean, n_resamples=4000, method="percentile", random_state=0).confidence_interval
    assert est == pytest.approx(x.mean())
    assert lo == pytest.approx(ref.low, abs=0.05) and hi == pytest.approx(ref.high, abs=0.05)


def test_stratified_bootstrap_keeps_tasks_separate():
    # Two tasks with very different scales: resampling within tasks keeps each task's share fixed, so the
    # interval is much narrower than pooling would give.
    scores = {"a": np.array([0.0, 0.1, 0.2]), "b": np.array([10.0, 10.1, 10.2])}
    est, lo, hi = stratified_bootstrap_ci(scores, statistic=np.mean, reps=2000, seed=0)
    assert est == pytest.approx(5.1)
    assert hi - lo < 0.3
    assert not math.isnan(est)
