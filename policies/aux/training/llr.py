"""LLR: layer-wise learning rates from the heavy-tailedness of each weight matrix's spectrum.

For every linear weight ``W`` the empirical spectral density (ESD) is the set of eigenvalues of ``WᵀW`` (squared
singular values). Its upper tail is fitted by a power law ``p(λ) ∝ λ^{-α}`` with the Hill estimator over the ``k``
largest eigenvalues, ``α = 1 + k / Σ_{i≤k} ln(λ_i / λ_{k+1})``. A heavier tail (small α) marks a layer that has
already learned much structure; a lighter tail (large α) one that is under-trained, so it gets a larger rate:

    scale_l = r_min + (r_max - r_min) · (α_l - min α) / (max α - min α),      lr_l = scale_l · η(t).

The scales are recomputed every ``interval`` steps and each layer's scale moves linearly from its old to its new
value over ``ramp`` steps, so a recomputation never jolts the optimiser. Parameters that are not linear weights
(embeddings, norms, biases) keep the plain rate η(t).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


def hill_alpha(eigenvalues: np.ndarray | torch.Tensor, k: int | None = None) -> float:
    """Hill estimate of the power-law density exponent α of the largest ``k`` values (default: half of them)."""
    lam = np.sort(np.asarray(eigenvalues, dtype=np.float64).ravel())[::-1]
    lam = lam[lam > 0]
    if lam.size < 3:
        raise ValueError(f"need at least 3 positive eigenvalues, got {lam.size}")
    k = max(1, lam.size // 2) if k is None else int(k)
    if not 1 <= k < lam.size:
        raise ValueError(f"k must be in [1, {lam.size - 1}], got {k}")
    logs = np.log(lam[:k] / lam[k])
    return 1.0 + k / max(float(logs.sum()), 1e-12)


def esd_alpha(weight: torch.Tensor, k: int | None = None) -> float:
    """Hill α of the ESD of a 2-D weight (eigenvalues of ``WᵀW`` = squared singular values)."""
    sv = torch.linalg.svdvals(weight.detach().float())
    return hill_alpha(sv.pow(2).cpu().numpy(), k)


def alpha_scales(alphas: Iterable[float], r_min: float, r_max: float) -> np.ndarray:
    """Map α linearly onto ``[r_min, r_max]`` (largest α → r_max); all-equal α gives the midpoint."""
    a = np.asarray(list(alphas), dtype=np.float64)
    span = a.max() - a.min()
    if span <= 1e-12:
        return np.full(a.shape, 0.5 * (r_min + r_max))
    return r_min + (r_max - r_min) * (a - a.min()) / span


@dataclass(frozen=True)
class LLRConfig:
    """Rate range (as multiples of the base rate), recomputation interval and ramp length in steps."""

    r_min: float = 0.5
    r_max: float = 1.5
    interval: int = 100
    ramp: int = 50
    k: int | None = None  # Hill tail size; None = half the spectrum


def linear_weights(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """Every 2-D weight that multiplies activations: ``Linear`` weights and fused attention input projections."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    return [(n, p) for n, p in model.named_parameters() if p.ndim == 2 and id(p) not in embeddings]


class LayerwiseLR:
    """Holds one optimiser parameter group per linear weight and keeps their rates at ``scale_l · η(t)``.

    Build the optimiser from :meth:`param_groups`, then call :meth:`apply(step, base_lr)` before every optimiser
    step instead of setting the rate yourself.
    """

    def __init__(self, model: nn.Module, config: LLRConfig) -> None:
        self.config = config
        self.named = linear_weights(model)
        if not self.named:
            raise ValueError("model has no 2-D weights to schedule")
        ids = {id(p) for _, p in self.named}
        self.others = [p for p in model.parameters() if id(p) not in ids]
        n = len(self.named)
        self._from = np.ones(n)
        self._to = np.ones(n)
        self._since = 0
        self.alphas = np.full(n, math.nan)

    def param_groups(self, weight_decay: float = 0.0) -> list[dict]:
        """Groups for a torch optimiser: one per linear weight (decayed), one for everything else (not decayed)."""
        groups = [{"params": [p], "name": n, "weight_decay": weight_decay} for n, p in self.named]
        if self.others:
            groups.append({"params": self.others, "name": "other", "weight_decay": 0.0})
        return groups

    def scales(self, step: int) -> np.ndarray:
        """Current per-layer multipliers, recomputing α every ``interval`` steps and ramping to the new targets."""
        cfg = self.config
        if step % cfg.interval == 0:
            self._from = self._current(step)
            self.alphas = np.array([esd_alpha(p, cfg.k) for _, p in self.named])
            self._to = alpha_scales(self.alphas, cfg.r_min, cfg.r_max)
            self._since = step
        return self._current(step)

    def _current(self, step: int) -> np.ndarray:
        frac = 1.0 if self.config.ramp <= 0 else min(1.0, (step - self._since) / self.config.ramp)
        return self._from + frac * (self._to - self._from)

    def apply(self, optimizer: torch.optim.Optimizer, step: int, base_lr: float) -> np.ndarray:
        """Set every group's rate for this step (groups in :meth:`param_groups` order); returns the layer scales."""
        s = self.scales(step)
        for i, group in enumerate(optimizer.param_groups):
            group["lr"] = base_lr * (float(s[i]) if i < len(s) else 1.0)
        return s
