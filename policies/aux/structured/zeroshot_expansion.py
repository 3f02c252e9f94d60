"""Zero-shot classifier expansion: map class semantics to classifier weights, granularity-aware, with interventions.

A classifier over image features ``f`` scores class c by ``f · w_c``; a zero-shot model predicts ``w_c`` from the
class's semantics so that unseen classes get weights too. The granularity-aware variant:

1. *Multi-source semantics with interventions*: each class has several descriptions (sources), each rendered under
   several nuisance contexts (setting, light, wording that says nothing about the class). The class semantics
   ``s_c`` is the mean over all of them; the per-intervention embeddings ``s_c^k`` feed an invariance penalty.
2. *Granularity clustering*: classes (seen and unseen) are clustered on ``s_c``; classes sharing a cluster are
   "similar", the others "distinct".
3. *Granularity-specific maps*: ``w_c = A s̄_g(c) + B (s_c - s̄_g(c))`` — a coarse map A of the cluster centroid
   separates distinct classes, a fine map B of the within-cluster residual separates similar ones. The residuals
   are re-scaled by one common factor (their root-mean-square norm over the classes), so the fine map starts on the
   coarse map's footing without changing how far apart two classes' residuals are relative to the others'.
   Re-scaling each residual to unit norm instead (``residual_norm="unit"``, kept for comparison) amplifies the
   wording noise of a class that sits near its cluster's centroid into a full-size direction. Training
   minimises cross-entropy over seen classes plus a within-cluster cross-entropy and
   ``lambda * mean_k ||W(s_c^k) - W(s_c)||^2`` (the weights must not move when only a nuisance part changes).

The baseline is one shared map ``w_c = M s_c`` trained with the same cross-entropy.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def kmeans(x: np.ndarray, k: int, rng: np.random.Generator, iters: int = 50) -> np.ndarray:
    """Cluster rows of ``x`` (cosine geometry: rows are unit-normalised first) into ``k`` groups; returns labels."""
    z = x / np.linalg.norm(x, axis=1, keepdims=True)
    centres = z[rng.choice(len(z), k, replace=False)]
    labels = np.zeros(len(z), dtype=np.int64)
    for _ in range(iters):
        labels = np.argmax(z @ centres.T, axis=1)
        new = np.stack([z[labels == j].mean(0) if (labels == j).any() else centres[j] for j in range(k)])
        new /= np.linalg.norm(new, axis=1, keepdims=True)
        if np.allclose(new, centres):
            break
        centres = new
    return labels


RESIDUAL_NORMS = ("global", "unit")


def granularity_parts(semantics: torch.Tensor, clusters: torch.Tensor,
                      residual_norm: str = "global") -> tuple[torch.Tensor, torch.Tensor]:
    """Split class semantics [C, D] into (cluster centroid, re-scaled within-cluster residual), each [C, D].

    ``residual_norm``: ``"global"`` divides every residual by the root-mean-square norm of the non-zero residuals
    (one factor for all classes: their relative sizes are kept); ``"unit"`` scales each residual to unit norm.
    A singleton cluster's residual stays zero either way.
    """
    if residual_norm not in RESIDUAL_NORMS:
        raise ValueError(f"residual_norm {residual_norm!r} is not one of {RESIDUAL_NORMS}")
    centroid = torch.zeros_like(semantics)
    for g in clusters.unique():
        mask = clusters == g
        centroid[mask] = semantics[mask].mean(0)
    residual = semantics - centroid
    norm = residual.norm(dim=-1, keepdim=True)
    if residual_norm == "unit":
        return centroid, torch.where(norm > 1e-8, residual / norm.clamp_min(1e-8), residual)
    nonzero = norm[norm > 1e-8]
    rms = nonzero.pow(2).mean().sqrt() if nonzero.numel() else torch.tensor(1.0)
    return centroid, residual / rms


class SharedMap(nn.Module):
    """Baseline: one linear map from class semantics to classifier weights, ``w_c = M s_c``."""

    def __init__(self, sem_dim: int, feat_dim: int) -> None:
        super().__init__()
        self.map = nn.Linear(sem_dim, feat_dim, bias=False)

    def weights(self, semantics: torch.Tensor, clusters: torch.Tensor | None = None) -> torch.Tensor:
        """Classifier weights [C, F] of classes with semantics [C, D] (``clusters`` unused)."""
        return self.map(semantics)


class GranularityMap(nn.Module):
    """``w_c = A centroid_g(c) + B residual_c`` (see the module docstring; ``residual_norm`` as in
    :func:`granularity_parts`)."""

    def __init__(self, sem_dim: int, feat_dim: int, residual_norm: str = "global") -> None:
        super().__init__()
        if residual_norm not in RESIDUAL_NORMS:
            raise ValueError(f"residual_norm {residual_norm!r} is not one of {RESIDUAL_NORMS}")
        self.residual_norm = residual_norm
        self.coarse = nn.Linear(sem_dim, feat_dim, bias=False)
        self.fine = nn.Linear(sem_dim, feat_dim, bias=False)

    def weights(self, semantics: torch.Tensor, clusters: torch.Tensor) -> torch.Tensor:
        """Classifier weights [C, F] of classes with semantics [C, D] and cluster labels [C]."""
        centroid, residual = granularity_parts(semantics, clusters, self.residual_norm)
        return self.coarse(centroid) + self.fine(residual)


def train_map(model: nn.Module, feats: torch.Tensor, labels: torch.Tensor, semantics: torch.Tensor,
              clusters: torch.Tensor, seen: torch.Tensor, interventions: torch.Tensor | None, steps: int, seed: int,
              invariance: float = 1.0, within_cluster: float = 1.0, weight_decay: float = 1e-4,
              scale: float = 10.0) -> nn.Module:
    """Fit a semantics→weights map on seen classes.

    Args:
        feats: unit-norm image features [N, F] of seen-class images; labels [N] are positions in ``seen``.
        semantics: [C, D] semantics of all classes (seen and unseen names are known); clusters: [C] labels.
        seen: indices [S] of the seen classes in ``semantics``.
        interventions: [K, C, D] per-intervention semantics for the invariance penalty, or None (no penalty).
        within_cluster: weight of the extra cross-entropy among the true class's cluster members only
            (granularity-aware training; 0 for the baseline).
        scale: logit temperature for unit-norm features and weights.
    """
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=weight_decay)
    seen_clusters = clusters[seen]
    same = seen_clusters[labels][:, None] == seen_clusters[None, :]  # [N, S]: class shares the true class's cluster
    for _ in range(steps):
        raw = model.weights(semantics, clusters)
        logits = scale * feats @ nn.functional.normalize(raw[seen], dim=-1).T
        loss = nn.functional.cross_entropy(logits, labels)
        if within_cluster > 0:
            loss = loss + within_cluster * nn.functional.cross_entropy(logits.masked_fill(~same, -1e4), labels)
        if interventions is not None and invariance > 0:
            moved = torch.stack([model.weights(s_k, clusters)[seen] for s_k in interventions])
            drift = ((moved - raw[seen]) ** 2).sum(-1).mean()  # relative to the weights' own size
            loss = loss + invariance * drift / raw[seen].pow(2).sum(-1).mean().detach()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def class_scores(model: nn.Module, feats: torch.Tensor, semantics: torch.Tensor, clusters: torch.Tensor,
                 scale: float = 10.0) -> torch.Tensor:
    """Cosine logits [N, C] of image features against every class's predicted weights."""
    with torch.no_grad():
        w = nn.functional.normalize(model.weights(semantics, clusters), dim=-1)
        return scale * feats @ w.T


def harmonic_mean(seen_acc: float, unseen_acc: float) -> float:
    """Generalised zero-shot harmonic mean ``2 S U / (S + U)`` (0 when both are 0)."""
    return 0.0 if seen_acc + unseen_acc == 0 else 2 * seen_acc * unseen_acc / (seen_acc + unseen_acc)
