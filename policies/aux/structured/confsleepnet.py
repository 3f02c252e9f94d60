"""ConfSleepNet: conflict-aware evidential fusion of sleep-staging views.

Each view has an evidential head: non-negative evidence ``e`` over its K classes defines a Dirichlet with
``alpha = e + 1`` and a subjective opinion: belief ``b = e / S`` and uncertainty ``u = K / S`` (``S = sum(alpha)``),
so ``sum(b) + u = 1``. A 3-class view (W / NREM / REM) is lifted to the 5 sleep stages (W, N1, N2, N3, REM) by
splitting its NREM belief over N1-N3, in proportion to the 5-class view's probabilities within NREM when that view
is given (the coarse view says "NREM", the fine view says which NREM stage), equally otherwise. Two opinions are
combined with a conflict measure taken on the coarsest partition both views resolve (W / NREM / REM when one view
is 3-class):

    C = 1 - sum_c B0_c B1_c / (sum B0 * sum B1),   B_c = sum of b over the stages of part c

(0 when both views back the same part, 1 when their beliefs never overlap). On the 5 stages themselves an EEG view
sure of N2 and an EOG/EMG view sure of NREM would look two-thirds in conflict, although they agree. The rule is

    u = (1 - C) u0 u1 + 2 C u0 u1 / (u0 + u1)
    b = [u0 b1 + u1 b0 + (1 - C) u0 u1 (b0 + b1)] / (u0 + u1),

which is Dempster's reduced rule (as in trusted multi-view classification) when C = 0 and the subjective-logic
averaging fusion when C = 1: under conflict the views are averaged instead of multiplied, so one confidently wrong
view cannot veto the other.
"""

from __future__ import annotations

import torch
from torch import nn

STAGES = ("W", "N1", "N2", "N3", "REM")
COARSE = ("W", "NREM", "REM")
# Which 5-stage classes each coarse class covers (belief is split equally among them).
COARSE_TO_STAGES = ((0,), (1, 2, 3), (4,))


def opinion(evidence: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Evidence [..., K] ≥ 0 → (belief [..., K], uncertainty [...]) of the Dirichlet ``alpha = evidence + 1``."""
    strength = evidence.sum(-1) + evidence.shape[-1]
    return evidence / strength.unsqueeze(-1), evidence.shape[-1] / strength


def lift_to_stages(belief3: torch.Tensor, guide: torch.Tensor | None = None) -> torch.Tensor:
    """A W/NREM/REM belief [..., 3] → 5-stage belief [..., 5]; u is unchanged.

    Each coarse class's belief goes to its stages in proportion to ``guide`` [..., 5] (the other view's stage
    probabilities) within that class, or equally when no guide is given or the guide puts no mass there.
    """
    out = torch.zeros(*belief3.shape[:-1], len(STAGES), dtype=belief3.dtype)
    for coarse, stages in enumerate(COARSE_TO_STAGES):
        idx = list(stages)
        share = torch.full((*belief3.shape[:-1], len(idx)), 1.0 / len(idx), dtype=belief3.dtype)
        if guide is not None:
            g = guide[..., idx].to(belief3.dtype)
            total = g.sum(-1, keepdim=True)
            share = torch.where(total > 1e-12, g / total.clamp_min(1e-12), share)
        out[..., idx] = belief3[..., coarse].unsqueeze(-1) * share
    return out


def coarsen(belief: torch.Tensor, partition: tuple[tuple[int, ...], ...]) -> torch.Tensor:
    """Belief [..., K] summed over the parts of ``partition`` → [..., len(partition)]."""
    return torch.stack([belief[..., list(part)].sum(-1) for part in partition], dim=-1)


def conflict(b0: torch.Tensor, b1: torch.Tensor, partition: tuple[tuple[int, ...], ...] | None = None,
             eps: float = 1e-12) -> torch.Tensor:
    """``C = 1 - sum_c B0_c B1_c / (sum B0 * sum B1)`` on ``partition`` (the classes themselves when None).

    0 when either view has no belief at all. Pass :data:`COARSE_TO_STAGES` when one view only resolves W / NREM /
    REM: beliefs that differ only inside NREM are then not in conflict.
    """
    if partition is not None:
        b0, b1 = coarsen(b0, partition), coarsen(b1, partition)
    mass = b0.sum(-1) * b1.sum(-1)
    return torch.where(mass > eps, 1 - (b0 * b1).sum(-1) / mass.clamp_min(eps), torch.zeros_like(mass))


def conflict_aware_fusion(b0: torch.Tensor, u0: torch.Tensor, b1: torch.Tensor, u1: torch.Tensor,
                          partition: tuple[tuple[int, ...], ...] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine two opinions with the conflict-aware rule (module docstring); returns (belief, uncertainty).

    ``partition``: where the conflict is measured (:data:`COARSE_TO_STAGES` when ``b1`` is a lifted 3-class view).
    """
    c = conflict(b0, b1, partition)
    usum = (u0 + u1).clamp_min(1e-12)
    u = (1 - c) * u0 * u1 + 2 * c * u0 * u1 / usum
    b = (u0.unsqueeze(-1) * b1 + u1.unsqueeze(-1) * b0
         + ((1 - c) * u0 * u1).unsqueeze(-1) * (b0 + b1)) / usum.unsqueeze(-1)
    return b, u


