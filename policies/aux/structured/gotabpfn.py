"""GOTabPFN / GO-LR: graph-guided feature ordering and block pooling for high-dimensional, low-sample tables.

A frozen tabular model accepts only a few input tokens, so a wide table must be compressed to a token budget B.
GO-LR orders the features so that similar ones sit next to each other, then averages contiguous blocks:

1. Feature graph: weight ``w_ij = |corr(x_i, x_j)|`` on the training rows; distance ``d_ij = 1 - w_ij``.
2. Order: the weighted minimum linear arrangement ``min_pi sum_ij w_ij |pi(i) - pi(j)|`` is NP-hard; its usual
   surrogate is a shortest Hamiltonian *path* under ``d`` (neighbours in the order are similar), built by
   nearest-neighbour construction and improved by 2-opt segment reversals (which never increase the path cost).
3. Pool: split the order into B contiguous blocks and average each block's standardised features, after flipping
   features anti-correlated with the block's first one so they do not cancel (``|corr|`` ignores sign).

:func:`exact_minla` enumerates all orders (≤ 8 features) to check the surrogate on small graphs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


def feature_similarity(x: np.ndarray) -> np.ndarray:
    """``|corr|`` between the columns of ``x`` [n, p]; constant columns get similarity 0 to everything."""
    std = x.std(0)
    z = (x - x.mean(0)) / np.where(std > 0, std, 1.0)
    sim = np.abs(z.T @ z) / len(x)
    sim[std == 0, :] = 0.0
    sim[:, std == 0] = 0.0
    np.fill_diagonal(sim, 1.0)
    return np.clip(sim, 0.0, 1.0)


def path_cost(order: np.ndarray, dist: np.ndarray) -> float:
    """Sum of distances between consecutive features of an order (an open path)."""
    order = np.asarray(order)
    return float(dist[order[:-1], order[1:]].sum())


def minla_cost(order: np.ndarray, weights: np.ndarray) -> float:
    """Weighted linear-arrangement cost ``sum_{i<j} w_ij |pos_i - pos_j|`` of an order."""
    pos = np.empty(len(order), dtype=np.int64)
    pos[np.asarray(order)] = np.arange(len(order))
    return float(np.triu(weights * np.abs(pos[:, None] - pos[None, :]), 1).sum())


def exact_minla(weights: np.ndarray) -> tuple[np.ndarray, float]:
    """The optimal linear arrangement by enumerating all orders (p ≤ 8; reversals skipped as they cost the same)."""
    p = len(weights)
    if p > 8:
        raise ValueError(f"exact MinLA enumerates p! orders; p must be <= 8, got {p}")
    best, best_cost = np.arange(p), minla_cost(np.arange(p), weights)
    for perm in itertools.permutations(range(p)):
        if perm[0] > perm[-1]:
            continue
        cost = minla_cost(np.array(perm), weights)
        if cost < best_cost - 1e-12:
            best, best_cost = np.array(perm), cost
    return best, best_cost


def nearest_neighbour_path(dist: np.ndarray, start: int = 0) -> np.ndarray:
    """Greedy path: from ``start`` repeatedly step to the closest unvisited feature."""
    p = len(dist)
    order = np.empty(p, dtype=np.int64)
    visited = np.zeros(p, dtype=bool)
    order[0], visited[start] = start, True
    for k in range(1, p):
        row = np.where(visited, np.inf, dist[order[k - 1]])
        order[k] = int(np.argmin(row))
        visited[order[k]] = True
    return order


def two_opt(order: np.ndarray, dist: np.ndarray, max_passes: int = 50) -> np.ndarray:
    """Improve an open path by reversing segments ``order[i..j]`` while some reversal strictly shortens it.

    Reversing ``[i, j]`` replaces the edges (i-1, i) and (j, j+1) by (i-1, j) and (i, j+1); at the path's ends the
    missing edge costs nothing. Each pass applies, for every i, the best improving j (vectorised over j).
    """
    order = np.array(order, dtype=np.int64)
    p = len(order)
    if p < 3:
        return order
    for _ in range(max_passes):
        improved = False
        for i in range(p - 1):
            j = np.arange(i + 1, p)
            a, b = order[i - 1] if i > 0 else -1, order[i]
            c, nxt = order[j], np.where(j + 1 < p, order[np.minimum(j + 1, p - 1)], -1)
            old_left = dist[a, b] if a >= 0 else 0.0
            new_left = dist[a, c] if a >= 0 else np.zeros(len(j))
            has_next = nxt >= 0
            old_right = np.where(has_next, dist[c, np.maximum(nxt, 0)], 0.0)
            new_right = np.where(has_next, dist[b, np.maximum(nxt, 0)], 0.0)
            gain = old_left + old_right - new_left - new_right
            best = int(np.argmax(gain))
            if gain[best] > 1e-12:
                order[i:j[best] + 1] = order[i:j[best] + 1][::-1].copy()
                improved = True
        if not improved:
            break
    return order


def graph_order(x: np.ndarray, max_passes: int = 50) -> np.ndarray:
    """GO-LR feature order of ``x`` [n, p]: nearest-neighbour path from the most connected feature, then 2-opt."""
    sim = feature_similarity(x)
    dist = 1.0 - sim
    start = int(np.argmax(sim.sum(1)))
    return two_opt(nearest_neighbour_path(dist, start), dist, max_passes)


@dataclass
class BlockPooler:
    """Contiguous-block mean pooling of ordered, standardised, sign-aligned features into ``budget`` meta-features."""

    order: np.ndarray
    budget: int
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    signs: np.ndarray | None = None

    def fit(self, x: np.ndarray) -> BlockPooler:
        """Learn standardisation and per-block signs on the training rows."""
        self.mean, std = x.mean(0), x.std(0)
        self.std = np.where(std > 0, std, 1.0)
        z = (x - self.mean) / self.std
        self.signs = np.ones(x.shape[1])
        for block in self.blocks():
            ref = z[:, block[0]]
            self.signs[block] = np.where(z[:, block].T @ ref >= 0, 1.0, -1.0)
        return self

    def blocks(self) -> list[np.ndarray]:
        """The order cut into ``budget`` contiguous blocks of (nearly) equal size."""
        return np.array_split(np.asarray(self.order), min(self.budget, len(self.order)))

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Rows [m, p] → meta-features [m, budget]."""
        z = (x - self.mean) / self.std * self.signs
        return np.stack([z[:, block].mean(1) for block in self.blocks()], axis=1)


def neighbour_adjacency_rate(order: np.ndarray, neighbours: set[tuple[int, int]]) -> float:
    """Share of consecutive pairs in ``order`` that are neighbours in a known graph (e.g. 4-neighbour pixels)."""
    pairs = zip(order[:-1], order[1:], strict=True)
    return float(np.mean([(int(a), int(b)) in neighbours or (int(b), int(a)) in neighbours for a, b in pairs]))
