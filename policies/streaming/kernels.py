"""Fused CPU kernels (numba) for the per-step vector work of the streaming learners.

A batch-1 streaming update is bound by memory passes and per-op overhead, not arithmetic: torch spends one pass
(and one dispatch) per elementwise op. Each kernel here does in one or two passes what took four to six torch
ops. The kernels work on numpy views of torch tensors (``Tensor.numpy()`` shares memory), so results land in
place.

Reductions accumulate in float64 and may be reassociated (vectorised); they are deterministic for a given machine
and build, like torch's own reductions.
"""

from __future__ import annotations

import numba
import numpy as np

# ``reassoc`` lets LLVM vectorise the reductions; no ``contract``, so a*b + c is rounded as written (no FMA).
FASTMATH = {"reassoc", "nsz"}


@numba.njit(cache=True, fastmath=FASTMATH)
def decay_add_l1_(z: np.ndarray, g: np.ndarray, decay: float) -> float:
    """z ← decay·z + g in place; returns ‖z‖₁ of the result (the eligibility-trace update of ObGD).

    Pass ``decay`` in z's dtype (e.g. ``np.float32``) so the update is computed, and the norm taken, in that
    precision; a Python float promotes the arithmetic to float64.
    """
    if g.size != z.size:
        raise ValueError("decay_add_l1_: z and g differ in size")
    total = 0.0
    for i in range(z.size):
        v = decay * z[i] + g[i]
        z[i] = v
        total += abs(v)
    return total


@numba.njit(cache=True, fastmath=FASTMATH)
def _decay_add_row_l1_(z, u_a, v, decay):  # z ← decay·z + u_a·v on one row of the outer-product block
    total = 0.0
    for j in range(v.size):
        val = decay * z[j] + u_a * v[j]
        z[j] = val
        total += abs(val)
    return total


@numba.njit(cache=True, fastmath=FASTMATH)
def decay_add_outer_l1_(z: np.ndarray, g: np.ndarray, decay: float, start: int, u: np.ndarray,
                        v: np.ndarray) -> float:
    """:func:`decay_add_l1_` where the block ``z[start : start + u.size·v.size]`` adds the outer product u·vᵀ
    (row-major) in place of ``g``'s entries there, which are not read: a weight gradient g·xᵀ goes straight
    into the trace without being written out first. The per-entry arithmetic is the same as
    ``decay_add_l1_`` on the materialised product (one float32 product, then the add)."""
    end = start + u.size * v.size
    if g.size != z.size or start < 0 or end > z.size:
        raise ValueError("decay_add_outer_l1_: sizes do not fit")
    total = 0.0
    for i in range(start):
        val = decay * z[i] + g[i]
        z[i] = val
        total += abs(val)
    for a in range(u.size):  # a separate row loop (and accumulator) so LLVM vectorises it
        total += _decay_add_row_l1_(z[start + a * v.size:start + (a + 1) * v.size], u[a], v, decay)
    for i in range(end, z.size):
        val = decay * z[i] + g[i]
        z[i] = val
        total += abs(val)
    return total


@numba.njit(cache=True, fastmath=FASTMATH)
def l1_norm(z: np.ndarray) -> float:
    """‖z‖₁ (float64 accumulation)."""
    total = 0.0
    for i in range(z.size):
        total += abs(z[i])
    return total


@numba.njit(cache=True, fastmath=FASTMATH)
def _projection_coef(g: np.ndarray, c: np.ndarray, eps: float) -> float:
    """⟨g,c⟩/(‖c‖²+ε): how much of g lies along the momentum c (one pass)."""
    gc = 0.0
    cc = 0.0
    for i in range(g.size):
        gc += g[i] * c[i]
        cc += c[i] * c[i]
    return gc / (cc + eps)


@numba.njit(cache=True, fastmath=FASTMATH)
def momentum_project_(g: np.ndarray, c: np.ndarray, beta: float, eps: float, out: np.ndarray) -> None:
    """out = g − (⟨g,c⟩/(‖c‖²+ε)) c, then c ← β c + (1−β) out in place (two passes)."""
    if c.size != g.size or out.size != g.size:
        raise ValueError("momentum_project_: g, c and out differ in size")
    coef = _projection_coef(g, c, eps)
    for i in range(g.size):
        u = g[i] - coef * c[i]
        out[i] = u
        c[i] = beta * c[i] + (1.0 - beta) * u


@numba.njit(cache=True, fastmath=FASTMATH)
def momentum_project_step_(g: np.ndarray, c: np.ndarray, beta: float, eps: float, params: np.ndarray,
                           alpha: float) -> None:
    """:func:`momentum_project_` whose projected gradient u is applied at once, params += α·u, instead of being
    written out: one pass less over a large head's gradient (u and c are computed exactly as there)."""
    if c.size != g.size or params.size != g.size:
        raise ValueError("momentum_project_step_: g, c and params differ in size")
    coef = _projection_coef(g, c, eps)
    a = params.dtype.type(alpha)
    for i in range(g.size):
        u = g[i] - coef * c[i]
        params[i] += a * params.dtype.type(u)
        c[i] = beta * c[i] + (1.0 - beta) * u


@numba.njit(cache=True, fastmath=FASTMATH)
def ema_(target: np.ndarray, online: np.ndarray, weight: float) -> None:
    """target ← target + w·(online − target) in place, in target's precision (an EMA step with w = 1 − τ)."""
    if online.size != target.size:
        raise ValueError("ema_: target and online differ in size")
    w = target.dtype.type(weight)
    for i in range(target.size):
        target[i] += w * (online[i] - target[i])


@numba.njit(cache=True)
def welford_normalize_(x: np.ndarray, count: int, mean: np.ndarray, m2: np.ndarray, eps: float,
                       out: np.ndarray) -> None:
    """Add sample ``x`` (the ``count``-th) to the running float64 mean/M2 in place, then write
    (x − mean)/√(var + ε) to ``out`` (float32), var being the sample variance (1 before two samples)."""
    if mean.size != x.size or m2.size != x.size or out.size != x.size:
        raise ValueError("welford_normalize_: x, mean, m2 and out differ in size")
    inv_n = 1.0 / count
    inv_dof = 1.0 / (count - 1) if count >= 2 else 0.0
    var_one = 1.0 if count < 2 else 0.0  # keeps the inner loop branch-free
    for i in range(x.size):
        xi = np.float64(x[i])
        delta = xi - mean[i]
        mu = mean[i] + delta * inv_n
        mean[i] = mu
        m2[i] += delta * (xi - mu)
        var = m2[i] * inv_dof + var_one
        out[i] = (np.float32(xi) - np.float32(mu)) / np.sqrt(np.float32(var + eps))  # float32 sqrt/div
