"""Contextual curvature of a layer's token trajectory, next-token entropy, the straightness regulariser, and the
trajectory-aligned / misaligned perturbation directions.

One layer's hidden states h_0 … h_{T−1} (a sequence, shape (…, T, d)) form a trajectory through representation
space. With the step into position t written v_t = h_t − h_{t−1}:

- turning angle at t: θ_t = angle(v_{t−1}, v_t) ∈ [0, π] (0 = straight on, π = reversal); it uses h_{t−2}, h_{t−1},
  h_t only, so it is known when the model predicts token t + 1. Defined for t ≥ 2.
- contextual curvature at t over the last k tokens: c_t = mean(θ_{t−k+1}, …, θ_t); defined for t ≥ k + 1.
- next-token entropy at t: H_t = −Σ_v p_t(v) log p_t(v) of the softmax of the logits at t (nats).
- straightness regulariser: λ · mean θ over positions (and the layers given), a differentiable loss term that
  pushes trajectories straight.
- perturbation directions at t: *aligned* = v_t / ‖v_t‖ (along the trajectory); *misaligned* = a seeded random unit
  vector orthogonal to v_{t−1} and v_t (out of the local trajectory plane).

Undefined positions are NaN so callers choose which positions to keep.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

# arccos has an infinite slope at ±1; clamping keeps the regulariser's gradient finite on perfectly straight runs.
_COS_CLAMP = 1.0 - 1e-6


def turning_angles(h: Tensor, eps: float = 1e-8) -> Tensor:
    """θ_t = angle(h_{t−1} − h_{t−2}, h_t − h_{t−1}) in radians, shape (…, T); NaN at t < 2."""
    if h.shape[-2] < 3:
        raise ValueError(f"a trajectory needs at least 3 positions, got {h.shape[-2]}")
    v = h[..., 1:, :] - h[..., :-1, :]  # v[..., i] is the step into position i + 1
    a, b = v[..., :-1, :], v[..., 1:, :]
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)
    theta = torch.arccos(cos.clamp(-_COS_CLAMP, _COS_CLAMP))
    pad = theta.new_full(theta.shape[:-1] + (2,), float("nan"))
    return torch.cat([pad, theta], dim=-1)


def curvature(h: Tensor, k: int) -> Tensor:
    """Contextual curvature c_t = mean of the last ``k`` turning angles θ_{t−k+1..t}, shape (…, T); NaN at t ≤ k."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    theta = turning_angles(h)
    t = theta.shape[-1]
    out = theta.new_full(theta.shape, float("nan"))
    if t <= k + 1:
        return out
    csum = torch.cumsum(theta[..., 2:], dim=-1)  # csum[..., j] = θ_2 + … + θ_{j+2}
    window = torch.cat([csum[..., k - 1:k], csum[..., k:] - csum[..., :-k]], dim=-1)
    out[..., k + 1:] = window / k
    return out


def next_token_entropy(logits: Tensor) -> Tensor:
    """Entropy in nats of the softmax over the last axis: (…, V) → (…)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def straightness_loss(hidden: Sequence[Tensor], lam: float) -> Tensor:
    """The straightness regulariser λ · mean turning angle over every defined position of every layer in ``hidden``
    (each (…, T, d)); add it to the training loss."""
    if not hidden:
        raise ValueError("straightness_loss needs at least one layer")
    angles = torch.cat([turning_angles(h)[..., 2:].reshape(-1) for h in hidden])
    return lam * angles.mean()


def perturbation_directions(h: Tensor, positions: Tensor, generator: torch.Generator,
                            eps: float = 1e-8) -> tuple[Tensor, Tensor]:
    """Unit directions at ``positions`` (m,) of one trajectory ``h`` (T, d), each position ≥ 2: ``aligned`` (m, d)
    along the latest step v_t, ``misaligned`` (m, d) random (from ``generator``) and orthogonal to v_{t−1} and v_t."""
    if h.dim() != 2:
        raise ValueError(f"h must be (T, d), got shape {tuple(h.shape)}")
    positions = torch.as_tensor(positions, dtype=torch.long)
    if positions.numel() and (int(positions.min()) < 2 or int(positions.max()) >= h.shape[0]):
        raise ValueError(f"positions must lie in [2, {h.shape[0] - 1}]")
    v_now = h[positions] - h[positions - 1]
    v_prev = h[positions - 1] - h[positions - 2]
    aligned = v_now / v_now.norm(dim=-1, keepdim=True).clamp_min(eps)
    # Gram–Schmidt: an orthonormal basis of the local trajectory plane, then remove it from a Gaussian draw.
    e1 = aligned
    p = v_prev - (v_prev * e1).sum(-1, keepdim=True) * e1
    e2 = p / p.norm(dim=-1, keepdim=True).clamp_min(eps)
    r = torch.randn(h[positions].shape, generator=generator, dtype=h.dtype)
    r = r - (r * e1).sum(-1, keepdim=True) * e1
    r = r - (r * e2).sum(-1, keepdim=True) * e2
    misaligned = r / r.norm(dim=-1, keepdim=True).clamp_min(eps)
    return aligned, misaligned
