"""Sparse init, affine-free LayerNorm, per-suite encoders and the fused reverse pass."""

import math

import pytest
import torch

from policies.streaming.networks import (
    PRESETS,
    Encoder,
    ForwardCache,
    LayerNormNoAffine,
    StreamNetwork,
    flatten_parameters_,
    fused_backward,
    fused_forward,
    param_views,
    sparse_init_,
)


def test_sparse_init_zeroes_ninety_percent_of_each_units_inputs():
    w = torch.empty(32, 16, 3, 3)
    sparse_init_(w, 0.9, torch.Generator().manual_seed(0))
    fan_in = 16 * 9
    zeros_per_unit = (w.view(32, -1) == 0).sum(1)
    assert torch.all(zeros_per_unit == round(0.9 * fan_in))
    assert w.abs().max() <= 1 / math.sqrt(fan_in)
    # different units get different zero patterns
    assert not torch.equal(w[0] == 0, w[1] == 0)


def test_network_init_is_seeded_sparse_and_biases_zero():
    a = StreamNetwork("minatar", (4, 10, 10), 3, generator=torch.Generator().manual_seed(1))
    b = StreamNetwork("minatar", (4, 10, 10), 3, generator=torch.Generator().manual_seed(1))
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
        if name.endswith("bias"):
            assert torch.count_nonzero(pa) == 0
        else:
            assert (pa == 0).float().mean() == pytest.approx(0.9, abs=0.015)  # round(0.9·fan_in) per unit


@pytest.mark.parametrize("suite, shape, n_out, preset, params", [
    ("minatar", (4, 10, 10), 3, "stream_x", 132_179),  # Stream-x's MinAtar network on Breakout
    ("minatar", (4, 10, 10), 3, "", 132_179),  # the default is the same network
    ("atari", (4, 84, 84), 4, "stream_x", 144_804),  # Stream-x's Atari network on Breakout
    ("atari", (4, 84, 84), 4, "nature", 882_084),  # the DQN Nature encoder + FC 256
    ("atari", (4, 84, 84), 4, "", 882_084),
])
def test_presets_have_the_published_parameter_counts(suite, shape, n_out, preset, params):
    net = StreamNetwork(suite, shape, n_out, preset=preset)
    assert sum(p.numel() for p in net.parameters()) == params
    if preset == "stream_x" and suite == "atari":
        assert [(m.out_channels, m.kernel_size, m.stride) for m in net.encoder.net if isinstance(m, torch.nn.Conv2d)] \
            == [(32, (8, 8), (5, 5)), (64, (4, 4), (3, 3)), (64, (3, 3), (2, 2))]
        assert net.encoder.latent_shape == (64, 2, 2) and net.hidden == 256


def test_unknown_or_unfitting_presets_are_refused():
    from envs.errors import ConfigError

    with pytest.raises(ConfigError, match="valid: octax"):
        StreamNetwork("octax", (4, 32, 64), 3, preset="stream_x")
    with pytest.raises(ConfigError, match="valid: nature, stream_x"):
        StreamNetwork("atari", (4, 84, 84), 3, preset="resnet")


def test_layernorm_has_no_parameters_and_normalises_all_dims():
    ln = LayerNormNoAffine()
    x = torch.randn(2, 16, 8, 8) * 5 + 3
    y = ln(x)
    assert list(ln.parameters()) == []
    assert torch.allclose(y.mean(dim=(1, 2, 3)), torch.zeros(2), atol=1e-5)
    assert torch.allclose(y.var(dim=(1, 2, 3), unbiased=False), torch.ones(2), atol=1e-3)


def test_encoder_latents_are_non_empty_per_suite():
    assert StreamNetwork("minatar", (4, 10, 10), 3).encoder.latent_shape == (16, 8, 8)
    assert StreamNetwork("atari", (4, 84, 84), 6).encoder.latent_shape == (64, 7, 7)
    assert StreamNetwork("octax", (4, 32, 64), 3).encoder.latent_shape == (64, 4, 12)
    # the Atari kernels on a 32×64 Octax screen would leave nothing: that is refused, not silently empty
    with pytest.raises(ValueError, match="empty latent"):
        Encoder((4, 32, 64), list(PRESETS["atari"]["nature"][0]))


def test_minatar_conv_is_a_real_2d_convolution():
    net = StreamNetwork("minatar", (4, 10, 10), 3)
    conv = net.encoder.net[0]
    assert tuple(conv.weight.shape) == (16, 4, 3, 3)
    assert sum(p.numel() for p in net.parameters()) == 16 * 36 + 16 + 1024 * 128 + 128 + 128 * 3 + 3


@pytest.mark.parametrize("suite, shape", [("minatar", (7, 10, 10)), ("atari", (4, 84, 84)), ("octax", (4, 32, 64))])
def test_fused_backward_matches_autograd(suite, shape):
    net = StreamNetwork(suite, shape, 5, generator=torch.Generator().manual_seed(2))
    flat = flatten_parameters_(net)
    assert all(p.data_ptr() >= flat.data_ptr() for p in net.parameters())
    x = torch.randn(2, *shape)
    cot = torch.randn(1, 5)
    out = net(x)
    expected = torch.autograd.grad((out[0] * cot[0]).sum(), list(net.parameters()))
    grad = torch.zeros_like(flat)
    cache = ForwardCache()
    fused = fused_forward(net, x, cache)
    fused_backward(cache, cot, param_views(grad, net))
    assert torch.allclose(fused, out.detach(), atol=1e-5)
    assert torch.allclose(grad, torch.cat([g.reshape(-1) for g in expected]), atol=1e-5)


def test_flat_parameters_are_shared_views():
    net = StreamNetwork("minatar", (4, 10, 10), 3)
    flat = flatten_parameters_(net)
    flat.add_(1.0)
    w = net.head.net[-1].bias
    assert torch.all(w == 1.0)
