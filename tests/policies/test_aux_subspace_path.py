"""Formula-level checks of SubspacePath: axes, probes, head writes, importances, selection, gating and slicing."""

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from policies.aux.lm_geometry.subspace_path import (
    AttentionProjections,
    HeadGate,
    breadth,
    domain_axes,
    fit_probe,
    head_writes,
    keep_ratio,
    magnitude_importance,
    random_importance,
    select_heads,
    slice_heads,
    subspace_importance,
    taylor_importance,
)


class TinyAttention(nn.Module):
    """Plain multi-head self-attention whose forward infers the head count from the q/k/v widths (as BERT's does)."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.head_dim = d_model // n_heads
        self.proj = AttentionProjections(*(nn.Linear(d_model, d_model) for _ in range(4)))
        self.mods = nn.ModuleList([self.proj.query, self.proj.key, self.proj.value, self.proj.out])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = (lin(x).view(b, t, -1, self.head_dim).transpose(1, 2)
                   for lin in (self.proj.query, self.proj.key, self.proj.value))
        ctx = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, -1)
        return self.proj.out(ctx)


def _tiny(seed: int = 0, d: int = 16, h: int = 4) -> TinyAttention:
    torch.manual_seed(seed)
    return TinyAttention(d, h).eval()


def test_slicing_gives_the_same_output_as_masking_the_heads():
    model = _tiny()
    x = torch.randn(2, 5, 16)
    keep = torch.tensor([True, False, True, False])
    with torch.no_grad(), HeadGate([model.proj], keep[None].float(), n_heads=4):
        masked = model(x)
    assert slice_heads(model.proj, keep, head_dim=4) == 2
    assert model.proj.query.weight.shape == (8, 16) and model.proj.out.weight.shape == (16, 8)
    with torch.no_grad():
        sliced = model(x)
    assert torch.allclose(masked, sliced, atol=1e-6)


def test_gate_of_ones_changes_nothing_and_zero_gate_removes_a_head():
    model = _tiny(1)
    x = torch.randn(1, 4, 16)
    with torch.no_grad():
        dense = model(x)
        with HeadGate([model.proj], torch.ones(1, 4), n_heads=4):
            same = model(x)
        with HeadGate([model.proj], torch.tensor([[1.0, 1.0, 0.0, 1.0]]), n_heads=4):
            cut = model(x)
    assert torch.allclose(dense, same, atol=1e-6)
    assert not torch.allclose(dense, cut, atol=1e-4)
    with torch.no_grad():
        after = model(x)  # hooks are gone after the context
    assert torch.allclose(dense, after, atol=1e-6)


def test_head_writes_sum_to_the_output_projection():
    model = _tiny(2)
    ctx = torch.randn(3, 16)
    writes = head_writes(ctx, model.proj.out.weight, n_heads=4)
    assert writes.shape == (3, 4, 16)
    assert torch.allclose(writes.sum(1) + model.proj.out.bias, model.proj.out(ctx), atol=1e-5)


def test_slicing_every_head_is_refused():
    model = _tiny()
    with pytest.raises(ValueError, match="at least one"):
        slice_heads(model.proj, torch.zeros(4, dtype=torch.bool), head_dim=4)


def test_domain_axes_are_orthonormal_and_contain_the_domain_offset():
    rng = np.random.default_rng(0)
    emb = torch.tensor(rng.normal(size=(40, 10)), dtype=torch.float32) + torch.tensor([3.0] + [0.0] * 9)
    axes = domain_axes(emb, reference_mean=torch.zeros(10), n_pcs=3)
    assert axes.shape == (4, 10)
    assert torch.allclose(axes @ axes.T, torch.eye(4), atol=1e-5)
    offset = emb.mean(0)
    assert float((axes @ offset).norm()) == pytest.approx(float(offset.norm()), rel=1e-4)  # offset lies in the span
    two = domain_axes(emb, labels=[0] * 20 + [1] * 20, reference_mean=torch.zeros(10), n_pcs=0)
    assert two.shape == (2, 10)


def test_probe_recovers_a_linear_map():
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.normal(size=(500, 6)), dtype=torch.float32)
    w_true = torch.tensor(rng.normal(size=(6, 3)), dtype=torch.float32)
    w, b = fit_probe(x, x @ w_true + 2.0, ridge=1e-6)
    assert torch.allclose(w, w_true, atol=1e-3) and torch.allclose(b, torch.full((3,), 2.0), atol=1e-3)


def test_subspace_importance_reads_writes_along_the_axes_only():
    writes = torch.zeros(5, 3, 4)
    writes[:, 0, 0] = 2.0  # head 0 writes along axis e0
    writes[:, 1, 3] = 7.0  # head 1 writes off the axes: large but irrelevant
    writes[:, 2, 1] = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0])
    axes = torch.eye(4)[:2]
    imp = subspace_importance(writes, torch.eye(4), axes)
    assert imp.shape == (3,)
    assert imp.tolist() == pytest.approx([2.0, 0.0, 1.0])
    # a probe that maps e3 onto e0 makes head 1 important
    probe = torch.eye(4)
    probe[3] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    assert subspace_importance(writes, probe, axes)[1] == pytest.approx(7.0)


def test_magnitude_taylor_and_random_importance_shapes():
    layers = [_tiny(s).proj for s in range(3)]
    mag = magnitude_importance(layers, n_heads=4)
    assert mag.shape == (3, 4)
    p = layers[0]
    h1 = torch.cat([p.query.weight[4:8].flatten(), p.key.weight[4:8].flatten(), p.value.weight[4:8].flatten(),
                    p.out.weight[:, 4:8].flatten()])
    assert float(mag[0, 1]) == pytest.approx(float(h1.detach().norm()), rel=1e-5)
    tay = taylor_importance([torch.tensor([[1.0, -2.0]]), torch.tensor([[-3.0, 0.0]])])
    assert tay.tolist() == [[2.0, 1.0]]
    a, b = random_importance(3, 4, np.random.default_rng(5)), random_importance(3, 4, np.random.default_rng(5))
    assert a.shape == (3, 4) and torch.equal(a, b)


def test_select_heads_keeps_the_best_with_one_per_layer():
    imp = torch.tensor([[9.0, 8.0, 7.0], [0.1, 0.3, 0.2]])
    keep = select_heads(imp, 3)
    assert keep.tolist() == [[True, True, False], [False, True, False]]
    assert select_heads(imp, 3, min_per_layer=0).tolist() == [[True, True, True], [False, False, False]]
    with pytest.raises(ValueError, match="n_keep"):
        select_heads(imp, 1)


def test_keep_ratio_and_breadth():
    assert keep_ratio(0.5, 0.5, 0.4) == pytest.approx(0.7)
    assert keep_ratio(3.0, 0.5, 0.4) == 1.0 and keep_ratio(-1.0, 0.5, 0.4) == 0.5
    rng = np.random.default_rng(2)
    broad = torch.tensor(rng.normal(size=(200, 8)), dtype=torch.float32)
    narrow = broad * torch.tensor([5.0] + [0.1] * 7)
    assert breadth(broad, broad) == pytest.approx(1.0)
    assert 0.0 <= breadth(narrow, broad) < 0.3
