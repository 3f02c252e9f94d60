"""SPR heads and the gradient projections."""

import pytest
import torch

from policies.streaming.spr import (
    Projection,
    TransitionModel,
    ema_copy,
    ema_update_,
    make_predictor,
    momentum_project,
    pcgrad_project,
    project_orthogonal,
    spr_loss,
)


def test_rl_orthogonal_projection_removes_the_rl_direction():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(1000, generator=g, dtype=torch.float64)
    d = torch.randn(1000, generator=g, dtype=torch.float64)
    v_perp = project_orthogonal(v, d)
    assert abs(float(torch.dot(v_perp, d))) < 1e-10 * float(v.norm() * d.norm())
    # what is left is v minus its d-component: projecting again changes nothing
    assert torch.allclose(project_orthogonal(v_perp, d), v_perp)
    assert torch.equal(project_orthogonal(v, torch.zeros(1000, dtype=torch.float64)), v)


def test_pcgrad_projects_only_on_conflict():
    d = torch.tensor([1.0, 0.0])
    agree = torch.tensor([1.0, 1.0])
    conflict = torch.tensor([-1.0, 1.0])
    assert torch.equal(pcgrad_project(agree, d), agree)
    assert torch.allclose(pcgrad_project(conflict, d), torch.tensor([0.0, 1.0]))


def test_momentum_recursion():
    gen = torch.Generator().manual_seed(1)
    c = torch.zeros(5, dtype=torch.float64)
    c_ref = torch.zeros(5, dtype=torch.float64)
    for _ in range(10):
        grad = torch.randn(5, generator=gen, dtype=torch.float64)
        u = momentum_project(grad, c, beta=0.9)
        u_ref = grad - (grad @ c_ref) / (c_ref @ c_ref + 1e-12) * c_ref
        c_ref = 0.9 * c_ref + 0.1 * u_ref
        assert torch.allclose(u, u_ref) and torch.allclose(c, c_ref)
    # u is orthogonal to the buffer it was projected against (c before its update)
    c_before = c.clone()
    grad = torch.randn(5, generator=gen, dtype=torch.float64)
    u = momentum_project(grad, c, beta=0.9)
    assert abs(float(u @ c_before)) < 1e-9


def test_transition_projection_predictor_shapes_and_action_dependence():
    h = TransitionModel((16, 8, 8), n_actions=3)
    z = torch.randn(2, 16, 8, 8)
    out0 = h(z, torch.tensor([0, 0]))
    out1 = h(z, torch.tensor([1, 1]))
    assert out0.shape == (2, 16, 8, 8)
    assert not torch.allclose(out0, out1)
    g = Projection((16, 8, 8), 128)
    q = make_predictor(128)
    assert q(g(out0)).shape == (2, 128)


def test_spr_loss_is_minus_k_for_aligned_targets_and_blocks_target_gradient():
    pred = torch.randn(5, 8, requires_grad=True)
    target = (pred.detach() * 3.0).requires_grad_(True)
    loss = spr_loss(pred, target)
    assert float(loss) == pytest.approx(-5.0, abs=1e-5)
    loss.backward()
    assert target.grad is None


def test_ema_update():
    online = Projection((2, 2, 2), 4)
    target = ema_copy(online)
    assert all(not p.requires_grad for p in target.parameters())
    with torch.no_grad():
        for p in online.parameters():
            p.add_(1.0)
    before = [p.clone() for p in target.parameters()]
    ema_update_(list(target.parameters()), list(online.parameters()), tau=0.99)
    for b, t, o in zip(before, target.parameters(), online.parameters(), strict=True):
        assert torch.allclose(t, 0.99 * b + 0.01 * o)
