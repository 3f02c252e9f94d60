"""The compiled networks (MinAtar: numba_net; Atari/Octax: im2col_net) against the torch fused path."""

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from policies.streaming.backends import compiled_network
from policies.streaming.im2col_net import Im2colNetwork, col2im_hwc, im2col_hwc
from policies.streaming.networks import (
    ForwardCache,
    StreamNetwork,
    flatten_parameters_,
    fused_backward,
    fused_forward,
    param_views,
)
from policies.streaming.numba_net import NumbaNetwork, col2im_wide_add, from_wide, im2col_wide, to_wide
from policies.streaming.obgd import ObGD


def _net(channels: int, n_out: int, seed: int, suite: str = "minatar", shape: tuple | None = None, preset: str = ""
         ) -> tuple[StreamNetwork, torch.Tensor]:
    net = StreamNetwork(suite, shape or (channels, 10, 10), n_out, generator=torch.Generator().manual_seed(seed),
                        preset=preset)
    flat = flatten_parameters_(net)
    with torch.no_grad():  # move off the sparse init so every weight and activation sign matters
        flat.add_(0.05 * torch.randn(flat.shape, generator=torch.Generator().manual_seed(seed + 1)))
    return net, flat


# every MinAtar game's shape for the compiled MinAtar network; Atari (4 and 18 actions) and Octax for im2col_net
CASES = [(NumbaNetwork, "minatar", (c, 10, 10), n, "") for c, n in [(4, 3), (7, 3), (10, 18), (6, 4)]] + [
    (Im2colNetwork, "atari", (4, 84, 84), 4, ""), (Im2colNetwork, "atari", (4, 84, 84), 18, ""),
    (Im2colNetwork, "atari", (4, 84, 84), 4, "stream_x"), (Im2colNetwork, "octax", (4, 32, 64), 5, "")]


