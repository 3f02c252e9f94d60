"""Statistics for every reported figure: Wilson intervals for success rates, IQM with stratified bootstrap CIs for
learning runs, t and bootstrap intervals over seeds or items. In the lowest layer so that any layer may report a
figure with its interval."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

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


def mean_ci(values: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval over independent runs (seeds); (m, m, m) for a single value."""
    x = np.asarray(values, dtype=float).ravel()
    m = float(x.mean()) if x.size else float("nan")
    if x.size < 2:
        return m, m, m
    half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return m, m - half, m + half


def paired_diff_ci(a: Any, b: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired runs with its t interval (a CI excluding 0 means a consistent difference)."""
    return mean_ci(np.asarray(a, dtype=float) - np.asarray(b, dtype=float), confidence)


def bootstrap_ci(values: Any, reps: int = 2000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap CI over items (questions, sequences) rather than seeds."""
    x = np.asarray(values, dtype=float).ravel()
    rng = np.random.default_rng(seed)
    boots = x[rng.integers(0, x.size, (reps, x.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(x.mean()), float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha))
