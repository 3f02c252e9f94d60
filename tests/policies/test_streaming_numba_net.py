"""The compiled MinAtar network against the torch fused path (the reference for its maths)."""

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from policies.streaming.networks import (
    ForwardCache,
    StreamNetwork,
    flatten_parameters_,
    fused_backward,
    fused_forward,
    param_views,
)
from policies.streaming.numba_net import NumbaNetwork, compiled_network


def _net(channels: int, n_out: int, seed: int) -> tuple[StreamNetwork, torch.Tensor]:
    net = StreamNetwork("minatar", (channels, 10, 10), n_out, generator=torch.Generator().manual_seed(seed))
    flat = flatten_parameters_(net)
    with torch.no_grad():  # move off the sparse init so every weight and activation sign matters
        flat.add_(0.05 * torch.randn(flat.shape, generator=torch.Generator().manual_seed(seed + 1)))
    return net, flat


@pytest.mark.parametrize("channels, n_out", [(4, 3), (7, 3), (10, 18), (6, 4)])  # the MinAtar games' shapes
def test_forward_and_gradient_match_the_torch_path(channels, n_out):
    net, flat = _net(channels, n_out, seed=channels)
    x = torch.randn(2, channels, 10, 10, generator=torch.Generator().manual_seed(0))
    x[0, 0, :3] = 0.0  # board cells that are empty
    cache = ForwardCache()
    q_torch = fused_forward(net, x, cache)
    fast = NumbaNetwork(net, (channels, 10, 10))
    q_fast = fast.forward(x.numpy())
    np.testing.assert_allclose(q_fast, q_torch.numpy(), rtol=1e-5, atol=1e-5)
    for row in (0, 1):
        cot = torch.zeros(1, n_out)
        cot[0, row % n_out] = 1.0
        cot[0, -1] -= 0.5  # a general cotangent, not only a one-hot
        g_torch = torch.zeros_like(flat)
        fused_backward(cache, cot, param_views(g_torch, net), rows=slice(row, row + 1))
        g_fast = torch.zeros_like(flat)
        fast.backward(cot.numpy()[0], [v.numpy() for v in param_views(g_fast, net)], row=row)
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
    with pytest.raises(ConfigError, match="MinAtar network only"):
        compiled_network("numba", "atari", atari, (4, 84, 84))
    with pytest.raises(ConfigError, match="unknown streaming backend 'jax'; valid: torch, numba"):
        compiled_network("jax", "minatar", net, (4, 10, 10))
    assert compiled_network("torch", "minatar", net, (4, 10, 10)) is None
