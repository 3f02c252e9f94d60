"""Observation normaliser and reward scaler against numpy."""

import numpy as np
import pytest
import torch

from policies.streaming.normalizers import ObservationNormalizer, RewardScaler, RunningMeanStd


def test_running_mean_std_matches_numpy():
    rng = np.random.default_rng(0)
    xs = rng.normal(3.0, 2.0, size=(500, 4, 3))
    stats = RunningMeanStd((4, 3))
    for x in xs:
        stats.update(torch.from_numpy(x))
    assert np.allclose(stats.mean.numpy(), xs.mean(0))
    assert np.allclose(stats.var.numpy(), xs.var(0, ddof=1))
    fresh = RunningMeanStd((2,))
    fresh.update(torch.ones(2))
    assert torch.equal(fresh.var, torch.ones(2, dtype=torch.float64))  # one sample: unit variance


def test_observation_normalizer_uses_stats_including_the_current_obs():
    rng = np.random.default_rng(1)
    xs = rng.integers(0, 2, size=(50, 2, 3, 3)).astype(np.uint8)
    norm = ObservationNormalizer((2, 3, 3))
    for _i, x in enumerate(xs):
        y = norm(torch.from_numpy(x))
    seen = xs.astype(float)
    expected = (xs[-1] - seen.mean(0)) / np.sqrt(seen.var(0, ddof=1) + 1e-8)
    assert y.dtype == torch.float32
    assert np.allclose(y.numpy(), expected, atol=1e-4)
    # update=False leaves the statistics alone
    count = norm.stats.count
    norm(torch.from_numpy(xs[0]), update=False)
    assert norm.stats.count == count


def test_reward_scaler_divides_by_std_of_the_discounted_return_trace():
    rng = np.random.default_rng(2)
    rewards = rng.normal(1.0, 1.0, size=200)
    dones = rng.random(200) < 0.05
    scaler = RewardScaler(gamma=0.9)
    u, trace, out = 0.0, [], []
    for r, d in zip(rewards, dones, strict=True):
        out.append(scaler(r, bool(d)))
        u = 0.9 * (1 - d) * u + r
        trace.append(u)
        var = np.var(trace, ddof=1) if len(trace) > 1 else 1.0
        assert out[-1] == pytest.approx(r / np.sqrt(var + 1e-8))
    state = scaler.state_dict()
    other = RewardScaler(gamma=0.9)
    other.load_state_dict(state)
    assert other(1.0, False) == scaler(1.0, False)
