"""Formula-level checks of the ManifoldKV scorers and the tiny transformer's eviction mask."""

import numpy as np
import pytest
import torch

from policies.aux.lm_geometry.manifold_kv import (
    keep_mask,
    key_centroids,
    keydiff_scores,
    manifold_scores,
    random_scores,
    recency_scores,
)
from policies.aux.lm_geometry.tiny_gpt import TinyGPT, TinyGPTConfig


def test_manifold_score_is_l2_distance_to_centroid():
    keys = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 4.0], [2.0, 4.0]])  # centroid (1, 2)
    assert torch.allclose(manifold_scores(keys), torch.full((4,), 5.0 ** 0.5))


def test_keydiff_ignores_norm_but_manifold_does_not():
    # Two keys on the centroid's ray: same cosine (KeyDiff ties them), different distance (ManifoldKV separates).
    keys = torch.tensor([[1.0, 0.0], [10.0, 0.0], [1.0, 1.0], [1.0, -1.0]])
    kd, mf = keydiff_scores(keys), manifold_scores(keys)
    assert kd[0] == pytest.approx(kd[1].item(), abs=1e-6)
    assert mf[1] > mf[0] + 4  # centroid (3.25, 0): distances 2.25 vs 6.75


def test_windowed_centroid_is_per_window_mean():
    keys = torch.arange(12, dtype=torch.float32).view(6, 2)
    cent = key_centroids(keys, window=4)
    assert torch.allclose(cent[:4], keys[:4].mean(0).expand(4, 2))
    assert torch.allclose(cent[4:], keys[4:].mean(0).expand(2, 2))
    assert torch.allclose(key_centroids(keys, window=None), keys.mean(0).expand(6, 2))


def test_keep_mask_keeps_top_scores_per_head():
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.3], [4.0, 3.0, 2.0, 1.0]])
    m = keep_mask(scores, 2)
    assert m.tolist() == [[False, True, True, False], [True, True, False, False]]
    assert keep_mask(scores, 0).sum() == 0
    with pytest.raises(ValueError, match="n_keep"):
        keep_mask(scores, 5)


def test_recency_and_random_scores():
    keys = torch.zeros(2, 5, 3)
    assert keep_mask(recency_scores(keys), 2)[0].tolist() == [False, False, False, True, True]
    a = random_scores(keys, np.random.default_rng(3))
    b = random_scores(keys, np.random.default_rng(3))
    assert a.shape == (2, 5) and torch.equal(a, b)


def test_head_mask_equals_dropping_evicted_columns_for_the_last_row():
    # Evicting column j for the last query row must equal running that row without position j at all, in a
    # 1-layer model (the context rows are unaffected by what the last row sees).
    torch.manual_seed(0)
    model = TinyGPT(TinyGPTConfig(vocab=11, d_model=16, n_layers=1, n_heads=2, max_len=8)).eval()
    ids = torch.randint(0, 11, (1, 6))
    mask = torch.ones(1, 1, 2, 6, 6, dtype=torch.bool)
    out_full = model(ids).logits
    out_masked = model(ids, head_mask=mask).logits
    assert torch.allclose(out_full, out_masked, atol=1e-6)
    mask[:, :, :, 5, 2] = False
    changed = model(ids, head_mask=mask).logits
    assert torch.allclose(changed[:, :5], out_full[:, :5], atol=1e-6)
    assert not torch.allclose(changed[:, 5], out_full[:, 5], atol=1e-4)


def test_tiny_gpt_returns_hidden_and_keys():
    model = TinyGPT(TinyGPTConfig(vocab=7, d_model=8, n_layers=2, n_heads=2, max_len=5))
    out = model(torch.zeros(3, 5, dtype=torch.long), return_hidden=True, return_keys=True)
    assert out.logits.shape == (3, 5, 7)
    assert len(out.hidden) == 3 and len(out.keys) == 2 and out.keys[0].shape == (3, 2, 5, 4)
