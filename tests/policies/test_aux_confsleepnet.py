"""ConfSleepNet: opinions, lifting, the conflict measure and the conflict-aware rule's limits and invariants."""

import pytest
import torch

from policies.aux.structured.confsleepnet import (
    COARSE_TO_STAGES,
    EvidentialHead,
    averaging_fusion,
    conflict,
    conflict_aware_fusion,
    dempster_fusion,
    evidential_loss,
    fuse_fine_and_coarse,
    lift_to_stages,
    opinion,
    projected_probability,
)


def random_opinions(n: int, k: int = 5, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    b0, u0 = opinion(torch.rand(n, k, generator=gen, dtype=torch.float64) * 10)
    b1, u1 = opinion(torch.rand(n, k, generator=gen, dtype=torch.float64) * 10)
    return b0, u0, b1, u1


def test_opinion_beliefs_and_uncertainty_sum_to_one():
    b, u = opinion(torch.tensor([[0.0, 0.0, 0.0], [4.0, 1.0, 0.0]]))
    assert torch.allclose(b.sum(-1) + u, torch.ones(2))
    assert u[0] == pytest.approx(1.0) and u[1] == pytest.approx(3 / 8)


def test_lift_splits_nrem_equally_and_keeps_mass():
    lifted = lift_to_stages(torch.tensor([[0.1, 0.6, 0.2]]))
    assert torch.allclose(lifted, torch.tensor([[0.1, 0.2, 0.2, 0.2, 0.2]]))


def test_guided_lift_follows_the_fine_view_inside_nrem():
    guide = torch.tensor([[0.0, 0.1, 0.6, 0.3, 0.0]])
    lifted = lift_to_stages(torch.tensor([[0.1, 0.6, 0.2]]), guide)
    assert torch.allclose(lifted, torch.tensor([[0.1, 0.06, 0.36, 0.18, 0.2]]))
    # A guide with no NREM mass falls back to the equal split.
    assert torch.allclose(lift_to_stages(torch.tensor([[0.0, 0.9, 0.0]]), torch.tensor([[1.0, 0, 0, 0, 0]])),
                          torch.tensor([[0.0, 0.3, 0.3, 0.3, 0.0]]))


def test_agreeing_views_are_not_in_conflict_and_keep_the_fine_stage():
    # EEG sure of N2, EOG/EMG sure of NREM: the views agree. On the 5 stages the equal NREM split made this look
    # two-thirds in conflict and the fused p(N2) fell to ~0.56 (Dempster-Shafer: ~0.85).
    eeg, eog = torch.tensor([[0.0, 0.0, 45.0, 0.0, 0.0]]), torch.tensor([[0.0, 45.0, 0.0]])
    b0, _ = opinion(eeg)
    assert float(conflict(b0, lift_to_stages(opinion(eog)[0]), COARSE_TO_STAGES)) == pytest.approx(0.0, abs=1e-6)
    fused = projected_probability(*fuse_fine_and_coarse(eeg, eog))
    assert float(fused[0, 2]) > 0.9
    assert float(fused[0, 2]) >= float(projected_probability(*opinion(eeg))[0, 2])  # agreement adds confidence
    # Views that really disagree (EEG sure of W, EOG/EMG sure of NREM) stay in full conflict on the coarse partition.
    wake = torch.tensor([[45.0, 0.0, 0.0, 0.0, 0.0]])
    assert float(conflict(opinion(wake)[0], lift_to_stages(opinion(eog)[0]), COARSE_TO_STAGES)) == pytest.approx(1.0)


def test_fuse_fine_and_coarse_rejects_unknown_rule():
    with pytest.raises(ValueError, match="rule"):
        fuse_fine_and_coarse(torch.ones(1, 5), torch.ones(1, 3), rule="max")


def test_conflict_is_zero_for_agreement_one_for_disjoint_beliefs():
    a = torch.tensor([0.0, 0.7, 0.0])
    assert float(conflict(a, torch.tensor([0.0, 0.2, 0.0]))) == pytest.approx(0.0)
    assert float(conflict(a, torch.tensor([0.5, 0.0, 0.3]))) == pytest.approx(1.0)
    assert float(conflict(torch.zeros(3), a)) == 0.0  # vacuous view: no conflict


def test_fused_beliefs_plus_uncertainty_sum_to_one():
    b, u = conflict_aware_fusion(*random_opinions(200))
    assert torch.allclose(b.sum(-1) + u, torch.ones(200, dtype=torch.float64), atol=1e-12)
    assert (b >= 0).all() and (u >= 0).all()


def test_fusion_is_symmetric_in_the_views():
    b0, u0, b1, u1 = random_opinions(50, seed=1)
    ba, ua = conflict_aware_fusion(b0, u0, b1, u1)
    bb, ub = conflict_aware_fusion(b1, u1, b0, u0)
    assert torch.allclose(ba, bb) and torch.allclose(ua, ub)


def test_zero_conflict_reduces_to_dempsters_rule():
    # Both views back stage 2 only (C = 0), with different strengths.
    b0, u0 = opinion(torch.tensor([[0.0, 0.0, 6.0, 0.0, 0.0]], dtype=torch.float64))
    b1, u1 = opinion(torch.tensor([[0.0, 0.0, 2.0, 0.0, 0.0]], dtype=torch.float64))
    assert float(conflict(b0, b1)) == pytest.approx(0.0)
    b, u = conflict_aware_fusion(b0, u0, b1, u1)
    bd, ud = dempster_fusion(b0, u0, b1, u1)
    assert torch.allclose(b, bd) and torch.allclose(u, ud)
    assert float(u) == pytest.approx(float(u0 * u1))  # evidence accumulates: less uncertain than either view


def test_full_conflict_is_averaging_fusion_and_dempster_is_overconfident():
    b0, u0 = opinion(torch.tensor([[9.0, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64))
    b1, u1 = opinion(torch.tensor([[0.0, 0.0, 0.0, 0.0, 3.0]], dtype=torch.float64))
    assert float(conflict(b0, b1)) == pytest.approx(1.0)
    b, u = conflict_aware_fusion(b0, u0, b1, u1)
    ba, ua = averaging_fusion(b0, u0, b1, u1)
    assert torch.allclose(b, ba) and torch.allclose(u, ua)
    _, ud = dempster_fusion(b0, u0, b1, u1)
    assert float(u) > float(ud)  # conflict keeps uncertainty; Dempster renormalises it away


def test_projected_probability_sums_to_one():
    b0, u0, _, _ = random_opinions(10)
    assert torch.allclose(projected_probability(b0, u0).sum(-1), torch.ones(10, dtype=torch.float64))


def test_evidential_loss_prefers_evidence_for_the_true_class():
    target = torch.tensor([1])
    right = evidential_loss(torch.tensor([[0.0, 10.0, 0.0]]), target, kl_weight=1.0)
    wrong = evidential_loss(torch.tensor([[10.0, 0.0, 0.0]]), target, kl_weight=1.0)
    assert float(right) < float(wrong)
    head = EvidentialHead(4, 3)
    assert (head(torch.randn(7, 4)) >= 0).all()
