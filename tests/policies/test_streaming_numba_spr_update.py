"""The fused SPR update (one compiled call) against the loss kernel + per-module steps it replaces."""

import numpy as np
import pytest
import torch

from agents.streaming.stream_spr import StreamSPR, StreamSPRConfig


def _agent(fused, projection, shape, n_actions, k, seed):
    cfg = StreamSPRConfig(k=k, backend="numba", fused_spr=fused, projection=projection)
    ag = StreamSPR("minatar", shape, n_actions, cfg, seed=seed)
    rng = np.random.default_rng(seed)
    with torch.no_grad():  # every module, target, trace and momentum buffer off its initial value
        for flat in [ag.flat, *ag.head_flats, ag.target_enc_flat, ag.target_proj_flat, ag.opt.trace, *ag.momentum]:
            flat.add_(torch.from_numpy(rng.normal(scale=0.02, size=flat.shape).astype(np.float32)))
    for _ in range(k + 1):
        obs = rng.normal(size=shape).astype(np.float32)
        obs[0, :2] = 0.0
        ag._win_obs.append(torch.from_numpy(obs))
    for _ in range(k):
        ag._win_act.append(int(rng.integers(n_actions)))
    ag._rl_scale = 0.37
    return ag


def _state(ag):
    return [ag.flat, *ag.head_flats, *ag.momentum, ag.target_enc_flat, ag.target_proj_flat]


@pytest.mark.parametrize("projection", ["both", "none", "momentum", "rl", "pcgrad"])
@pytest.mark.parametrize("shape, n_actions, k", [((4, 10, 10), 3, 5), ((10, 10, 10), 6, 3), ((7, 10, 10), 18, 1)])
def test_fused_update_matches_the_loss_kernel_and_module_steps(projection, shape, n_actions, k):
    fused, ref, start = (_agent(f, projection, shape, n_actions, k, seed=n_actions) for f in (True, False, True))
    assert fused.fused_spr is not None and ref.fused_spr is None
    for _ in range(2):  # the second update starts from momentum buffers the first one moved
        loss_f, loss_r = fused._spr_update(), ref._spr_update()
        for _ in range(3):  # EMA steps between updates: the fused agent defers the target projection's
            fused._ema_update()
            ref._ema_update()
        assert loss_f == pytest.approx(loss_r, rel=1e-5, abs=1e-6)
    assert fused._ema_pending == 3
    fused.flush_targets()
    for name, f, r, s in zip(["q", "transition", "projection", "predictor", "c_enc", "c_transition", "c_projection",
                              "c_predictor", "target_encoder", "target_projection"],
                             _state(fused), _state(ref), _state(start), strict=True):
        change = float((r - s).abs().max())
        if name.startswith("c_") and projection in ("none", "rl"):  # no momentum: the buffers stay put
            assert torch.equal(f, s) and torch.equal(r, s), name
            continue
        assert change > 0, name  # every vector moved
        # float32 rounding of sums taken in another order: far below the update's own size
        assert float((f - r).abs().max()) <= 1e-3 * change + 1e-9, name


def test_encoder_step_stays_orthogonal_to_the_rl_update():
    ag = _agent(True, "both", (4, 10, 10), 3, 5, seed=1)
    before = ag.flat[: ag.n_enc].clone()
    ag._spr_update()
    change = (ag.flat[: ag.n_enc] - before).double()
    delta_rl = (ag.opt.trace[: ag.n_enc] * ag._rl_scale).double()
    assert float(change.norm()) > 0
    assert abs(float(torch.dot(change, delta_rl) / (change.norm() * delta_rl.norm()))) < 1e-4


def test_bad_windows_are_refused_and_nothing_moves():
    ag = _agent(True, "both", (4, 10, 10), 3, 2, seed=0)
    before = [v.clone() for v in _state(ag)]
    obs = np.zeros((3, 4, 10, 10), np.float32)
    trace = ag.opt.trace[: ag.n_enc].numpy()
    with pytest.raises(ValueError, match="K\\+1 float32 observations"):
        ag.fused_spr.update(obs, np.array([0, 1, 2]), trace, 0.1)
    with pytest.raises(ValueError, match="actions must be in"):
        ag.fused_spr.update(obs, np.array([0, 3]), trace, 0.1)
    for b, a in zip(before, _state(ag), strict=True):
        assert torch.equal(a, b)
