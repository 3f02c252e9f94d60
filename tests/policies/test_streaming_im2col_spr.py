"""The im2col/GEMM SPR loss of the Atari/Octax networks against torch autograd (the reference for its maths)."""

import numpy as np
import pytest
import torch

from agents.streaming.stream_spr import StreamSPR, StreamSPRConfig
from policies.streaming.im2col_net import im2col_rows
from policies.streaming.im2col_spr import (
    Im2colSPRLoss,
    col2im_ijc,
    col2im_same_ijc_add,
    from_ijc,
    im2col_ijc,
    im2col_same_ijc,
    to_ijc,
)


def _agent_with_window(suite, shape, n_actions, k, seed, preset=""):
    ag = StreamSPR(suite, shape, n_actions, StreamSPRConfig(k=k, backend="numba", network=preset), seed=seed)
    rng = np.random.default_rng(seed)
    with torch.no_grad():  # move every module off its sparse init / zero biases, and the targets off the online copy
        for flat in [ag.flat, *ag.head_flats, ag.target_enc_flat, ag.target_proj_flat]:
            flat.add_(torch.from_numpy(rng.normal(scale=0.02, size=flat.shape).astype(np.float32)))
    for _ in range(k + 1):
        ag._win_obs.append(torch.from_numpy(rng.normal(size=shape).astype(np.float32)))
    for _ in range(k):
        ag._win_act.append(int(rng.integers(n_actions)))
    return ag


def _both(ag):
    loss_fast, fast = ag.spr_gradients()
    fast = [g.clone() for g in fast]
    compiled, ag.fast_spr = ag.fast_spr, None
    try:
        loss_ref, ref = ag.spr_gradients()
    finally:
        ag.fast_spr = compiled
    return loss_fast, fast, loss_ref, ref


def _close(fast, ref):  # float32 rounding of sums in another order: tolerance relative to each gradient's scale
    for a, b in zip(fast, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * float(b.abs().max()))


# a small Atari-shaped screen (the Nature stack leaves a 2×2 latent), the Stream-x preset on the real screen with
# Seaquest's 18 actions, and the Octax stack
@pytest.mark.parametrize("suite, shape, n_actions, k, preset", [
    ("atari", (2, 44, 44), 4, 3, ""), ("atari", (4, 84, 84), 18, 2, "stream_x"), ("octax", (4, 32, 64), 5, 2, "")])
def test_loss_and_gradients_match_autograd(suite, shape, n_actions, k, preset):
    ag = _agent_with_window(suite, shape, n_actions, k, seed=n_actions, preset=preset)
    assert isinstance(ag.fast_spr, Im2colSPRLoss)
    loss_fast, fast, loss_ref, ref = _both(ag)
    assert loss_fast == pytest.approx(loss_ref, rel=1e-5, abs=1e-6)
    assert [g.numel() for g in fast] == [g.numel() for g in ref]  # encoder, transition, projection, predictor
    _close(fast, ref)
    assert all(float(b.abs().max()) > 0 for b in ref)  # every module receives gradient


def test_weights_and_targets_are_read_live():
    ag = _agent_with_window("atari", (2, 44, 44), 3, 2, seed=1)
    before = _both(ag)[0]
    rng = np.random.default_rng(7)
    with torch.no_grad():  # in-place updates as ObGD and the EMA make them (random directions: every layer is
        # followed by a LayerNorm, so a uniform scale or shift of a layer's weights would leave the loss unchanged)
        for flat in (ag.flat, *ag.head_flats, ag.target_enc_flat, ag.target_proj_flat):
            flat.add_(torch.from_numpy(rng.normal(scale=0.05, size=flat.shape).astype(np.float32)))
    loss_fast, fast, loss_ref, ref = _both(ag)
    assert loss_fast != pytest.approx(before)
    assert loss_fast == pytest.approx(loss_ref, rel=1e-5, abs=1e-6)
    _close(fast, ref)


