"""ObGD and AdaptiveObGD against hand-computed updates, in both regimes of the overshooting bound."""

import numpy as np
import pytest
import torch

from policies.streaming.obgd import AdaptiveObGD, ObGD


def test_trace_decays_and_accumulates():
    p = torch.zeros(3)
    opt = ObGD(p, gamma=0.9, lam=0.5)
    g1, g2 = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.0, 1.0, 1.0])
    opt.accumulate(g1)
    opt.accumulate(g2)
    assert torch.allclose(opt.trace, 0.45 * g1 + g2)
    opt.reset_traces()
    assert torch.count_nonzero(opt.trace) == 0


def test_small_trace_takes_the_plain_step():
    # M = α κ max(|δ|,1) ‖z‖₁ = 1·2·1·0.3 = 0.6 < 1 → θ += α δ z
    p = torch.zeros(3)
    opt = ObGD(p, lr=1.0, kappa=2.0)
    opt.accumulate(torch.tensor([0.1, -0.1, 0.1]))
    scale = opt.step(0.5)
    assert scale == pytest.approx(0.5)
    assert torch.allclose(p, torch.tensor([0.05, -0.05, 0.05]))


def test_large_trace_is_bounded():
    # ‖z‖₁ = 6, δ = 3 → M = 1·2·3·6 = 36 → θ += (1/36)·3·z
    p = torch.ones(3)
    opt = ObGD(p, lr=1.0, kappa=2.0)
    z = torch.tensor([1.0, -2.0, 3.0])
    opt.accumulate(z)
    opt.step(3.0)
    assert torch.allclose(p, 1.0 + 3.0 / 36.0 * z)
    # the bound: the step's effect on f (≈ δ·step·‖z‖²/…) never exceeds δ — here |step·δ|·‖z‖₁ ≤ |δ|/κ
    assert abs(3.0 / 36.0) * 6.0 <= 3.0 / 2.0 + 1e-9


def test_rejects_non_flat_parameters():
    with pytest.raises(ValueError, match="flat"):
        ObGD(torch.zeros(2, 2))


def test_adaptive_obgd_matches_numpy():
    rng = np.random.default_rng(0)
    p = torch.zeros(4, dtype=torch.float64)
    opt = AdaptiveObGD(p, lr=1.0, gamma=0.99, lam=0.8, kappa=2.0, beta2=0.999, eps=1e-8)
    theta, z, v = np.zeros(4), np.zeros(4), np.zeros(4)
    for t in range(1, 6):
        g = rng.normal(size=4)
        delta = float(rng.normal() * 2)
        opt.accumulate(torch.from_numpy(g))
        opt.step(delta)
        z = 0.99 * 0.8 * z + g
        v = 0.999 * v + 0.001 * (delta * z) ** 2
        zhat = z / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        m = 2.0 * max(abs(delta), 1.0) * np.abs(zhat).sum()
        theta = theta + (1.0 / max(m, 1.0)) * delta * zhat
    assert np.allclose(p.numpy(), theta)
    state = opt.state_dict()
    other = AdaptiveObGD(torch.zeros(4, dtype=torch.float64))
    other.load_state_dict(state)
    assert other.t == 5 and torch.equal(other.v, opt.v) and torch.equal(other.trace, opt.trace)
