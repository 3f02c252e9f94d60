"""HAMU: hardness-aware constrained unlearning, one closed-form step per parameter tensor.

For every tensor, with ``g_r`` the gradient of the retain loss and ``g_f`` the gradient of the forget loss (which
unlearning wants to *raise*), the step solves the linearised problem

    minimise  g_r · Δ      subject to   ‖Δ‖ ≤ R,   g_f · Δ ≥ B.

Writing ``g_r = c·ĝ_f + g_⊥`` (``ĝ_f = g_f/‖g_f‖``, ``g_⊥ ⟂ g_f``) and ``b = B/‖g_f‖`` the solution has three cases:

1. ``"retain"``: plain retain descent ``Δ = -R·g_r/‖g_r‖`` already raises the forget loss by ≥ B;
2. ``"boundary"``: both constraints bind, ``Δ = b·ĝ_f - √(R² - b²)·g_⊥/‖g_⊥‖``;
3. ``"infeasible"``: ``B > R‖g_f‖``; the best the ball allows is ``Δ = R·ĝ_f``.

Hardness rule: with ``g_r · Δ ≤ 0`` (no first-order retain damage) the largest forget gain inside the ball is
``R·‖g_f - (g_f·ĝ_r)ĝ_r‖ = R·√(‖g_r‖²‖g_f‖² - (g_r·g_f)²)/‖g_r‖``. A tensor is *hard* when B exceeds it: the
required forgetting cannot be had without hurting the retain loss, and unlearning should stop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

_EPS = 1e-12


@dataclass(frozen=True)
class ConstrainedStep:
    """One tensor's solution: the update, which case produced it, and whether the hardness rule fired."""

    delta: torch.Tensor
    case: str  # "retain" | "boundary" | "infeasible"
    hard: bool


def hardness_bound(g_r: torch.Tensor, g_f: torch.Tensor, radius: float) -> float:
    """Largest forget gain ``g_f·Δ`` reachable with ``‖Δ‖ ≤ radius`` and no first-order retain increase."""
    nr2 = float(g_r.pow(2).sum())
    nf2 = float(g_f.pow(2).sum())
    if nr2 <= _EPS:
        return radius * math.sqrt(nf2)
    dot = float((g_r * g_f).sum())
    return radius * math.sqrt(max(nr2 * nf2 - dot * dot, 0.0) / nr2)


def constrained_step(g_r: torch.Tensor, g_f: torch.Tensor, radius: float, required: float) -> ConstrainedStep:
    """Closed-form minimiser of ``g_r·Δ`` s.t. ``‖Δ‖ ≤ radius`` and ``g_f·Δ ≥ required`` (see module docstring)."""
    if radius <= 0:
        raise ValueError(f"radius must be > 0, got {radius}")
    hard = required > hardness_bound(g_r, g_f, radius)
    nf = float(g_f.norm())
    nr = float(g_r.norm())
    if nf <= _EPS:  # the forget loss is flat here: only retain descent is possible
        delta = -radius * g_r / nr if nr > _EPS else torch.zeros_like(g_r)
        return ConstrainedStep(delta, "infeasible" if required > 0 else "retain", hard)
    if nr > _EPS:
        descent = -radius * g_r / nr
        if float((g_f * descent).sum()) >= required:
            return ConstrainedStep(descent, "retain", hard)
    f_hat = g_f / nf
    b = required / nf
    if b > radius:
        return ConstrainedStep(radius * f_hat, "infeasible", hard)
    g_perp = g_r - (g_r * f_hat).sum() * f_hat
    np_ = float(g_perp.norm())
    side = -math.sqrt(max(radius * radius - b * b, 0.0)) * g_perp / np_ if np_ > _EPS else torch.zeros_like(g_r)
    return ConstrainedStep(b * f_hat + side, "boundary", hard)


@dataclass(frozen=True)
class HamuConfig:
    """Per-step budgets: radius ``R = radius_ratio·‖W‖`` per tensor, required gain ``B = gain_ratio·R·‖g_f‖``.

    With ``B`` a fraction of the largest gain the ball allows, the hardness rule reads ``sin∠(g_r, g_f) <
    gain_ratio``: forget and retain gradients so aligned that forgetting drags the retain loss along.
    """

    radius_ratio: float = 0.01
    gain_ratio: float = 0.5
    hard_fraction: float = 0.5  # stop when at least this fraction of tensors is hard at one step


def hamu_step(
    model: nn.Module,
    retain_loss: Callable[[], torch.Tensor],
    forget_loss: Callable[[], torch.Tensor],
    config: HamuConfig,
) -> tuple[bool, dict[str, int]]:
    """Apply one HAMU update to every trainable tensor of ``model`` in place.

    Returns ``(stop, counts)``: ``stop`` is True when the hardness rule fired in at least ``config.hard_fraction`` of
    the tensors (the update is then *not* applied); ``counts`` tallies the cases and hard tensors.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    g_r = torch.autograd.grad(retain_loss(), params)
    g_f = torch.autograd.grad(forget_loss(), params)
    steps = []
    counts = {"retain": 0, "boundary": 0, "infeasible": 0, "hard": 0, "tensors": len(params)}
    for p, gr, gf in zip(params, g_r, g_f, strict=True):
        radius = config.radius_ratio * max(float(p.detach().norm()), 1e-3)
        required = config.gain_ratio * radius * float(gf.norm())
        step = constrained_step(gr, gf, radius, required)
        counts[step.case] += 1
        counts["hard"] += int(step.hard)
        steps.append(step)
    stop = counts["hard"] >= config.hard_fraction * len(params)
    if not stop:
        with torch.no_grad():
            for p, step in zip(params, steps, strict=True):
                p.add_(step.delta)
    return stop, counts
