"""Pseudo-Mallows: a fast sequential approximation of the Bayesian Mallows posterior over a consensus ranking.

Model: ``N`` users rank ``n`` items; user j's complete ranking ``R_j`` follows a Mallows model with footrule distance
``p(R_j | ρ) ∝ exp(−α/n Σ_i |R_ji − ρ_i|)`` around the consensus ``ρ`` (uniform prior, α fixed). Data are partial:
each user's items fall into *tiers*, an item in a tier of ranks ``[lo, hi]`` having some unknown rank inside it
(a tier of one rank = an observed rank; top-k data = k singleton tiers and one tier for the rest; click data = a
clicked tier above an unclicked tier).

Pseudo-Mallows, for an item order ``o``, is ``q(ρ | o) = Π_t q(ρ_{o_t} | ρ_{o_1..o_{t−1}})`` where each factor is a
univariate Mallows-like distribution over the ranks not yet taken,

    q(ρ_i = r | …) ∝ exp(S[i, r]),     S[i, r] = Σ_j log mean_{u ∈ tier_j(i)} exp(−α/n |u − r|),

i.e. the footrule term of item i alone, with each user's missing rank marginalised over its tier. ``S`` also defines
the marginalised target ``p_m(ρ) ∝ exp(Σ_i S[i, ρ_i])``; the order is chosen to minimise the marginalised KL
``KL(q_o ‖ p_m)`` (up to its constant, estimated with common random numbers) by local search over insertion moves
from several starting orders, the first of them middle-out (items of middle expected rank first, the
extremes last). For n ≤ 8 the exact posterior (every completion of every user's tiers, through permanents) is
available to check the approximation.

Ranks are 0-based throughout (0 = best).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def check_tiers(lo: np.ndarray, hi: np.ndarray) -> None:
    """Raise ValueError unless every user's tiers ``[lo, hi]`` hold exactly as many items as ranks."""
    if lo.shape != hi.shape or lo.ndim != 2:
        raise ValueError(f"lo and hi must be N × n arrays of the same shape, got {lo.shape} and {hi.shape}")
    n = lo.shape[1]
    if (lo < 0).any() or (hi >= n).any() or (hi < lo).any():
        raise ValueError(f"tiers must satisfy 0 <= lo <= hi < n = {n}")
    for j in range(lo.shape[0]):
        for a, b in set(zip(lo[j].tolist(), hi[j].tolist(), strict=True)):
            count = int(((lo[j] == a) & (hi[j] == b)).sum())
            if count != b - a + 1:
                raise ValueError(f"user {j}: tier [{a}, {b}] has {count} items for {b - a + 1} ranks")


