"""Theseus: transport a task vector (fine-tuning update) between networks of different widths.

For each layer boundary ``l`` a map ``T_l`` (``d_src × d_tgt``) relates the source model's units to the target's,
fitted on calibration activations ``A_s`` (``m × d_src``) and ``A_t`` (``m × d_tgt``) of the same inputs. Theseus uses
orthogonal Procrustes, ``T = U Vᵀ`` from the SVD ``A_sᵀ A_t = U S Vᵀ`` (the (semi-)orthogonal ``T`` minimising
``‖A_s T − A_t‖_F``). A linear layer's update ``ΔW_s`` (``out × in``, torch layout) then moves to the target as

    ΔW_t = α · T_outᵀ ΔW_s T_in,        Δb_t = α · T_outᵀ Δb_s,

with ``T_in`` the map of the layer's input space and ``T_out`` that of its output space (identity where both models
share the space, e.g. pixels in and classes out). ``least_squares_map`` is the unconstrained alternative.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def procrustes_map(a_src: torch.Tensor, a_tgt: torch.Tensor, center: bool = False) -> torch.Tensor:
    """Orthogonal Procrustes map ``T = U Vᵀ`` (``d_src × d_tgt``) from paired activations ``m × d_src`` / ``m × d_tgt``.

    With ``d_src ≤ d_tgt`` the rows of ``T`` are orthonormal (``T Tᵀ = I``), otherwise its columns are.
    ``center`` subtracts each side's mean activation first (the paper's form uses raw activations).
    """
    _check_pair(a_src, a_tgt)
    a_src, a_tgt = a_src.double(), a_tgt.double()
    if center:
        a_src, a_tgt = a_src - a_src.mean(0), a_tgt - a_tgt.mean(0)
    u, _, vh = torch.linalg.svd(a_src.T @ a_tgt, full_matrices=False)
    return (u @ vh).float()


def least_squares_map(a_src: torch.Tensor, a_tgt: torch.Tensor, ridge: float = 1e-3) -> torch.Tensor:
    """Unconstrained (ridge-regularised) map ``argmin_T ‖A_s T − A_t‖² + ridge·m·‖T‖²`` (``d_src × d_tgt``)."""
    _check_pair(a_src, a_tgt)
    a_src, a_tgt = a_src.double(), a_tgt.double()
    gram = a_src.T @ a_src + ridge * a_src.shape[0] * torch.eye(a_src.shape[1], dtype=a_src.dtype)
    return torch.linalg.solve(gram, a_src.T @ a_tgt).float()


def pad_truncate_map(d_src: int, d_tgt: int) -> torch.Tensor:
    """Index-matching map: unit i of the source is unit i of the target (extra target units get nothing)."""
    return torch.eye(d_src, d_tgt)


def transport_update(
    delta_w: torch.Tensor, t_in: torch.Tensor | None, t_out: torch.Tensor | None, alpha: float = 1.0
) -> torch.Tensor:
    """``α · T_outᵀ ΔW T_in`` for a weight update (``out × in``) or ``α · T_outᵀ Δb`` for a bias (1-D).

    ``None`` stands for the identity (a space both models share).
    """
    out = delta_w
    if out.ndim == 2 and t_in is not None:
        if t_in.shape[0] != out.shape[1]:
            raise ValueError(f"T_in has {t_in.shape[0]} rows but the update has {out.shape[1]} inputs")
        out = out @ t_in
    if t_out is not None:
        if t_out.shape[0] != out.shape[0]:
            raise ValueError(f"T_out has {t_out.shape[0]} rows but the update has {out.shape[0]} outputs")
        out = t_out.T @ out
    return alpha * out


def transport_chain(
    deltas: Sequence[tuple[torch.Tensor, torch.Tensor]], maps: Sequence[torch.Tensor | None], alpha: float = 1.0
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Transport the (ΔW, Δb) of a chain of L linear layers given L + 1 boundary maps.

    ``maps[0]`` is the input space of layer 0, ``maps[l + 1]`` the output space of layer ``l`` (= input of ``l + 1``);
    ``None`` means identity.
    """
    if len(maps) != len(deltas) + 1:
        raise ValueError(f"a chain of {len(deltas)} layers needs {len(deltas) + 1} maps, got {len(maps)}")
    return [
        (transport_update(dw, maps[i], maps[i + 1], alpha), transport_update(db, None, maps[i + 1], alpha))
        for i, (dw, db) in enumerate(deltas)
    ]


def _check_pair(a_src: torch.Tensor, a_tgt: torch.Tensor) -> None:
    if a_src.ndim != 2 or a_tgt.ndim != 2 or a_src.shape[0] != a_tgt.shape[0]:
        raise ValueError(
            f"activations must be m × d matrices over the same m inputs, got {tuple(a_src.shape)} and "
            f"{tuple(a_tgt.shape)}"
        )
