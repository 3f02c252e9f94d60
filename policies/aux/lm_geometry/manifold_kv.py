"""ManifoldKV: evict KV-cache entries by Euclidean distance of each key to its head's key centroid.

Scores are "keep" scores (higher = keep) over cached keys of shape (..., T, d_head), one head per leading index:

- ManifoldKV: ``‖k_i − μ‖₂`` with μ the mean key of the head; with ``window`` set, μ is the mean of the window of
  ``window`` consecutive positions that contains i (long contexts drift, so one global centroid blurs them).
- KeyDiff: ``1 − cos(k_i, μ)``: the same outlier idea measured by angle only, so it ignores key norms.
- recency: later positions score higher; random: a seeded uniform draw.

``keep_mask`` turns scores into a per-head boolean mask of the ``n_keep`` best positions.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def key_centroids(keys: Tensor, window: int | None = None) -> Tensor:
    """Centroid for every position (..., T, d): the global mean, or the mean of the position's window."""
    if window is None or window >= keys.shape[-2]:
        return keys.mean(dim=-2, keepdim=True).expand_as(keys)
    t = keys.shape[-2]
    starts = torch.arange(t, device=keys.device) // window * window
    out = torch.empty_like(keys)
    for s in starts.unique().tolist():
        out[..., s:s + window, :] = keys[..., s:s + window, :].mean(dim=-2, keepdim=True)
    return out


def manifold_scores(keys: Tensor, window: int | None = None) -> Tensor:
    """ManifoldKV keep score ‖k_i − μ‖₂ (..., T)."""
    return (keys - key_centroids(keys, window)).norm(dim=-1)


def keydiff_scores(keys: Tensor, window: int | None = None) -> Tensor:
    """KeyDiff keep score 1 − cos(k_i, μ) (..., T)."""
    return 1.0 - torch.nn.functional.cosine_similarity(keys, key_centroids(keys, window), dim=-1, eps=1e-8)


def recency_scores(keys: Tensor) -> Tensor:
    """Keep the most recent positions: score = position index."""
    t = keys.shape[-2]
    return torch.arange(t, dtype=keys.dtype, device=keys.device).expand(keys.shape[:-1])


def random_scores(keys: Tensor, rng: np.random.Generator) -> Tensor:
    """Uniform random keep scores from ``rng`` (seeded eviction baseline)."""
    return torch.as_tensor(rng.random(keys.shape[:-1]), dtype=keys.dtype, device=keys.device)


def keep_mask(scores: Tensor, n_keep: int) -> Tensor:
    """Boolean (..., T): True at the ``n_keep`` highest-scoring positions of each head (ties → earlier index)."""
    t = scores.shape[-1]
    if not 0 <= n_keep <= t:
        raise ValueError(f"n_keep must be in [0, {t}], got {n_keep}")
    idx = scores.topk(n_keep, dim=-1, sorted=False).indices
    return torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, idx, True)
