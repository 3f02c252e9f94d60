"""RobuQ: rotation invariance in full precision, ternary and activation quantisers, AMPN allocation."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from policies.aux.training.robuq import (
    RobuQLinear,
    activation_quant_mse,
    allocate_bits,
    configure,
    hadamard,
    kurtosis,
    quantize_activations,
    random_hadamard,
    ternary_absmean,
)


def test_rotated_layer_equals_unrotated_in_full_precision() -> None:
    torch.manual_seed(0)
    linear = nn.Linear(64, 32)
    layer = RobuQLinear(linear, seed=3)
    x = torch.randn(10, 64) * torch.linspace(0.1, 20.0, 64)  # outlier channels
    layer.rotate = True
    torch.testing.assert_close(layer(x), linear(x), atol=1e-4, rtol=1e-4)
    q = random_hadamard(64, 3)
    torch.testing.assert_close(q @ q.T, torch.eye(64), atol=1e-6, rtol=0)
    torch.testing.assert_close(hadamard(4) * 2, torch.tensor([[1.0, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1],
                                                              [1, -1, -1, 1]]))
    with pytest.raises(ValueError, match="power of two"):
        hadamard(12)


def test_ternary_absmean_levels_and_straight_through_gradient() -> None:
    w = torch.tensor([[0.05, -0.9, 0.4, 2.0]], requires_grad=True)
    q = ternary_absmean(w)
    gamma = w.detach().abs().mean()
    torch.testing.assert_close(q.detach(), torch.tensor([[0.0, -1.0, 0.0, 1.0]]) * gamma)
    q.sum().backward()
    torch.testing.assert_close(w.grad, torch.ones_like(w))


def test_activation_quantiser_levels() -> None:
    x = torch.tensor([[0.0, 0.1, 0.5, 0.9, 3.0]])
    q2 = quantize_activations(x, 2)  # 4 levels between the token's min 0 and max 3
    torch.testing.assert_close(q2, torch.tensor([[0.0, 0.0, 0.0, 1.0, 3.0]]))
    assert len(torch.unique(quantize_activations(torch.randn(1, 256), 3))) <= 8


def test_rotation_cuts_outlier_quantisation_error_and_kurtosis() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(512, 64, generator=gen)
    x[:, 5] *= 30.0  # one outlier channel, as in transformer activations
    q = random_hadamard(64, 0)
    assert activation_quant_mse(x, 4, q) < 0.5 * activation_quant_mse(x, 4)
    assert kurtosis(x @ q) < kurtosis(x)


def test_configure_switches_every_layer() -> None:
    model = nn.Sequential(RobuQLinear(nn.Linear(8, 8)), nn.ReLU(), RobuQLinear(nn.Linear(8, 4)))
    configure(model, ternary=True, rotate=True, act_bits={"0": 3, "2": 1})
    assert (model[0].act_bits, model[2].act_bits, model[2].rotate, model[0].ternary) == (3, 1, True, True)


def test_ampn_matches_brute_force_and_respects_budget() -> None:
    errors = {"a": {1: 0.9, 2: 0.3, 3: 0.1, 4: 0.05}, "b": {1: 0.2, 2: 0.15, 3: 0.14, 4: 0.13},
              "c": {1: 2.0, 2: 0.8, 3: 0.2, 4: 0.1}}
    sizes = {"a": 64, "b": 256, "c": 64}
    bits = allocate_bits(errors, sizes, budget=2.0)
    total = sum(sizes.values())
    best = min((combo for combo in itertools.product((1, 2, 3, 4), repeat=3)
                if sum(s * b for s, b in zip(sizes.values(), combo, strict=True)) <= 2.0 * total),
               key=lambda combo: sum(errors[n][b] for n, b in zip(errors, combo, strict=True)))
    assert tuple(bits.values()) == best
    assert sum(sizes[n] * b for n, b in bits.items()) <= 2.0 * total
    assert bits["b"] == 1  # the big, insensitive layer pays for the others