@pytest.mark.parametrize("cls, suite, shape, n_out, preset", CASES)
def test_forward_and_gradient_match_the_torch_path(cls, suite, shape, n_out, preset):
    net, flat = _net(shape[0], n_out, seed=shape[0] + n_out, suite=suite, shape=shape, preset=preset)
    x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(0))
    x[0, 0, :3] = 0.0  # board cells that are empty
    cache = ForwardCache()
    q_torch = fused_forward(net, x, cache)
    fast = cls(net, shape)
    q_fast = fast.forward(x.numpy())
    np.testing.assert_allclose(q_fast, q_torch.numpy(), rtol=1e-5, atol=1e-5)
    for row in (0, 1):
        cot = torch.zeros(1, n_out)
        cot[0, row % n_out] = 1.0
        cot[0, -1] -= 0.5  # a general cotangent, not only a one-hot
        g_torch = torch.zeros_like(flat)
        fused_backward(cache, cot, param_views(g_torch, net), rows=slice(row, row + 1))
        g_fast = torch.zeros_like(flat)
        assert fast.backward(cot.numpy()[0], [v.numpy() for v in param_views(g_fast, net)], row=row) is None
        for a, b in zip(param_views(g_fast, net), param_views(g_torch, net), strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_weights_are_read_live_from_the_flat_buffer():
    net, flat = _net(4, 3, seed=3)
    fast = NumbaNetwork(net, (4, 10, 10))
    x = np.random.default_rng(0).standard_normal((1, 4, 10, 10)).astype(np.float32)
    before = fast.forward(x).copy()
    with torch.no_grad():
        flat.mul_(1.5)  # an in-place update, as ObGD makes
    after = fast.forward(x)
    np.testing.assert_allclose(after, fused_forward(net, torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)
    assert not np.allclose(before, after)


def test_bad_use_is_refused():
    net, _ = _net(4, 3, seed=0)
    fast = NumbaNetwork(net, (4, 10, 10))
    with pytest.raises(RuntimeError, match="row 0 not in the last forward"):
        fast.backward(np.ones(3, np.float32), [p.detach().numpy().copy() for p in net.parameters()])
    with pytest.raises(ValueError, match="3 rows > max_rows 2"):
        fast.forward(np.zeros((3, 4, 10, 10), np.float32))
    with pytest.raises(ValueError, match="input"):
        fast.forward(np.zeros((1, 5, 10, 10), np.float32))
    atari = StreamNetwork("atari", (4, 84, 84), 4)
    with pytest.raises(ValueError, match="one-conv MinAtar network"):
        NumbaNetwork(atari, (4, 84, 84))
    assert isinstance(compiled_network("numba", "atari", atari, (4, 84, 84)), Im2colNetwork)
    with pytest.raises(ConfigError, match="unknown streaming backend 'jax'; valid: torch, numba"):
        compiled_network("jax", "minatar", net, (4, 10, 10))
    assert compiled_network("torch", "minatar", net, (4, 10, 10)) is None


IM2COL_SHAPES = [("atari", (4, 84, 84), 4), ("octax", (4, 32, 64), 5)]


@pytest.mark.parametrize("suite, shape, n_out", [("minatar", (4, 10, 10), 3), *IM2COL_SHAPES])
def test_deferred_outer_product_gives_the_same_trace(suite, shape, n_out):
    net, flat = _net(shape[0], n_out, seed=1, suite=suite, shape=shape)
    fast = (NumbaNetwork if suite == "minatar" else Im2colNetwork)(net, shape)
    x = np.random.default_rng(0).standard_normal((2, *shape)).astype(np.float32)
    cot = np.eye(n_out, dtype=np.float32)[1]
    fast.forward(x)
    full = torch.zeros_like(flat)
    fast.backward(cot, [v.numpy() for v in param_views(full, net)])
    part = torch.full_like(flat, float("nan"))
    start, u, v = fast.backward(cot, [v.numpy() for v in param_views(part, net)], defer_outer=True)
    fc1 = net.head.net[1].weight
    assert start == fast.outer_offset and u.size * v.size == fc1.numel()
    assert torch.isnan(part[start:start + fc1.numel()]).all()  # not written
    a, b = ObGD(torch.zeros_like(flat)), ObGD(torch.zeros_like(flat))
    for _ in range(2):
        a.accumulate(full)
        b.accumulate(part, (start, u, v))
    torch.testing.assert_close(b.trace, a.trace, rtol=0, atol=0)
    assert b.trace_l1 == pytest.approx(a.trace_l1, rel=1e-12)


def test_col2im_is_the_adjoint_of_im2col():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 9, 11, 3)).astype(np.float32)
    k, stride = 3, 2
    n_pos = ((9 - k) // stride + 1) * ((11 - k) // stride + 1)
    cols = np.zeros((1, n_pos, 3 * k * k), np.float32)
    im2col_hwc(x, k, stride, cols)
    d = rng.standard_normal(cols.shape[1:]).astype(np.float32)
    dx = np.empty((9, 11, 3), np.float32)
    col2im_hwc(d, k, stride, dx)
    assert float((cols[0] * d).sum()) == pytest.approx(float((x[0] * dx).sum()), rel=1e-5)  # ⟨Ax, d⟩ = ⟨x, Aᵀd⟩
    assert cols[0, 1, 0] == x[0, 0, 2, 0] and cols[0, 1, k * k] == x[0, 0, 2, 1]  # torch's (C, kH, kW) order


@pytest.mark.parametrize("stride", [1, 2])
def test_wide_patches_give_torch_conv_and_their_adjoint(stride):
    rng = np.random.default_rng(stride)
    c, h, w, k = 3, 9, 11, 3
    x = rng.standard_normal((c, h, w)).astype(np.float32)
    ho, wo = (h - k) // stride + 1, (w - k) // stride + 1
    length = (ho - 1) * w + wo  # output (p, q) at p·W + q; the columns q ≥ wo of each row are junk
    cols = np.zeros((c * k * k, length), np.float32)
    im2col_wide(x.reshape(-1), c, h, w, k, stride, cols)
    weight = rng.standard_normal((5, c, k, k)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    out = np.empty(5 * ho * wo, np.float32)
    from_wide(weight.reshape(5, -1) @ cols, bias, ho, wo, w, out)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x[None]), torch.from_numpy(weight), torch.from_numpy(bias),
                                     stride)
    np.testing.assert_allclose(out, ref.numpy().reshape(-1), rtol=1e-5, atol=1e-5)
    d = np.zeros((c * k * k, length), np.float32)
    for r in range(c * k * k):  # a cotangent that is zero on the junk columns, as the backward passes build it
        wide_row = np.zeros((1, length), np.float32)
        to_wide(rng.standard_normal(ho * wo).astype(np.float32), ho, wo, w, wide_row)
        d[r] = wide_row[0]
    dx = np.zeros(c * h * w, np.float32)
    col2im_wide_add(d, c, h, w, k, stride, dx)
    assert float((cols * d).sum()) == pytest.approx(float((x.reshape(-1) * dx).sum()), rel=1e-5)  # ⟨Ax,d⟩=⟨x,Aᵀd⟩


def test_im2col_net_reads_weights_live_and_refuses_bad_use():
    net, flat = _net(4, 5, seed=3, suite="octax", shape=(4, 32, 64))
    fast = Im2colNetwork(net, (4, 32, 64))
    with pytest.raises(RuntimeError, match="row 0 not in the last forward"):
        fast.backward(np.ones(5, np.float32), [p.detach().numpy().copy() for p in net.parameters()])
    x = np.random.default_rng(0).standard_normal((1, 4, 32, 64)).astype(np.float32)
    before = fast.forward(x)
    with torch.no_grad():
        flat.mul_(1.5)  # an in-place update, as ObGD makes
    after = fast.forward(x)
    np.testing.assert_allclose(after, fused_forward(net, torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)
    assert not np.allclose(before, after)
    with pytest.raises(ValueError, match="3 rows > max_rows 2"):
        fast.forward(np.zeros((3, 4, 32, 64), np.float32))
    with pytest.raises(ValueError, match="input"):
        fast.forward(np.zeros((1, 4, 84, 84), np.float32))
    net.head.net[3] = torch.nn.ReLU()  # a layer the compiled path does not implement
    with pytest.raises(ValueError, match="conv/LN/LReLU blocks"):
        Im2colNetwork(net, (4, 32, 64))
