"""Theseus: Procrustes recovers a planted orthogonal map; the transport formula α·T_outᵀ ΔW T_in."""

import pytest
import torch

from policies.aux.training.theseus import (
    least_squares_map,
    pad_truncate_map,
    procrustes_map,
    transport_chain,
    transport_update,
)


def _orthogonal(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q


def test_procrustes_recovers_planted_orthogonal_map():
    a_src = torch.randn(200, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    q = _orthogonal(16, 1)
    t = procrustes_map(a_src, a_src @ q)
    assert torch.allclose(t.double(), q, atol=1e-5)


def test_procrustes_recovers_planted_semi_orthogonal_map_to_a_wider_space():
    a_src = torch.randn(300, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    q = _orthogonal(20, 3)[:8]  # 8 × 20 with orthonormal rows: narrow units embedded in a wider space
    t = procrustes_map(a_src, a_src @ q)
    assert t.shape == (8, 20)
    assert torch.allclose(t.double(), q, atol=1e-5)
    assert torch.allclose(t @ t.T, torch.eye(8), atol=1e-5)


def test_procrustes_is_robust_to_noise_where_least_squares_is_not_orthogonal():
    gen = torch.Generator().manual_seed(4)
    a_src = torch.randn(500, 10, generator=gen, dtype=torch.float64)
    q = _orthogonal(10, 5)
    a_tgt = a_src @ q + 0.3 * torch.randn(500, 10, generator=gen, dtype=torch.float64)
    t = procrustes_map(a_src, a_tgt)
    assert torch.allclose(t.T @ t, torch.eye(10), atol=1e-5)
    assert (t.double() - q).abs().max() < 0.1
    ls = least_squares_map(a_src.float(), a_tgt.float())
    assert not torch.allclose(ls.T @ ls, torch.eye(10), atol=1e-3)


def test_transport_update_formula_and_identity_spaces():
    gen = torch.Generator().manual_seed(6)
    dw, db = torch.randn(4, 3, generator=gen), torch.randn(4, generator=gen)
    t_in, t_out = torch.randn(3, 5, generator=gen), torch.randn(4, 7, generator=gen)
    assert torch.allclose(transport_update(dw, t_in, t_out, 0.5), 0.5 * t_out.T @ dw @ t_in)
    assert torch.allclose(transport_update(db, None, t_out, 2.0), 2.0 * t_out.T @ db)
    assert torch.equal(transport_update(dw, None, None, 1.0), dw)
    pad = pad_truncate_map(4, 6)
    padded = transport_update(dw, None, pad)
    assert padded.shape == (6, 3) and torch.equal(padded[:4], dw) and not padded[4:].any()


def test_transport_chain_checks_map_count_and_shapes():
    deltas = [(torch.zeros(5, 3), torch.zeros(5)), (torch.zeros(2, 5), torch.zeros(2))]
    out = transport_chain(deltas, [None, torch.eye(5, 8), None])
    assert [tuple(w.shape) for w, _ in out] == [(8, 3), (2, 8)]
    with pytest.raises(ValueError, match="needs 3 maps"):
        transport_chain(deltas, [None, None])
    with pytest.raises(ValueError, match="T_in has 4 rows"):
        transport_update(torch.zeros(5, 3), torch.eye(4), None)
    with pytest.raises(ValueError, match="same m inputs"):
        procrustes_map(torch.zeros(5, 3), torch.zeros(6, 3))
