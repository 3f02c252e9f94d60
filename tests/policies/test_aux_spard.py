"""SPARD: greedy DPP MAP by incremental Cholesky vs brute-force determinants, the kernel, the projection step."""

import itertools

import numpy as np
import pytest
import torch

from policies.aux.training.spard import (
    alternating_finetune,
    greedy_dpp_map,
    relevance_diversity_kernel,
    safety_projection_step,
    select_safe_set,
)


def _logdet(kernel: np.ndarray, subset: list[int]) -> float:
    sign, val = np.linalg.slogdet(kernel[np.ix_(subset, subset)])
    return val if sign > 0 else -np.inf


def _brute_force_greedy(kernel: np.ndarray, k: int) -> list[int]:
    """Greedy MAP with every candidate's determinant computed from scratch."""
    chosen: list[int] = []
    for _ in range(k):
        rest = [j for j in range(len(kernel)) if j not in chosen]
        chosen.append(max(rest, key=lambda j: _logdet(kernel, chosen + [j])))
    return chosen


@pytest.mark.parametrize("n", [3, 5, 8])
def test_incremental_cholesky_greedy_equals_brute_force(n):
    rng = np.random.default_rng(n)
    for trial in range(5):
        feats = rng.normal(size=(n, n + 2))
        kernel = feats @ feats.T
        for k in range(1, n + 1):
            assert greedy_dpp_map(kernel, k) == _brute_force_greedy(kernel, k), (trial, k)


def test_greedy_equals_exhaustive_map_on_small_kernels():
    rng = np.random.default_rng(7)
    agree = 0
    for _ in range(20):
        emb = rng.normal(size=(8, 16))
        kernel = relevance_diversity_kernel(emb, rng.normal(size=(4, 16)), beta=1.0)
        greedy = greedy_dpp_map(kernel, 3)
        best = max(itertools.combinations(range(8), 3), key=lambda s: _logdet(kernel, list(s)))
        agree += sorted(greedy) == sorted(best)
        assert _logdet(kernel, greedy) >= _logdet(kernel, list(best)) - 1.0  # never far from the optimum
    assert agree >= 14  # greedy is exact on most random instances of this size


def test_greedy_stops_when_kernel_rank_is_exhausted():
    emb = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])
    assert len(greedy_dpp_map(emb @ emb.T, 4)) == 2


def test_kernel_is_psd_and_relevance_prefers_items_near_the_references():
    rng = np.random.default_rng(1)
    refs = rng.normal(size=(3, 10))
    cands = np.vstack([refs[0] + 0.01 * rng.normal(size=10), rng.normal(size=(6, 10))])
    kernel = relevance_diversity_kernel(cands, refs, beta=2.0)
    assert np.allclose(kernel, kernel.T) and np.linalg.eigvalsh(kernel).min() > -1e-9
    assert kernel[0, 0] == pytest.approx(1.0, abs=1e-3) and kernel[0, 0] == np.diag(kernel).max()
    assert select_safe_set(cands, refs, 1, beta=2.0) == [0]
    # duplicates add nothing: a near-copy of an already chosen item is never the second pick
    dup = np.vstack([cands, cands[0] + 1e-4])
    assert 7 not in select_safe_set(dup, refs, 2, beta=2.0)


def test_projection_step_reaches_tau_on_a_linear_loss_and_respects_the_cap():
    a = torch.tensor([3.0, 4.0])
    theta = torch.zeros(2, requires_grad=True)
    loss = a @ theta + 2.0  # L = 2, ‖g‖ = 5
    moved = safety_projection_step([theta], loss, tau=0.2, eta=10.0)
    assert (a @ theta + 2.0).item() == pytest.approx(0.2, abs=1e-6)
    assert moved == pytest.approx(1.8 / 5.0)
    theta2 = torch.zeros(2, requires_grad=True)
    moved = safety_projection_step([theta2], a @ theta2 + 2.0, tau=0.2, eta=0.1)
    assert moved == pytest.approx(0.1) and theta2.norm().item() == pytest.approx(0.1)
    theta3 = torch.zeros(2, requires_grad=True)
    assert safety_projection_step([theta3], a @ theta3 + 0.1, tau=0.2, eta=1.0) == 0.0  # below tau: no step


def test_alternating_finetune_projects_only_above_threshold_and_rejects_bad_mode():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    x_safe, y_safe = torch.randn(8, 2), torch.zeros(8, dtype=torch.long)
    x_bad, y_bad = x_safe.clone(), torch.ones(8, dtype=torch.long)  # utility data pushes the opposite way

    def ce(m, x, y):
        return torch.nn.functional.cross_entropy(m(x), y)

    stats = alternating_finetune(model, torch.optim.SGD(model.parameters(), lr=0.5), [(x_bad, y_bad)] * 20, ce,
                                 lambda m: ce(m, x_safe, y_safe), mode="project", max_projections=50)
    assert stats["projection_triggers"] >= 1
    assert ce(model, x_safe, y_safe).item() <= 0.2 + 0.1 + 1e-6
    with pytest.raises(ValueError, match="safety mode"):
        alternating_finetune(model, torch.optim.SGD(model.parameters(), lr=0.1), [], ce, lambda m: 0, mode="x")
    with pytest.raises(ValueError, match="k must be"):
        greedy_dpp_map(np.eye(3), 4)
