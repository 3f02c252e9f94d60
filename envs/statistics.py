"""Statistics for every reported figure: Wilson intervals for success rates, IQM with stratified bootstrap CIs for
learning runs. In the lowest layer so that any layer may report a figure with its interval."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
from scipy import stats


def wilson_ci(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there are no trials."""
    if n <= 0:
        return (0.0, 1.0)
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50 % (25 % trimmed from each end, fractional weights)."""
    x = np.sort(np.asarray(values, dtype=float).ravel())
    n = x.size
    if n == 0:
        return float("nan")
    lo, hi = 0.25 * n, 0.75 * n
    # Weight each sorted sample by its overlap with [lo, hi] in rank space, so small n is handled exactly.
    idx = np.arange(n)
    weights = np.clip(np.minimum(idx + 1, hi) - np.maximum(idx, lo), 0.0, 1.0)
    return float(np.sum(weights * x) / np.sum(weights))


def stratified_bootstrap_ci(
    scores: Mapping[str, np.ndarray],
    statistic: Callable[[np.ndarray], float] = iqm,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Point estimate and percentile CI of ``statistic`` over all runs, resampling runs within each task.

    ``scores`` maps task → array of per-run scores (runs = seeds). Returns (estimate, lo, hi).
    """
    tasks = sorted(scores)
    arrays = [np.asarray(scores[t], dtype=float).ravel() for t in tasks]
    point = statistic(np.concatenate(arrays))
    rng = np.random.default_rng(seed)
    boot = np.empty(reps)
    for r in range(reps):
        boot[r] = statistic(np.concatenate([a[rng.integers(0, a.size, a.size)] for a in arrays]))
    alpha = (1 - confidence) / 2
    return float(point), float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))
