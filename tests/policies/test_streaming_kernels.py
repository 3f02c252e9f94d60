"""The fused numba kernels against plain numpy, and their size checks."""

import numpy as np
import pytest

from policies.streaming.kernels import (
    decay_add_l1_,
    decay_add_outer_l1_,
    l1_norm,
    momentum_project_,
    momentum_project_step_,
    welford_normalize_,
)


def test_decay_add_l1_matches_numpy():
    rng = np.random.default_rng(0)
    z, g = rng.normal(size=1001).astype(np.float32), rng.normal(size=1001).astype(np.float32)
    decay = np.float32(0.792)
    expected = decay * z + g  # float32 arithmetic, no fused multiply-add
    total = decay_add_l1_(z, g, decay)
    np.testing.assert_array_equal(z, expected)
    assert total == pytest.approx(np.abs(expected.astype(np.float64)).sum(), rel=1e-12)
    assert l1_norm(z) == pytest.approx(total, rel=1e-12)


def test_decay_add_outer_l1_equals_the_materialised_outer_product():
    rng = np.random.default_rng(3)
    u, v = rng.normal(size=5).astype(np.float32), rng.normal(size=7).astype(np.float32)
    z = rng.normal(size=50).astype(np.float32)
    g = rng.normal(size=50).astype(np.float32)
    decay = np.float32(0.792)
    full = g.copy()
    full[9:44] = np.outer(u, v).reshape(-1)  # what a written-out weight gradient would hold
    z_ref = z.copy()
    ref = decay_add_l1_(z_ref, full, decay)
    g[9:44] = np.nan  # the block of g is not read
    total = decay_add_outer_l1_(z, g, decay, 9, u, v)
    np.testing.assert_array_equal(z, z_ref)  # bit for bit: the same float32 product, then the same add
    assert total == pytest.approx(ref, rel=1e-12)
    with pytest.raises(ValueError, match="do not fit"):
        decay_add_outer_l1_(z, g, decay, 20, u, v)


def test_momentum_project_matches_numpy():
    rng = np.random.default_rng(1)
    g, c = rng.normal(size=300), rng.normal(size=300)
    c0 = c.copy()
    out = np.empty_like(g)
    momentum_project_(g, c, 0.9, 1e-12, out)
    u = g - (g @ c0) / (c0 @ c0 + 1e-12) * c0
    np.testing.assert_allclose(out, u, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c, 0.9 * c0 + 0.1 * u, rtol=1e-12, atol=1e-12)
    assert abs(out @ c0) < 1e-9


def test_momentum_project_step_applies_the_projected_gradient():
    rng = np.random.default_rng(3)
    g, c = rng.normal(size=300).astype(np.float32), rng.normal(size=300).astype(np.float32)
    params = rng.normal(size=300).astype(np.float32)
    c_ref, u = c.copy(), np.empty_like(g)
    momentum_project_(g, c_ref, 0.9, 1e-12, u)
    expected = params + np.float32(-0.02) * u
    momentum_project_step_(g, c, 0.9, 1e-12, params, -0.02)
    np.testing.assert_array_equal(c, c_ref)  # the buffer update is the same computation
    np.testing.assert_allclose(params, expected, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="differ in size"):
        momentum_project_step_(g, c, 0.9, 1e-12, params[:10], -0.02)


def test_welford_normalize_matches_two_pass_statistics():
    rng = np.random.default_rng(2)
    xs = rng.integers(0, 255, size=(7, 12)).astype(np.uint8)
    mean, m2, out = np.zeros(12), np.zeros(12), np.empty(12, np.float32)
    for n, x in enumerate(xs, start=1):
        welford_normalize_(x, n, mean, m2, 1e-8, out)
    np.testing.assert_allclose(mean, xs.mean(0), rtol=1e-12)
    var = xs.var(0, ddof=1)
    np.testing.assert_allclose(m2 / 6, var, rtol=1e-10)
    np.testing.assert_allclose(out, (xs[-1] - xs.mean(0)) / np.sqrt(var + 1e-8), rtol=1e-5)


def test_kernels_reject_mismatched_sizes():
    a, b = np.zeros(3, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="differ in size"):
        decay_add_l1_(a, b, 0.5)
    with pytest.raises(ValueError, match="differ in size"):
        momentum_project_(a, b, 0.9, 1e-12, a.copy())
    with pytest.raises(ValueError, match="differ in size"):
        welford_normalize_(a, 1, b, b.copy(), 1e-8, a.copy())
