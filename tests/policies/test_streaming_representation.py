"""Effective rank and srank of encoder features: exact on matrices whose singular values are known."""

import math

import numpy as np
import pytest

from policies.streaming.representation import effective_rank, representation_stats, srank


def _with_singular_values(values, rows=40, seed=0):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.normal(size=(rows, len(values))))
    v, _ = np.linalg.qr(rng.normal(size=(len(values), len(values))))
    return u @ np.diag(values) @ v.T


def test_effective_rank_counts_equal_directions_and_ignores_none():
    assert effective_rank(_with_singular_values([3.0] * 7)) == pytest.approx(7.0)
    assert effective_rank(_with_singular_values([5.0, 0.0, 0.0])) == pytest.approx(1.0)
    # two equal directions carrying all the mass and one tiny: just above 2
    assert 2.0 < effective_rank(_with_singular_values([1.0, 1.0, 1e-3])) < 2.05


def test_srank_keeps_99_percent_of_the_spectrum():
    assert srank(_with_singular_values([10.0, 5.0, 0.2, 0.05])) == 3  # 15.2 / 15.25 ≥ 0.99; 15 / 15.25 is not
    assert srank(_with_singular_values([1.0] * 4), delta=0.3) == 3
    with pytest.raises(ValueError, match="2-D"):
        srank(np.zeros(5))


def test_learner_features_are_measured_without_touching_its_statistics():
    from agents.streaming.stream_q import StreamQ

    learner = StreamQ("minatar", (10, 10, 4), 3, seed=0)
    obs = np.random.default_rng(1).integers(0, 2, size=(64, 10, 10, 4)).astype(bool)
    count = learner.pipe.obs_norm.stats.count
    stats = representation_stats(learner, obs)
    assert learner.pipe.obs_norm.stats.count == count
    assert stats["states"] == 64 and stats["dimensions"] == math.prod(learner.q.encoder.latent_shape)
    assert 1.0 < stats["effective_rank"] <= 64 and 1 <= stats["srank"] <= 64
