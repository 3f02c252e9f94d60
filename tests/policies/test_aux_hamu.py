"""HAMU's closed-form constrained step: feasibility, optimality against a projected-gradient solver, hardness rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from policies.aux.training.hamu import HamuConfig, constrained_step, hamu_step, hardness_bound


def _project(x: np.ndarray, g_f: np.ndarray, radius: float, required: float) -> np.ndarray:
    """Euclidean projection onto {‖x‖ ≤ R} ∩ {g_f·x ≥ B} by Dykstra's alternating projections."""
    p = np.zeros_like(x)
    q = np.zeros_like(x)
    y = x.copy()
    for _ in range(100):
        z = y + p
        ball = z * min(1.0, radius / max(float(np.linalg.norm(z)), 1e-12))
        p = z - ball
        w = ball + q
        half = w + max(required - float(g_f @ w), 0.0) * g_f / float(g_f @ g_f)
        q = w - half
        y = half
    return y


def _projected_gradient(g_r: np.ndarray, g_f: np.ndarray, radius: float, required: float) -> np.ndarray:
    x = _project(np.zeros_like(g_r), g_f, radius, required)
    for _ in range(300):
        x = _project(x - 0.05 * radius * g_r / np.linalg.norm(g_r), g_f, radius, required)
    return x


@pytest.mark.parametrize("seed", range(6))
def test_closed_form_is_feasible_and_matches_projected_gradient(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    g_r = torch.randn(5, generator=gen, dtype=torch.float64)
    g_f = torch.randn(5, generator=gen, dtype=torch.float64)
    radius = 0.7
    required = 0.6 * radius * float(g_f.norm())  # feasible: below the largest reachable gain R‖g_f‖
    step = constrained_step(g_r, g_f, radius, required)
    assert float(step.delta.norm()) <= radius + 1e-9
    assert float(g_f @ step.delta) >= required - 1e-9
    reference = _projected_gradient(g_r.numpy(), g_f.numpy(), radius, required)
    assert float(g_r @ step.delta) <= float(g_r.numpy() @ reference) + 1e-6
    np.testing.assert_allclose(step.delta.numpy(), reference, atol=2e-3)


def test_three_cases() -> None:
    g_f = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    # Retain descent itself raises the forget loss enough: g_r points against g_f.
    retain = constrained_step(torch.tensor([-1.0, 0.2, 0.0], dtype=torch.float64), g_f, 1.0, 0.5)
    assert retain.case == "retain"
    assert torch.allclose(retain.delta, torch.tensor([1.0, -0.2, 0.0], dtype=torch.float64) / math.sqrt(1.04))
    # Orthogonal gradients: the forget constraint binds, the rest of the radius goes to retain descent.
    boundary = constrained_step(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64), g_f, 1.0, 0.6)
    assert boundary.case == "boundary"
    assert torch.allclose(boundary.delta, torch.tensor([0.6, -0.8, 0.0], dtype=torch.float64))
    # Required gain beyond R‖g_f‖: the best the ball allows is along g_f.
    infeasible = constrained_step(torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64), g_f, 1.0, 1.5)
    assert infeasible.case == "infeasible"
    assert torch.allclose(infeasible.delta, g_f)


@pytest.mark.parametrize("seed", range(20))
def test_hardness_rule_iff_retain_loss_must_rise(seed: int) -> None:
    """The rule fires exactly when the optimal feasible step increases the retain loss to first order."""
    gen = torch.Generator().manual_seed(100 + seed)
    g_r = torch.randn(4, generator=gen, dtype=torch.float64)
    g_f = torch.randn(4, generator=gen, dtype=torch.float64)
    radius = 1.0
    required = float(torch.rand(1, generator=gen)) * radius * float(g_f.norm())
    step = constrained_step(g_r, g_f, radius, required)
    assert step.hard == (float(g_r @ step.delta) > 1e-12)


def test_hardness_bound_formula() -> None:
    g_r = torch.tensor([3.0, 0.0])
    g_f = torch.tensor([1.0, 2.0])
    # Component of g_f orthogonal to g_r is (0, 2): the bound is R·2.
    assert hardness_bound(g_r, g_f, 0.5) == pytest.approx(1.0)


def test_hamu_step_raises_forget_loss_and_stops_when_aligned() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 3, bias=False)
    x_r, t_r, x_f, t_f = torch.randn(16, 4), torch.randn(16, 3), torch.randn(16, 4), torch.randn(16, 3)

    def retain() -> torch.Tensor:
        return (model(x_r) - t_r).pow(2).mean()

    def forget() -> torch.Tensor:
        return (model(x_f) - t_f).pow(2).mean()

    before = float(forget().detach())
    stop, counts = hamu_step(model, retain, forget, HamuConfig(radius_ratio=0.05))
    assert not stop and counts["tensors"] == 1 and counts["hard"] == 0
    assert float(forget().detach()) > before
    # Identical retain and forget losses: no forgetting is possible without retain damage, so the rule fires and
    # the update is withheld.
    weights = model.weight.detach().clone()
    stop, counts = hamu_step(model, forget, forget, HamuConfig())
    assert stop and counts["hard"] == 1
    assert torch.equal(model.weight, weights)
