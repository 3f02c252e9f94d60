"""LLR: the Hill estimator, the α → rate map, and the recompute-and-ramp schedule on optimiser groups."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from policies.aux.training.llr import LayerwiseLR, LLRConfig, alpha_scales, esd_alpha, hill_alpha, linear_weights


@pytest.mark.parametrize("alpha", [2.0, 3.0, 4.5])
def test_hill_recovers_planted_power_law_exponent(alpha: float) -> None:
    rng = np.random.default_rng(int(alpha * 10))
    # Inverse CDF of the Pareto density p(λ) ∝ λ^{-α} on [1, ∞): λ = U^{-1/(α-1)}.
    samples = rng.random(4000) ** (-1.0 / (alpha - 1.0))
    assert hill_alpha(samples) == pytest.approx(alpha, rel=0.10)
    assert hill_alpha(samples, k=400) == pytest.approx(alpha, rel=0.10)


def test_hill_rejects_bad_tail_size() -> None:
    with pytest.raises(ValueError, match="k must be"):
        hill_alpha(np.arange(1.0, 6.0), k=5)


def test_esd_alpha_sees_heavier_tail_in_a_spiked_matrix() -> None:
    gen = torch.Generator().manual_seed(0)
    noise = torch.randn(128, 64, generator=gen) / 8
    spikes = sum(s * torch.outer(torch.randn(128, generator=gen), torch.randn(64, generator=gen)) / 30
                 for s in (8.0, 4.0, 2.0, 1.0))
    assert esd_alpha(noise + spikes) < esd_alpha(noise)


def test_alpha_scales_lighter_tail_gets_larger_rate() -> None:
    scales = alpha_scales([2.0, 4.0, 3.0], r_min=0.5, r_max=1.5)
    np.testing.assert_allclose(scales, [0.5, 1.5, 1.0])
    np.testing.assert_allclose(alpha_scales([3.0, 3.0], 0.5, 1.5), [1.0, 1.0])


def test_schedule_recomputes_every_interval_and_ramps() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 16), nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16))
    assert [n for n, _ in linear_weights(model)] == ["1.weight", "3.weight"]
    llr = LayerwiseLR(model, LLRConfig(r_min=0.5, r_max=1.5, interval=10, ramp=4))
    opt = torch.optim.AdamW(llr.param_groups(0.1), lr=1.0)
    assert len(opt.param_groups) == 3 and opt.param_groups[-1]["weight_decay"] == 0.0
    s0 = llr.apply(opt, 0, 2.0)
    np.testing.assert_allclose(s0, [1.0, 1.0])  # ramp starts at the previous (uniform) scales
    target = alpha_scales(llr.alphas, 0.5, 1.5)
    s2 = llr.apply(opt, 2, 2.0)
    np.testing.assert_allclose(s2, 1.0 + 0.5 * (target - 1.0))
    s4 = llr.apply(opt, 4, 2.0)
    np.testing.assert_allclose(s4, target)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([2.0 * target[0], 2.0 * target[1], 2.0])
    with torch.no_grad():
        model[1].weight.mul_(torch.linspace(0.1, 5.0, 64)[:, None])  # reshape one spectrum before the recompute
    old_alphas = llr.alphas.copy()
    llr.apply(opt, 10, 2.0)
    assert not np.allclose(llr.alphas, old_alphas)
