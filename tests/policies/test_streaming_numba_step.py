"""The fused Stream Q(λ) step (numba_step) against the layer-by-layer compiled network + ObGD it replaces."""

import numpy as np
import pytest
import torch

from policies.streaming.kernels import welford_normalize_
from policies.streaming.networks import StreamNetwork, flatten_parameters_, param_views
from policies.streaming.numba_net import NumbaNetwork
from policies.streaming.numba_step import FusedQStep
from policies.streaming.obgd import ObGD

GAMMA, LAM, KAPPA, LR = 0.99, 0.8, 2.0, 1.0


def _pair(channels: int, n_out: int, seed: int):
    """Two networks with the same weights (off the sparse init, so every weight matters), each flat."""
    nets = []
    for _ in range(2):
        net = StreamNetwork("minatar", (channels, 10, 10), n_out, generator=torch.Generator().manual_seed(seed))
        flat = flatten_parameters_(net)
        with torch.no_grad():
            flat.add_(0.05 * torch.randn(flat.shape, generator=torch.Generator().manual_seed(seed + 1)))
        nets.append((net, flat))
    return nets


def _boards(channels: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((n, channels, 10, 10)) < 0.15).astype(np.uint8)


@pytest.mark.parametrize("channels, n_out", [(4, 3), (7, 3), (10, 18), (6, 4)])  # every MinAtar game's shape
def test_fused_step_gives_the_layered_update(channels, n_out):
    (net_a, flat_a), (net_b, flat_b) = _pair(channels, n_out, seed=channels + n_out)
    shape = (channels, 10, 10)
    layered, opt = NumbaNetwork(net_a, shape), ObGD(flat_a, LR, GAMMA, LAM, KAPPA)
    opt_b = ObGD(flat_b, LR, GAMMA, LAM, KAPPA)  # only its trace buffer and decay are used by the fused step
    fused = FusedQStep(net_b, shape, flat_b.numpy(), opt_b.trace.numpy())
    grad = torch.zeros_like(flat_a)
    grad_np = [v.numpy() for v in param_views(grad, net_a)]
    boards = _boards(channels, 6, seed=n_out)
    n = channels * 100
    mean_a, m2_a, mean_b, m2_b = (np.zeros(n) for _ in range(4))
    s_a, s_b = np.zeros(n, np.float32), np.zeros(n, np.float32)
    welford_normalize_(boards[0].reshape(-1), 1, mean_a, m2_a, 1e-8, s_a)
    welford_normalize_(boards[0].reshape(-1), 1, mean_b, m2_b, 1e-8, s_b)
    # rewards, terminal flags and trace cuts so that every branch runs: bootstrap, terminal, reset, carry-over
    plan = [(0, 1.0, False, False), (1, 0.0, False, False), (n_out - 1, -0.5, False, True), (0, 2.0, True, True),
            (1, 0.3, False, False)]
    for t, (action, reward, terminated, reset) in enumerate(plan, start=2):
        nxt_a = np.zeros(n, np.float32)
        welford_normalize_(boards[t - 1].reshape(-1), t, mean_a, m2_a, 1e-8, nxt_a)
        q = layered.forward(np.stack([s_a, nxt_a]).reshape(2, *shape))
        outer = layered.backward(np.eye(n_out, dtype=np.float32)[action], grad_np, defer_outer=True)
        delta = reward + (0.0 if terminated else GAMMA * float(q[1].max())) - float(q[0, action])
        opt.accumulate(grad, outer)
        l1_a = opt.trace_l1
        scale_a = opt.step(delta)
        nxt_b = np.zeros(n, np.float32)
        delta_b, scale_b, l1_b = fused.step(s_b, boards[t - 1].reshape(-1), nxt_b, t, mean_b, m2_b, 1e-8, action,
                                            reward, terminated, reset, GAMMA, opt_b._decay, LR, KAPPA)
        np.testing.assert_allclose(fused.out, q, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(nxt_b, nxt_a)  # the normaliser is the same kernel
        assert delta_b == pytest.approx(delta, rel=1e-4, abs=1e-5)
        assert scale_b == pytest.approx(scale_a, rel=1e-4, abs=1e-7)
        fused.flush()
        np.testing.assert_allclose(flat_b.numpy(), flat_a.numpy(), rtol=1e-5, atol=1e-6)
        if reset:
            opt.reset_traces()
            assert l1_b == 0.0 and not opt_b.trace.any()
        else:
            assert l1_b == pytest.approx(l1_a, rel=1e-5)
        np.testing.assert_allclose(opt_b.trace.numpy(), opt.trace.numpy(), rtol=1e-4, atol=1e-6)
        s_a, s_b = nxt_a, nxt_b


def test_the_deferred_hidden_step_is_the_step_itself_and_the_acting_forward_applies_it():
    (net, flat), (net_c, flat_c) = _pair(4, 3, seed=7)
    opt, opt_c = ObGD(flat, LR, GAMMA, LAM, KAPPA), ObGD(flat_c, LR, GAMMA, LAM, KAPPA)
    fused = FusedQStep(net, (4, 10, 10), flat.numpy(), opt.trace.numpy())
    other = FusedQStep(net_c, (4, 10, 10), flat_c.numpy(), opt_c.trace.numpy())
    boards = _boards(4, 3, seed=1)
    mean, m2, s0, s1 = np.zeros(400), np.zeros(400), np.zeros(400, np.float32), np.zeros(400, np.float32)
    welford_normalize_(boards[0].reshape(-1), 1, mean, m2, 1e-8, s0)
    before = flat.clone()
    _, scale, _ = fused.step(s0, boards[1].reshape(-1), s1, 2, mean, m2, 1e-8, 2, 1.0, False, False, GAMMA,
                             opt._decay, LR, KAPPA)
    assert fused.pending[2] == 1.0 and scale != 0.0
    expected = before.numpy() + np.float32(scale) * opt.trace.numpy()  # float32 product, then the add
    w1 = slice(4 * 9 * 16 + 16, 4 * 9 * 16 + 16 + 128 * 1024)
    np.testing.assert_array_equal(flat.numpy()[:w1.start], expected[:w1.start])  # applied at once
    np.testing.assert_array_equal(flat.numpy()[w1], before.numpy()[w1])  # deferred
    flat_c.copy_(flat)
    opt_c.trace.copy_(opt.trace)
    other.pending[:] = fused.pending
    q = other.forward(s1)  # the acting forward applies the deferred step before using the weights
    fused.flush()
    np.testing.assert_array_equal(flat.numpy(), expected)
    np.testing.assert_array_equal(flat_c.numpy(), expected)
    assert not fused.pending.any() and not other.pending.any()
    np.testing.assert_allclose(q, NumbaNetwork(net, (4, 10, 10)).forward(s1.reshape(1, 4, 10, 10))[0], rtol=1e-5,
                               atol=1e-5)


def test_fused_step_refuses_a_network_it_does_not_address():
    (net, flat), _ = _pair(4, 3, seed=2)
    trace = np.zeros(flat.numel(), np.float32)
    with pytest.raises(ValueError, match="views into theta"):
        FusedQStep(net, (4, 10, 10), flat.numpy().copy(), trace)
    with pytest.raises(ValueError, match="float32"):
        FusedQStep(net, (4, 10, 10), flat.numpy(), trace[:-1])
