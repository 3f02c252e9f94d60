"""Formula-level checks of contextual curvature, next-token entropy, the straightness regulariser and the
perturbation directions."""

import math

import pytest
import torch

from policies.aux.lm_geometry.curvature import (
    curvature,
    next_token_entropy,
    perturbation_directions,
    straightness_loss,
    turning_angles,
)


def test_turning_angles_of_line_square_and_reversal():
    line = torch.arange(5, dtype=torch.float32)[:, None] * torch.tensor([1.0, 2.0, 0.5])
    theta = turning_angles(line)
    assert torch.isnan(theta[:2]).all()
    assert torch.allclose(theta[2:], torch.zeros(3), atol=2e-3)  # clamp keeps arccos(1) at ~1.4e-3
    square = torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    assert torch.allclose(turning_angles(square)[2:], torch.full((3,), math.pi / 2), atol=1e-5)
    back = torch.tensor([[0.0], [1.0], [0.0]])
    assert turning_angles(back)[2].item() == pytest.approx(math.pi, abs=2e-3)


def test_turning_angle_uses_only_past_positions():
    h = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    theta = turning_angles(h)
    h2 = h.clone()
    h2[7:] += 5.0  # changing the future must not change angles at t ≤ 6
    assert torch.allclose(turning_angles(h2)[2:7], theta[2:7])


def test_curvature_is_mean_of_last_k_angles():
    h = torch.randn(2, 12, 5, generator=torch.Generator().manual_seed(1))
    k = 3
    theta = turning_angles(h)
    c = curvature(h, k)
    assert c.shape == (2, 12)
    assert torch.isnan(c[:, :k + 1]).all()
    for t in range(k + 1, 12):
        assert torch.allclose(c[:, t], theta[:, t - k + 1:t + 1].mean(-1), atol=1e-6)
    assert torch.allclose(curvature(h, 1)[:, 2:], theta[:, 2:])
    with pytest.raises(ValueError, match="k must be"):
        curvature(h, 0)


def test_curvature_of_too_short_trajectory_is_undefined():
    assert torch.isnan(curvature(torch.randn(4, 3), k=5)).all()
    with pytest.raises(ValueError, match="at least 3"):
        turning_angles(torch.randn(2, 3))


def test_next_token_entropy():
    assert next_token_entropy(torch.zeros(3, 7)).tolist() == pytest.approx([math.log(7)] * 3, abs=1e-6)
    peaked = torch.tensor([100.0, 0.0, 0.0])
    assert next_token_entropy(peaked).item() == pytest.approx(0.0, abs=1e-6)
    two = torch.tensor([0.0, 0.0, -1e4])
    assert next_token_entropy(two).item() == pytest.approx(math.log(2), abs=1e-6)


def test_straightness_loss_is_zero_on_lines_and_its_gradient_straightens():
    line = torch.linspace(0, 1, 8)[:, None] * torch.ones(1, 3)
    assert straightness_loss([line], lam=1.0).item() == pytest.approx(0.0, abs=2e-3)
    zig = torch.randn(1, 8, 3, generator=torch.Generator().manual_seed(2)).requires_grad_(True)
    before = straightness_loss([zig], lam=0.5)
    assert before.item() == pytest.approx(0.5 * turning_angles(zig)[..., 2:].mean().item(), rel=1e-6)
    before.backward()
    with torch.no_grad():
        stepped = zig - 0.05 * zig.grad
    assert straightness_loss([stepped], lam=0.5) < before
    with pytest.raises(ValueError, match="at least one layer"):
        straightness_loss([], lam=1.0)


def test_perturbation_directions_are_unit_aligned_and_orthogonal():
    h = torch.randn(20, 16, generator=torch.Generator().manual_seed(3))
    pos = torch.tensor([2, 5, 19])
    aligned, mis = perturbation_directions(h, pos, torch.Generator().manual_seed(4))
    v_now, v_prev = h[pos] - h[pos - 1], h[pos - 1] - h[pos - 2]
    assert torch.allclose(aligned.norm(dim=-1), torch.ones(3), atol=1e-5)
    assert torch.allclose(mis.norm(dim=-1), torch.ones(3), atol=1e-5)
    assert torch.allclose((aligned * v_now).sum(-1), v_now.norm(dim=-1), atol=1e-4)
    assert (mis * v_now).sum(-1).abs().max() < 1e-4
    assert (mis * v_prev).sum(-1).abs().max() < 1e-4
    again = perturbation_directions(h, pos, torch.Generator().manual_seed(4))[1]
    assert torch.equal(mis, again)
    with pytest.raises(ValueError, match="positions"):
        perturbation_directions(h, torch.tensor([1]), torch.Generator())
    with pytest.raises(ValueError, match=r"\(T, d\)"):
        perturbation_directions(h[None], pos, torch.Generator())
