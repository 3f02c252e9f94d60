"""DMANet: the frequency-domain down/up-sampling formulas, RevIN, folded energy and the model's shapes."""

import math

import pytest
import torch

from policies.aux.structured.dmanet import (
    DMANet,
    LinearForecaster,
    RevIN,
    folded_energy,
    spectral_downsample,
    spectral_upsample,
)

T = torch.arange(96, dtype=torch.float64)


def tone(freq: float) -> torch.Tensor:
    return torch.sin(2 * math.pi * freq * T + 0.3)


def test_full_high_mix_is_strided_decimation():
    x = torch.randn(2, 3, 96, dtype=torch.float64)
    assert torch.allclose(spectral_downsample(x, 4, 1.0), x[..., ::4], atol=1e-10)


def test_zero_high_mix_removes_a_tone_above_the_new_nyquist_and_keeps_one_below():
    high, low = tone(29 / 96), tone(3 / 96)  # 0.30 cycles/step (on a bin) is above the factor-4 Nyquist 0.125
    assert spectral_downsample(high, 4, 0.0).abs().max() < 1e-9
    assert torch.allclose(spectral_downsample(low, 4, 0.0), low[::4], atol=1e-9)
    # Strided decimation folds the same tone onto a slow oscillation of full amplitude.
    assert high[::4].abs().max() > 0.5


def test_spectral_upsample_interpolates_a_band_limited_signal_exactly():
    low = tone(5 / 96)
    assert torch.allclose(spectral_upsample(low[::4], 96), low, atol=1e-9)


def test_folded_energy_is_zero_without_high_band_and_the_high_share_with_it():
    x = (tone(2 / 96) + 0.5 * tone(30 / 96)).reshape(1, 96)
    assert float(folded_energy(x, 4, 0.0)) == pytest.approx(0.0, abs=1e-12)
    assert float(folded_energy(x, 4, 1.0)) == pytest.approx(0.25 / 1.25, rel=1e-6)
    assert float(folded_energy(x, 4, 0.5)) == pytest.approx(0.25 * 0.25 / 1.25, rel=1e-6)


def test_revin_round_trip():
    revin = RevIN(3)
    x = torch.randn(4, 96, 3) * 5 + 2
    z, stats = revin.normalise(x)
    assert torch.allclose(z.mean(1), torch.zeros(4, 3), atol=1e-5)
    assert torch.allclose(revin.denormalise(z, stats), x, atol=1e-4)


def test_models_shapes_and_learned_mix_gets_gradient():
    torch.manual_seed(0)
    x = torch.randn(5, 96, 2)
    for model in (DMANet(2), DMANet(2, anti_alias=False), LinearForecaster(2)):
        assert model(x).shape == (5, 96, 2)
    model = DMANet(2)
    model(x).pow(2).mean().backward()
    assert model.mix_logit.grad is not None and model.mix_logit.grad[1:].abs().sum() > 0
    assert torch.equal(DMANet(2, anti_alias=False).high_mix(), torch.ones(3))


def test_factors_must_divide_lookback_and_horizon():
    with pytest.raises(ValueError, match="divisible"):
        DMANet(1, lookback=90, horizon=96, factors=(1, 4))
