"""The compiled SPR loss against torch autograd (the reference for its maths)."""

import numpy as np
import pytest
import torch

from agents.streaming.stream_spr import StreamSPR, StreamSPRConfig


def _agent_with_window(shape, n_actions, k, seed):
    ag = StreamSPR("minatar", shape, n_actions, StreamSPRConfig(k=k, backend="numba"), seed=seed)
    rng = np.random.default_rng(seed)
    with torch.no_grad():  # move every module off its sparse init / zero biases, and the targets off the online copy
        for flat in [ag.flat, *ag.head_flats, ag.target_enc_flat, ag.target_proj_flat]:
            flat.add_(torch.from_numpy(rng.normal(scale=0.02, size=flat.shape).astype(np.float32)))
    for _ in range(k + 1):
        obs = rng.normal(size=shape).astype(np.float32)
        obs[0, :2] = 0.0  # empty board cells
        ag._win_obs.append(torch.from_numpy(obs))
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


@pytest.mark.parametrize("channels, n_actions, k", [(4, 3, 5), (10, 6, 5), (7, 18, 3), (6, 4, 1)])
def test_loss_and_gradients_match_autograd(channels, n_actions, k):
    ag = _agent_with_window((channels, 10, 10), n_actions, k, seed=channels)
    loss_fast, fast, loss_ref, ref = _both(ag)
    assert loss_fast == pytest.approx(loss_ref, rel=1e-5, abs=1e-6)
    assert [g.numel() for g in fast] == [g.numel() for g in ref]  # encoder, transition, projection, predictor
    _close(fast, ref)
    assert all(float(b.abs().max()) > 0 for b in ref)  # every module receives gradient


def test_weights_and_targets_are_read_live():
    ag = _agent_with_window((4, 10, 10), 3, 3, seed=1)
    before = _both(ag)[0]
    rng = np.random.default_rng(7)
    with torch.no_grad():  # in-place updates as ObGD and the EMA make them (random directions: every layer is
        # followed by a LayerNorm, so a uniform scale or shift of a layer's weights would leave the loss unchanged)
        for flat in (ag.flat, ag.target_proj_flat):
            flat.add_(torch.from_numpy(rng.normal(scale=0.05, size=flat.shape).astype(np.float32)))
    loss_fast, fast, loss_ref, ref = _both(ag)
    assert loss_fast != pytest.approx(before)
    assert loss_fast == pytest.approx(loss_ref, rel=1e-5, abs=1e-6)
    _close(fast, ref)


def test_bad_windows_are_refused():
    ag = _agent_with_window((4, 10, 10), 3, 2, seed=0)
    obs = np.zeros((3, 4, 10, 10), np.float32)
    with pytest.raises(ValueError, match="K\\+1 observations"):
        ag.fast_spr.gradients(obs, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="actions must be in"):
        ag.fast_spr.gradients(obs, np.array([0, 3]))