def fuse_fine_and_coarse(evidence5: torch.Tensor, evidence3: torch.Tensor,
                         rule: str = "confsleepnet") -> tuple[torch.Tensor, torch.Tensor]:
    """Fuse a 5-stage view's evidence with a W/NREM/REM view's evidence; returns (belief [..., 5], uncertainty).

    The coarse view is lifted guided by the fine view's projected probabilities, and the conflict-aware rule
    measures conflict on the W / NREM / REM partition. ``rule``: "confsleepnet", "dempster_shafer" or "averaging"
    (the same lifting, another combination).
    """
    b0, u0 = opinion(evidence5)
    b3, u1 = opinion(evidence3)
    b1 = lift_to_stages(b3, projected_probability(b0, u0))
    if rule == "confsleepnet":
        return conflict_aware_fusion(b0, u0, b1, u1, COARSE_TO_STAGES)
    if rule == "dempster_shafer":
        return dempster_fusion(b0, u0, b1, u1)
    if rule == "averaging":
        return averaging_fusion(b0, u0, b1, u1)
    raise ValueError(f"rule {rule!r} is not one of confsleepnet, dempster_shafer, averaging")


def dempster_fusion(b0: torch.Tensor, u0: torch.Tensor, b1: torch.Tensor,
                    u1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dempster's reduced combination of two opinions (the TMC rule): conflicting mass is renormalised away."""
    clash = b0.sum(-1) * b1.sum(-1) - (b0 * b1).sum(-1)  # sum over i != j of b0_i b1_j
    scale = (1 - clash).clamp_min(1e-12)
    b = (b0 * b1 + b0 * u1.unsqueeze(-1) + b1 * u0.unsqueeze(-1)) / scale.unsqueeze(-1)
    return b, u0 * u1 / scale


def averaging_fusion(b0: torch.Tensor, u0: torch.Tensor, b1: torch.Tensor,
                     u1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Subjective-logic averaging fusion: ``b = (b0 u1 + b1 u0) / (u0 + u1)``, ``u = 2 u0 u1 / (u0 + u1)``."""
    usum = (u0 + u1).clamp_min(1e-12)
    return (b0 * u1.unsqueeze(-1) + b1 * u0.unsqueeze(-1)) / usum.unsqueeze(-1), 2 * u0 * u1 / usum


def projected_probability(belief: torch.Tensor, uncertainty: torch.Tensor) -> torch.Tensor:
    """Class probabilities of an opinion: ``b + u / K`` (sums to 1)."""
    return belief + uncertainty.unsqueeze(-1) / belief.shape[-1]


class EvidentialHead(nn.Module):
    """A small MLP whose softplus outputs are Dirichlet evidence for one view."""

    def __init__(self, features: int, classes: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features [N, F] → evidence [N, K] ≥ 0."""
        return nn.functional.softplus(self.net(x))


def evidential_loss(evidence: torch.Tensor, target: torch.Tensor, kl_weight: float) -> torch.Tensor:
    """Expected cross-entropy under the Dirichlet plus ``kl_weight`` × KL(misleading evidence ‖ uniform Dirichlet).

    The KL term is taken on the Dirichlet with the true class's evidence removed, so it only penalises evidence for
    wrong classes (this is what makes uncertainty grow on inputs unlike the training data).
    """
    alpha = evidence + 1
    classes = alpha.shape[-1]
    onehot = nn.functional.one_hot(target, classes).to(alpha.dtype)
    nll = (onehot * (torch.digamma(alpha.sum(-1, keepdim=True)) - torch.digamma(alpha))).sum(-1)
    tilde = onehot + (1 - onehot) * alpha
    s = tilde.sum(-1)
    kl = (torch.lgamma(s) - torch.lgamma(torch.tensor(float(classes))) - torch.lgamma(tilde).sum(-1)
          + ((tilde - 1) * (torch.digamma(tilde) - torch.digamma(s).unsqueeze(-1))).sum(-1))
    return (nll + kl_weight * kl).mean()
