"""How rich a learned representation is: the effective rank of an encoder's features over a set of states.

``effective_rank`` is Roy & Vetterli's (2007) exp of the entropy of the normalised singular values; ``srank`` is
Kumar et al.'s (2021) count of singular values needed to keep (1 − δ) of their sum. Both read a features matrix
(states × dimensions); a collapsed representation (few directions used) scores low on both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def singular_values(features: np.ndarray) -> np.ndarray:
    """Singular values (descending) of a states × dimensions matrix, in float64."""
    x = np.asarray(features, np.float64)
    if x.ndim != 2 or min(x.shape) == 0:
        raise ValueError(f"features must be a non-empty 2-D matrix, got shape {x.shape}")
    return np.linalg.svd(x, compute_uv=False)


def effective_rank(features: np.ndarray) -> float:
    """exp(H(p)) with p = σ / Σσ: between 1 (one direction) and min(states, dimensions) (all equal)."""
    s = singular_values(features)
    if s.sum() <= 0:
        return 0.0
    p = s / s.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def srank(features: np.ndarray, delta: float = 0.01) -> int:
    """The smallest k whose top-k singular values hold at least (1 − δ) of their sum."""
    s = singular_values(features)
    if s.sum() <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(s) / s.sum(), 1.0 - delta) + 1)


def encoder_of(learner: Any) -> torch.nn.Module:
    """The encoder whose representation a streaming learner learns: Q's (Stream Q, SPR) or the critic's (AC)."""
    if hasattr(learner, "q"):
        return learner.q.encoder
    return learner.critic.net.encoder


def representation_stats(learner: Any, observations: np.ndarray) -> dict[str, float]:
    """Effective rank and srank of ``learner``'s encoder features on ``observations`` (raw env observations,
    normalised with the learner's running statistics, which are not updated)."""
    with torch.no_grad():
        x = learner.pipe.obs_norm(torch.from_numpy(np.asarray(observations, np.float32)), update=False)
        z = encoder_of(learner)(x).reshape(len(x), -1).numpy()
    return {"effective_rank": effective_rank(z), "srank": float(srank(z)), "states": len(z),
            "dimensions": int(z.shape[1])}
