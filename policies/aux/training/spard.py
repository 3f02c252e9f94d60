"""SPARD: safety-projected alternating fine-tuning with a relevance–diversity DPP choice of the safe set.

Fine-tuning alternates a utility step on the (possibly poisoned) fine-tuning data with a safety check: when the
safety loss ``L_s`` on the small safe set exceeds ``τ + δ``, the parameters take projection steps

    θ ← θ − min((L_s − τ) / ‖g‖², η / ‖g‖) · g,        g = ∇θ L_s,

i.e. a Polyak step that would bring the (linearised) safety loss down to ``τ``, capped at length ``η``.

The safe set (``k`` ≈ 3 % of the fine-tuning set) is the greedy MAP of a DPP whose kernel trades relevance to the
fine-tuning data against diversity: ``L = diag(q) · cos(E, E) · diag(q)`` with ``q_i = (max_j cos(e_i, r_j))^β`` for
candidate embeddings ``e_i`` and fine-tuning (reference) embeddings ``r_j``. The greedy MAP adds, one at a time, the
item with the largest gain in ``log det L_S``, computed by incremental Cholesky updates in ``O(n k²)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np
import torch

SafetyMode = Literal["project", "gradient", "none"]


def relevance_diversity_kernel(candidates: np.ndarray, references: np.ndarray, beta: float = 1.0) -> np.ndarray:
    """DPP kernel ``diag(q) cos(E, E) diag(q)``, ``q_i = (max_j cos(e_i, r_j))^β`` (negative similarities → 0)."""
    if candidates.ndim != 2 or references.ndim != 2 or candidates.shape[1] != references.shape[1]:
        raise ValueError(f"embeddings must be n × d and m × d, got {candidates.shape} and {references.shape}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    e = candidates / np.maximum(np.linalg.norm(candidates, axis=1, keepdims=True), 1e-12)
    r = references / np.maximum(np.linalg.norm(references, axis=1, keepdims=True), 1e-12)
    q = np.clip((e @ r.T).max(axis=1), 0.0, None) ** beta
    return q[:, None] * (e @ e.T) * q[None, :]


def greedy_dpp_map(kernel: np.ndarray, k: int, eps: float = 1e-10) -> list[int]:
    """Greedy MAP of a DPP by incremental Cholesky: each step adds ``argmax_j log det L_{S ∪ {j}}``.

    ``d2[j]`` holds the Schur complement ``L_jj − c_jᵀ c_j`` = the factor by which adding ``j`` multiplies
    ``det L_S``; choosing ``j`` appends ``e = (L_{j,:} − c_jᵀ C) / sqrt(d2[j])`` as a new Cholesky row for every item.
    Stops early when no item adds more than ``eps`` (the kernel's rank is exhausted).
    """
    kernel = np.asarray(kernel, dtype=np.float64)
    n = kernel.shape[0]
    if kernel.shape != (n, n):
        raise ValueError(f"kernel must be square, got {kernel.shape}")
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, {n}], got {k}")
    c = np.zeros((k, n))
    d2 = np.diag(kernel).copy()
    selected: list[int] = []
    for t in range(k):
        gains = d2.copy()
        gains[selected] = -np.inf
        j = int(np.argmax(gains))
        if gains[j] <= eps:
            break
        selected.append(j)
        e = (kernel[j] - c[:t, j] @ c[:t]) / math.sqrt(d2[j])
        c[t] = e
        d2 = d2 - e**2
    return selected


def select_safe_set(
    candidates: np.ndarray, references: np.ndarray, k: int, beta: float = 1.0
) -> list[int]:
    """Indices of ``k`` candidates (safety examples) that are relevant to the references and diverse."""
    return greedy_dpp_map(relevance_diversity_kernel(candidates, references, beta), k)


def safety_projection_step(params: list[torch.Tensor], safety_loss: torch.Tensor, tau: float, eta: float) -> float:
    """One step ``θ ← θ − min((L_s − τ)/‖g‖², η/‖g‖) g`` in place; returns the step length taken (0 if none)."""
    grads = torch.autograd.grad(safety_loss, params, allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
    excess = safety_loss.item() - tau
    if norm < 1e-12 or excess <= 0:
        return 0.0
    step = min(excess / norm**2, eta / norm)
    with torch.no_grad():
        for p, g in zip(params, grads, strict=True):
            p -= step * g
    return step * norm


def alternating_finetune(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    utility_batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    utility_loss: Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor],
    safety_loss: Callable[[torch.nn.Module], torch.Tensor],
    mode: SafetyMode = "project",
    tau: float = 0.2,
    delta: float = 0.1,
    eta: float = 1.0,
    max_projections: int = 5,
) -> dict[str, float]:
    """Fine-tune with utility steps alternating with safety steps; returns counts of what happened.

    ``mode``: ``"project"`` (SPARD: projection steps while ``L_s > τ + δ``), ``"gradient"`` (alternation without
    projection: one optimiser step on ``L_s`` after every utility step) or ``"none"`` (plain fine-tuning).
    """
    if mode not in ("project", "gradient", "none"):
        raise ValueError(f"unknown safety mode {mode!r}; valid: project, gradient, none")
    if tau < 0 or delta < 0 or eta <= 0 or max_projections < 1:
        raise ValueError(f"need tau, delta >= 0, eta > 0, max_projections >= 1; got {tau}, {delta}, {eta}, "
                          f"{max_projections}")
    params = [p for p in model.parameters() if p.requires_grad]
    steps = projections = triggered = 0
    for x, y in utility_batches:
        optimizer.zero_grad()
        utility_loss(model, x, y).backward()
        optimizer.step()
        steps += 1
        if mode == "gradient":
            optimizer.zero_grad()
            safety_loss(model).backward()
            optimizer.step()
        elif mode == "project":
            loss = safety_loss(model)
            if loss.item() > tau + delta:
                triggered += 1
                for _ in range(max_projections):
                    if safety_projection_step(params, loss, tau, eta) == 0.0:
                        break
                    projections += 1
                    loss = safety_loss(model)
                    if loss.item() <= tau + delta:
                        break
    return {"utility_steps": steps, "projection_triggers": triggered, "projection_steps": projections}
