"""Self-predictive representation (SPR) heads for streaming agents, and the two gradient projections.

Modules: a transition model h(z, a) on the encoder's spatial latent, a projection g and a predictor q; the
target encoder/projection are EMA copies (no gradient). Projections: the per-module *momentum* projection
(remove from the SPR gradient its component along a running average of earlier projected gradients) and the
*RL-orthogonal* projection of the encoder's SPR step against the encoder's RL update Δ_RL.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from policies.streaming.kernels import momentum_project_


class TransitionModel(nn.Module):
    """ẑ' = h(ẑ, a): action one-hot planes concatenated to the latent, two 3×3 convs keeping its shape, each
    followed by an affine-free LayerNorm and LeakyReLU."""

    def __init__(self, latent_shape: tuple[int, int, int], n_actions: int) -> None:
        super().__init__()
        c = latent_shape[0]
        self.n_actions = n_actions
        self.conv1 = nn.Conv2d(c + n_actions, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.register_buffer("eye", torch.eye(n_actions), persistent=False)

    def forward(self, z: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        b, _, h, w = z.shape
        planes = self.eye[action.long()].view(b, self.n_actions, 1, 1)
        x = torch.cat([z, planes.expand(b, self.n_actions, h, w)], dim=1)
        # functional calls on the modules' weights: skips per-module call overhead at batch 1
        x = F.conv2d(x, self.conv1.weight, self.conv1.bias, 1, 1)
        x = F.leaky_relu(torch.layer_norm(x, x.shape[1:]), 0.01)
        x = F.conv2d(x, self.conv2.weight, self.conv2.bias, 1, 1)
        return F.leaky_relu(torch.layer_norm(x, x.shape[1:]), 0.01)


class Projection(nn.Module):
    """g: flattened latent → ``dim`` (LayerNorm, LeakyReLU)."""

    def __init__(self, latent_shape: tuple[int, int, int], dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(math.prod(latent_shape), dim)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = F.linear(z.flatten(1), self.fc.weight, self.fc.bias)
        return F.leaky_relu(torch.layer_norm(x, x.shape[1:]), 0.01)


def make_predictor(dim: int) -> nn.Linear:
    """q: a linear map on the projected latent (the asymmetry that keeps SPR from collapsing)."""
    return nn.Linear(dim, dim)


def ema_copy(module: nn.Module) -> nn.Module:
    """A frozen copy of ``module`` to be tracked with :func:`ema_update_`."""
    target = copy.deepcopy(module)
    for p in target.parameters():
        p.requires_grad_(False)
    return target


def ema_update_(target: Sequence[torch.Tensor], online: Sequence[torch.Tensor], tau: float) -> None:
    """θ̄ ← τ θ̄ + (1 − τ) θ, in place."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target), list(online), 1.0 - tau)


def spr_loss(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Σ_k −cos(prediction_k, target_k) over the K predicted steps (rows)."""
    return -F.cosine_similarity(predictions, targets.detach(), dim=1).sum()


def momentum_project(g: torch.Tensor, c: torch.Tensor, beta: float, eps: float = 1e-12) -> torch.Tensor:
    """u = g − (⟨g,c⟩/(‖c‖²+ε)) c, then c ← β c + (1−β) u in place; returns u (flat tensors, one fused kernel)."""
    u = torch.empty_like(g)
    momentum_project_(g.detach().contiguous().numpy(), c.numpy(), beta, eps, u.numpy())
    return u


def project_orthogonal(v: torch.Tensor, d: torch.Tensor, eps: float = 1e-30) -> torch.Tensor:
    """v⊥ = v − (⟨v,d⟩/‖d‖²) d; returns v unchanged when d is zero."""
    dd = torch.dot(d, d)
    if float(dd) <= eps:
        return v
    return v - (torch.dot(v, d) / dd) * d


def pcgrad_project(v: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """PCGrad: remove v's component along d only when they conflict (⟨v,d⟩ < 0)."""
    if float(torch.dot(v, d)) < 0.0:
        return project_orthogonal(v, d)
    return v