def test_bad_windows_are_refused():
    ag = _agent_with_window("atari", (2, 44, 44), 3, 2, seed=0)
    obs = np.zeros((3, 2, 44, 44), np.float32)
    with pytest.raises(ValueError, match="K\\+1 observations"):
        ag.fast_spr.gradients(obs, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="actions must be in"):
        ag.fast_spr.gradients(obs, np.array([0, 3]))
    with pytest.raises(ValueError, match="encoder's input"):
        ag.fast_spr.gradients(np.zeros((3, 2, 40, 44), np.float32), np.array([0, 1]))


def test_patch_kernels_follow_torch_conv_and_their_adjoints():
    rng = np.random.default_rng(0)
    conv = torch.nn.functional.conv2d
    # first layer: (C, H, W) frames, torch's patch order, so the weight is used as stored
    x = rng.standard_normal((2, 3, 11, 9)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    cols = np.zeros((2, 5 * 4, 27), np.float32)
    im2col_rows(x, 3, 2, cols)
    ref = conv(torch.from_numpy(x), torch.from_numpy(w), stride=2).permute(0, 2, 3, 1).reshape(2, 20, 5)
    np.testing.assert_allclose(cols @ w.reshape(5, -1).T, ref.numpy(), rtol=1e-5, atol=1e-5)
    # later layers: position-major activations, (kH, kW, C) patches against the permuted weight
    h = rng.standard_normal((1, 9, 7, 3)).astype(np.float32)
    wp = np.zeros((5, 27), np.float32)
    to_ijc(w.reshape(5, -1), 3, 3, wp)
    cols = np.zeros((1, 4 * 3, 27), np.float32)
    im2col_ijc(h, 3, 2, cols)
    ref = conv(torch.from_numpy(h).permute(0, 3, 1, 2), torch.from_numpy(w), stride=2).permute(0, 2, 3, 1)
    np.testing.assert_allclose(cols[0] @ wp.T, ref.numpy().reshape(12, 5), rtol=1e-5, atol=1e-5)
    back = np.zeros((5, 27), np.float32)
    from_ijc(wp, 3, 3, back)
    assert np.array_equal(back, w.reshape(5, -1))
    d = rng.standard_normal(cols.shape[1:]).astype(np.float32)
    dx = np.empty((9, 7, 3), np.float32)
    col2im_ijc(d, 3, 2, dx)
    assert float((cols[0] * d).sum()) == pytest.approx(float((h[0] * dx).sum()), rel=1e-5)  # ⟨Ax, d⟩ = ⟨x, Aᵀd⟩
    # the transition model's same-padded convolution with a one-hot action plane appended to the channels
    z = rng.standard_normal((4, 5, 3)).astype(np.float32)
    wt = rng.standard_normal((3, 3 + 2, 3, 3)).astype(np.float32)
    wtp = np.zeros((3, 45), np.float32)
    to_ijc(wt.reshape(3, -1), 5, 3, wtp)
    cols = np.zeros((20, 45), np.float32)
    im2col_same_ijc(z, 1, 2, 3, 1, cols)
    planes = np.zeros((2, 4, 5), np.float32)
    planes[1] = 1.0
    inp = np.concatenate([z.transpose(2, 0, 1), planes])[None]
    ref = conv(torch.from_numpy(inp), torch.from_numpy(wt), padding=1)[0].permute(1, 2, 0).reshape(20, 3)
    np.testing.assert_allclose(cols @ wtp.T, ref.numpy(), rtol=1e-5, atol=1e-5)
    d = rng.standard_normal(cols.shape).astype(np.float32)
    dz = np.zeros_like(z)
    col2im_same_ijc_add(d, 3, 1, 2, dz)
    latent_part = np.zeros_like(cols)  # ⟨A z, d⟩ over the latent channels only: the action planes are constants
    im2col_same_ijc(z, 0, 2, 3, 1, latent_part)
    latent_part.reshape(20, 9, 5)[:, :, 3:] = 0.0
    assert float((latent_part * d).sum()) == pytest.approx(float((z * dz).sum()), rel=1e-5)