def top_k_tiers(full_ranks: np.ndarray, k: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tiers of top-k data: user j's first ``k[j]`` ranks observed, the rest only known to be below."""
    full_ranks = np.asarray(full_ranks)
    k = np.asarray(k)[:, None]
    observed = full_ranks < k
    n = full_ranks.shape[1]
    return np.where(observed, full_ranks, k), np.where(observed, full_ranks, n - 1)


def click_tiers(full_ranks: np.ndarray, clicks: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tiers of click data: user j clicks its top ``clicks[j]`` items, unordered, above the unclicked rest."""
    full_ranks = np.asarray(full_ranks)
    c = np.asarray(clicks)[:, None]
    clicked = full_ranks < c
    n = full_ranks.shape[1]
    return np.where(clicked, 0, c), np.where(clicked, c - 1, n - 1)


def factor_scores(lo: np.ndarray, hi: np.ndarray, alpha: float) -> np.ndarray:
    """``S`` (n items × n ranks): ``S[i, r] = Σ_j log mean_{u ∈ [lo_ji, hi_ji]} exp(−α/n |u − r|)``."""
    check_tiers(lo, hi)
    n = lo.shape[1]
    ranks = np.arange(n)
    kernel = np.exp(-alpha / n * np.abs(ranks[:, None] - ranks[None, :]))  # [u, r]
    cum = np.vstack([np.zeros((1, n)), np.cumsum(kernel, axis=0)])  # cum[u] = Σ_{u' < u} kernel[u']
    means = (cum[hi + 1] - cum[lo]) / (hi - lo + 1)[..., None]  # (N, n items, n ranks)
    return np.log(means).sum(axis=0)


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(m, axis) + np.log(np.exp(x - m).sum(axis=axis))


def log_q(ranks: np.ndarray, scores: np.ndarray, order: Sequence[int]) -> np.ndarray:
    """``log q(ρ | o)`` for each row of ``ranks`` (P × n, a permutation of 0..n−1 per row)."""
    ranks = np.asarray(ranks)
    p, n = ranks.shape
    free = np.ones((p, n), dtype=bool)
    rows = np.arange(p)
    out = np.zeros(p)
    for i in order:
        logits = np.where(free, scores[i][None, :], -np.inf)
        out += scores[i, ranks[:, i]] - _logsumexp(logits, axis=1)
        free[rows, ranks[:, i]] = False
    return out


def sample(scores: np.ndarray, order: Sequence[int], uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Draws from ``q(· | o)`` by inverse CDF, one per row of ``uniforms`` (size × n in [0, 1)).

    Returns (ranks size × n, their ``log q``). Passing the same ``uniforms`` for different orders gives common
    random numbers (low-variance comparisons between orders).
    """
    size, n = uniforms.shape
    free = np.ones((size, n), dtype=bool)
    rows = np.arange(size)
    ranks = np.zeros((size, n), dtype=np.int64)
    logq = np.zeros(size)
    for t, i in enumerate(order):
        prob = np.where(free, np.exp(scores[i] - scores[i].max())[None, :], 0.0)
        cdf = np.cumsum(prob, axis=1)
        total = cdf[:, -1]
        r = np.minimum((cdf < uniforms[:, t : t + 1] * total[:, None]).sum(axis=1), n - 1)
        r = np.where(free[rows, r], r, np.argmax(prob, axis=1))  # guard against round-off at the edges
        logq += np.log(prob[rows, r] / total)
        ranks[:, i] = r
        free[rows, r] = False
    return ranks, logq


def marginalised_kl(scores: np.ndarray, order: Sequence[int], uniforms: np.ndarray) -> float:
    """Monte-Carlo ``E_q[log q − Σ_i S[i, ρ_i]]`` = ``KL(q_o ‖ p_m) − log Z_m`` (the constant does not depend on o)."""
    ranks, logq = sample(scores, order, uniforms)
    return float((logq - scores[np.arange(scores.shape[0])[None, :], ranks].sum(axis=1)).mean())


def expected_rank_order(scores: np.ndarray) -> list[int]:
    """Items sorted by their expected rank under their own factor over all ranks (best first)."""
    prob = np.exp(scores - scores.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    return np.argsort(prob @ np.arange(scores.shape[1]), kind="stable").tolist()


def middle_out_order(scores: np.ndarray) -> list[int]:
    """Items from the middle of the expected-rank order outwards, alternating sides; the extremes come last.

    (The factors of top and bottom items are the most concentrated; placing them last lets the earlier, vaguer
    items spread over the middle ranks first.)
    """
    ranked = expected_rank_order(scores)
    n = len(ranked)
    centre = (n - 1) / 2
    return sorted(ranked, key=lambda i: (abs(ranked.index(i) - centre), ranked.index(i)))


def choose_order(
    scores: np.ndarray,
    rng: np.random.Generator,
    samples: int = 1000,
    restarts: int = 4,
    reach: int | None = None,
    sweeps: int = 5,
    polish: int | None = None,
) -> tuple[list[int], float]:
    """The order minimising the estimated marginalised KL; returns (order, its estimated objective).

    Candidates: the middle-out order, the expected-rank order, its reverse and ``restarts`` random orders, all
    scored on the same common random numbers; the ``polish`` best of them (default all) are improved by local search
    over insertion moves (an item moved up to ``reach`` positions, default n − 1).
    """
    n = scores.shape[0]
    reach = n - 1 if reach is None else reach
    uniforms = rng.random((samples, n))
    ranked = expected_rank_order(scores)
    starts = [middle_out_order(scores), ranked, ranked[::-1]] + [rng.permutation(n).tolist() for _ in range(restarts)]
    scored = sorted(((marginalised_kl(scores, o, uniforms), k) for k, o in enumerate(starts)))
    best, best_val = starts[scored[0][1]], scored[0][0]
    for val, k in scored[: len(scored) if polish is None else polish]:
        order = starts[k]
        for _ in range(sweeps):
            improved = False
            for t in range(n):
                for shift in range(-reach, reach + 1):
                    if shift == 0 or not 0 <= t + shift < n:
                        continue
                    cand = order.copy()
                    cand.insert(t + shift, cand.pop(t))
                    cand_val = marginalised_kl(scores, cand, uniforms)
                    if cand_val < val - 1e-9:
                        order, val, improved = cand, cand_val, True
            if not improved:
                break
        if val < best_val:
            best, best_val = order, val
    return best, best_val


def all_permutations(n: int) -> np.ndarray:
    """Every permutation of 0..n−1 (n! × n); only for small n."""
    if n > 9:
        raise ValueError(f"enumerating permutations is only for n <= 9, got {n}")
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64)


def permanent(mats: np.ndarray) -> np.ndarray:
    """Permanents of a batch of m × m matrices (… × m × m) by Ryser's formula."""
    m = mats.shape[-1]
    subsets = np.array(list(itertools.product((0, 1), repeat=m))[1:], dtype=float)  # non-empty column subsets
    signs = (-1.0) ** (m - subsets.sum(axis=1))
    row_sums = mats @ subsets.T  # … × m × subsets
    return (np.prod(row_sums, axis=-2) * signs).sum(axis=-1)


def exact_log_posterior(lo: np.ndarray, hi: np.ndarray, alpha: float, perms: np.ndarray) -> np.ndarray:
    """Normalised log posterior of each consensus in ``perms`` (all n! of them), every completion summed exactly.

    Per user and tier, the sum over the tier's completions of ``Π exp(−α/n |u − ρ_i|)`` is the permanent of the
    tier's item × rank matrix; the Mallows normaliser does not depend on ρ (footrule is right-invariant).
    """
    check_tiers(lo, hi)
    n = lo.shape[1]
    out = np.zeros(len(perms))
    for j in range(lo.shape[0]):
        for a, b in sorted(set(zip(lo[j].tolist(), hi[j].tolist(), strict=True))):
            items = np.flatnonzero((lo[j] == a) & (hi[j] == b))
            tier_ranks = np.arange(a, b + 1)
            for start in range(0, len(perms), 8192):  # chunks keep the Ryser tensor small
                chunk = perms[start : start + 8192, items]
                mats = np.exp(-alpha / n * np.abs(chunk[:, :, None] - tier_ranks[None, None, :]))
                out[start : start + 8192] += np.log(permanent(mats))
    return out - _logsumexp(out, axis=0)


def kl_to_exact(log_post: np.ndarray, perms: np.ndarray, scores: np.ndarray, order: Sequence[int]) -> float:
    """Exact ``KL(q_o ‖ p)`` against an enumerated posterior (``log_post`` over ``perms``)."""
    lq = log_q(perms, scores, order)
    return float((np.exp(lq) * (lq - log_post)).sum())


def rank_marginals(ranks: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``M[i, r] = P(ρ_i = r)`` (n × n) from consensus rankings (P × n) with probabilities ``weights`` (uniform if
    None: posterior draws)."""
    ranks = np.asarray(ranks)
    p, n = ranks.shape
    w = np.full(p, 1.0 / p) if weights is None else np.asarray(weights, dtype=float)
    out = np.zeros((n, n))
    for i in range(n):
        out[i] = np.bincount(ranks[:, i], weights=w, minlength=n)
    return out


def marginal_tv(m0: np.ndarray, m1: np.ndarray) -> float:
    """Mean over items of the total variation between two items' rank distributions (rows of ``rank_marginals``)."""
    return float(0.5 * np.abs(np.asarray(m0) - np.asarray(m1)).sum(axis=1).mean())


def exact_mallows_sample(
    consensus: np.ndarray, alpha: float, size: int, rng: np.random.Generator, perms: np.ndarray | None = None
) -> np.ndarray:
    """Exact draws from the footrule Mallows model around ``consensus`` by enumeration (small n)."""
    n = len(consensus)
    perms = all_permutations(n) if perms is None else perms
    logw = -alpha / n * np.abs(perms - consensus[None, :]).sum(axis=1)
    w = np.exp(logw - logw.max())
    return perms[rng.choice(len(perms), size, p=w / w.sum())]
