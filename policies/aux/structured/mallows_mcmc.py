"""Metropolis–Hastings for the Bayesian footrule Mallows model with partial (tiered) data: the reference sampler.

State: the consensus ``ρ`` and each user's augmented complete ranking ``R̃_j`` (consistent with its tiers, see
``pseudo_mallows``). One iteration makes

- a leap-and-shift proposal for ``ρ``: pick an item, move it to a rank within distance ``L`` (the items in between
  shift by one), accepted with the footrule likelihood ratio and the proposal correction ``|S(old)| / |S(new)|``
  (``S(x)``: ranks within ``L`` of ``x``; moves by one rank are symmetric);
- for every user, a proposal swapping the ranks of two items of the same tier (symmetric), accepted with the
  footrule ratio.

Ranks are 0-based.
"""

from __future__ import annotations

import numpy as np

from policies.aux.structured.pseudo_mallows import check_tiers


def _window(x: int, n: int, leap: int) -> int:
    """Number of ranks within ``leap`` of ``x``, excluding ``x``."""
    return min(n - 1, x + leap) - max(0, x - leap)


def leap_and_shift(rho: np.ndarray, leap: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """One leap-and-shift proposal: (proposed ranks, log proposal ratio log q(ρ|ρ') − log q(ρ'|ρ))."""
    n = len(rho)
    u = int(rng.integers(n))
    old = int(rho[u])
    choices = [r for r in range(max(0, old - leap), min(n - 1, old + leap) + 1) if r != old]
    new = int(choices[rng.integers(len(choices))])
    out = rho.copy()
    if new > old:
        out[(rho > old) & (rho <= new)] -= 1
    else:
        out[(rho >= new) & (rho < old)] += 1
    out[u] = new
    if abs(new - old) == 1:  # reachable by moving either item of the swapped pair: symmetric
        return out, 0.0
    return out, float(np.log(_window(old, n, leap)) - np.log(_window(new, n, leap)))


def mallows_mcmc(
    lo: np.ndarray,
    hi: np.ndarray,
    alpha: float,
    iterations: int,
    burn_in: int,
    thin: int,
    rng: np.random.Generator,
    leap: int | None = None,
) -> tuple[np.ndarray, float]:
    """Posterior draws of the consensus (``(iterations − burn_in) / thin`` × n) and the ρ acceptance rate.

    Starts from a random consensus and random completions of every user's tiers. ``leap`` defaults to
    ``max(1, n // 5)``.
    """
    check_tiers(lo, hi)
    if not 0 <= burn_in < iterations or thin < 1:
        raise ValueError(f"need 0 <= burn_in < iterations and thin >= 1, got {burn_in}, {iterations}, {thin}")
    n_users, n = lo.shape
    leap = max(1, n // 5) if leap is None else leap
    scale = alpha / n
    users = np.arange(n_users)
    # items sorted by tier: the items of tier [lo, hi] sit at positions lo..hi of ``by_tier``
    by_tier = np.argsort(lo + rng.random(lo.shape), axis=1, kind="stable")
    pos = np.argsort(by_tier, axis=1)
    aug = np.empty_like(lo)
    aug[users[:, None], by_tier] = np.arange(n)[None, :]  # a random completion of every user's tiers
    rho = rng.permutation(n)
    draws, accepted = [], 0
    for it in range(iterations):
        prop, log_ratio = leap_and_shift(rho, leap, rng)
        changed = np.flatnonzero(prop != rho)
        delta = (np.abs(aug[:, changed] - prop[changed]) - np.abs(aug[:, changed] - rho[changed])).sum()
        if np.log(rng.random()) < -scale * delta + log_ratio:
            rho = prop
            accepted += 1
        # augmentation: swap two items of the same tier for every user
        a = rng.integers(n, size=n_users)
        lo_a, hi_a = lo[users, a], hi[users, a]
        size = hi_a - lo_a + 1
        p = lo_a + (rng.random(n_users) * np.maximum(size - 1, 1)).astype(np.int64)
        p = np.where(p >= pos[users, a], p + 1, p)
        ok = size > 1
        b = by_tier[users, np.minimum(p, n - 1)]
        ra, rb = aug[users, a], aug[users, b]
        d = (np.abs(rb - rho[a]) + np.abs(ra - rho[b]) - np.abs(ra - rho[a]) - np.abs(rb - rho[b]))
        take = ok & (np.log(rng.random(n_users)) < -scale * d)
        aug[users[take], a[take]], aug[users[take], b[take]] = rb[take], ra[take]
        if it >= burn_in and (it - burn_in) % thin == 0:
            draws.append(rho.copy())
    return np.array(draws), accepted / iterations
