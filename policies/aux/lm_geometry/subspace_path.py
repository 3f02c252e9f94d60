"""SubspacePath: prune attention heads whose residual writes do not move a scenario's texts along its domain axes.

For one scenario (a set of calibration texts from one domain or a mix):

1. **Domain axes** in the final embedding space: an orthonormal basis of the scenario's domain offsets (its domain
   centroids minus a reference mean, e.g. the mean over all domains) and the top principal directions of its
   centred embeddings — the directions along which the scenario's texts sit and differ.
2. **Per-layer linear probes**: a ridge map ``P_l`` from the residual stream entering layer ``l`` to the final
   embedding, so a write into layer ``l``'s residual can be read in embedding-space coordinates.
3. **Head importance**: head ``h`` of layer ``l`` writes ``w = W_O[:, h] · ctx_h`` into the residual (its slice of the
   output projection applied to its attention output). Importance = root-mean-square over the scenario's texts of
   ``‖A P_lᵀ w̄‖`` (``w̄`` the text's token-mean write, ``A`` the axes): how far the head moves texts along the axes.
4. **Keep ratio**: ``ρ = ρ_min + η · breadth`` (clipped to [ρ_min, 1]) or a fixed budget; the ``round(ρ · L · H)``
   most important heads are kept (at least one per layer) and the mask is reused for every query of the scenario.

Baselines: seeded random heads, weight magnitude (norm of the head's q/k/v rows and output columns), and Taylor
importance (``|∂loss/∂m|`` of a multiplicative head gate ``m`` at 1, averaged over calibration batches).

Heads are switched off by a forward pre-hook on each layer's output projection that multiplies the per-head slices
of its input (the attention output) by a 0/1 gate, and removed for real by slicing the q/k/v rows and the output
projection's columns (``slice_heads``). transformers 5 has no ``head_mask``/``prune_heads``, so both are done here on
plain ``nn.Linear`` modules; the model-specific wiring (which modules, head counts) stays with the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn


@dataclass
class AttentionProjections:
    """One layer's attention linears: q/k/v map d_model → H·d_head (head-major rows), ``out`` maps back."""

    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    out: nn.Linear


@dataclass(frozen=True)
class PruneConfig:
    """How SubspacePath builds axes and probes and how many heads it keeps."""

    n_pcs: int = 8  # principal directions of the scenario's embeddings added to its domain offsets
    probe_ridge: float = 1e-2  # ridge strength relative to the mean feature variance
    rho_min: float = 0.5  # keep ratio of the narrowest scenario
    eta: float = 0.4  # extra keep ratio per unit of breadth
    min_heads_per_layer: int = 1  # a layer with no head left cannot be sliced (and loses its attention entirely)


# ---------------------------------------------------------------------------------------------- axes and probes


def domain_axes(embeddings: Tensor, labels: Sequence[int] | None = None, reference_mean: Tensor | None = None,
                n_pcs: int = 8) -> Tensor:
    """Orthonormal rows (k, d) spanning the scenario's domain offsets and its top ``n_pcs`` principal directions.

    ``embeddings`` (N, d); ``labels`` the domain of each row (one domain if None); ``reference_mean`` (d,) the mean the
    domain offsets are measured from (no offsets if None).
    """
    x = embeddings.double()
    cols = []
    if reference_mean is not None:
        lab = torch.zeros(len(x), dtype=torch.long) if labels is None else torch.as_tensor(labels)
        for d in lab.unique().tolist():
            cols.append(x[lab == d].mean(0) - reference_mean.double())
    centred = x - x.mean(0)
    if n_pcs > 0:
        _, _, vh = torch.linalg.svd(centred, full_matrices=False)
        cols.extend(vh[:n_pcs])
    if not cols:
        raise ValueError("domain_axes needs a reference_mean or n_pcs > 0")
    q, r = torch.linalg.qr(torch.stack(cols, dim=1))
    keep = r.diagonal().abs() > 1e-8 * r.diagonal().abs().max()  # drop directions already spanned
    return q[:, keep].T.to(embeddings.dtype)


def fit_probe(features: Tensor, targets: Tensor, ridge: float = 1e-2) -> tuple[Tensor, Tensor]:
    """Ridge regression ``targets ≈ features @ W + b``; returns (W (d_in, d_out), b (d_out,)).

    ``ridge`` is scaled by the mean feature variance so one value suits layers of very different scales.
    """
    x, y = features.double(), targets.double()
    mx, my = x.mean(0), y.mean(0)
    xc, yc = x - mx, y - my
    lam = ridge * float(xc.pow(2).mean()) * len(x)
    w = torch.linalg.solve(xc.T @ xc + lam * torch.eye(x.shape[1], dtype=x.dtype), xc.T @ yc)
    return w.to(features.dtype), (my - mx @ w).to(features.dtype)


def breadth(embeddings: Tensor, reference: Tensor) -> float:
    """Participation ratio of the scenario's embedding spectrum over the reference's, clipped to [0, 1].

    A narrow scenario (texts along few directions) scores near 0; one as varied as the reference scores 1.
    """
    def pr(x: Tensor) -> float:
        ev = torch.linalg.svdvals((x - x.mean(0)).double()).pow(2)
        return float(ev.sum() ** 2 / ev.pow(2).sum())
    return float(np.clip(pr(embeddings) / pr(reference), 0.0, 1.0))


def keep_ratio(breadth_value: float, rho_min: float, eta: float) -> float:
    """ρ = ρ_min + η · breadth, clipped to [ρ_min, 1]: broader scenarios keep more heads."""
    return float(np.clip(rho_min + eta * breadth_value, rho_min, 1.0))


# ---------------------------------------------------------------------------------------------- importance


def head_writes(context: Tensor, out_weight: Tensor, n_heads: int) -> Tensor:
    """Per-head residual writes (..., H, d_model) from the attention output ``context`` (..., H·d_head).

    Head h writes ``W_O[:, h·dh:(h+1)·dh] @ context[h·dh:(h+1)·dh]``; the output bias is shared, so it is left out.
    Their sum over heads plus the bias is the output projection.
    """
    d_model = out_weight.shape[0]
    ctx = context.reshape(*context.shape[:-1], n_heads, -1)
    w = out_weight.reshape(d_model, n_heads, -1)
    return torch.einsum("...hd,mhd->...hm", ctx, w)


def subspace_importance(writes: Tensor, probe_weight: Tensor, axes: Tensor) -> Tensor:
    """Importance (H,) of one layer's heads: RMS over texts of ``‖A P_lᵀ w̄‖``.

    ``writes`` (N, H, d_model): each text's token-mean write per head; ``probe_weight`` (d_model, d_embed) the layer's
    probe; ``axes`` (k, d_embed) orthonormal.
    """
    coords = writes @ probe_weight @ axes.T  # (N, H, k): the write read along each axis of the final embedding
    return coords.pow(2).sum(-1).mean(0).sqrt()


def magnitude_importance(layers: Sequence[AttentionProjections], n_heads: int) -> Tensor:
    """(L, H): L2 norm of all of a head's weights (its q, k, v rows and its output-projection columns)."""
    out = []
    for p in layers:
        sq = sum(lin.weight.detach().reshape(n_heads, -1, lin.weight.shape[1]).pow(2).sum((1, 2))
                 for lin in (p.query, p.key, p.value))
        o = p.out.weight.detach()
        sq = sq + o.reshape(o.shape[0], n_heads, -1).pow(2).sum((0, 2))
        out.append(sq.sqrt())
    return torch.stack(out)


def taylor_importance(gate_grads: Sequence[Tensor]) -> Tensor:
    """(L, H): mean over calibration batches of ``|∂loss/∂m|`` (first-order loss change of removing the head)."""
    return torch.stack([g.abs() for g in gate_grads]).mean(0)


def random_importance(n_layers: int, n_heads: int, rng: np.random.Generator) -> Tensor:
    """(L, H) seeded uniform scores: the random-heads baseline."""
    return torch.as_tensor(rng.random((n_layers, n_heads)), dtype=torch.float32)


def select_heads(importance: Tensor, n_keep: int, min_per_layer: int = 1) -> Tensor:
    """Boolean (L, H): the ``n_keep`` most important heads overall, with at least ``min_per_layer`` in every layer."""
    n_layers, n_heads = importance.shape
    if not n_layers * min_per_layer <= n_keep <= n_layers * n_heads:
        raise ValueError(f"n_keep must be in [{n_layers * min_per_layer}, {n_layers * n_heads}], got {n_keep}")
    keep = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    if min_per_layer:
        keep.scatter_(1, importance.topk(min_per_layer, dim=1).indices, True)
    rest = importance.masked_fill(keep, float("-inf")).flatten()
    extra = n_keep - int(keep.sum())
    if extra:
        keep.view(-1)[rest.topk(extra).indices] = True
    return keep


# ---------------------------------------------------------------------------------------------- masking and slicing


class HeadGate:
    """Multiply each layer's per-head attention output by a gate before the output projection (forward pre-hooks).

    ``gates`` (L, H): 0/1 masks switch heads off; a float tensor with ``requires_grad`` gives Taylor gradients.
    With ``capture=True`` the gated attention outputs are kept in ``captured`` (one (..., H·d_head) per layer, last
    forward only). Use as a context manager; hooks are removed on exit.
    """

    def __init__(self, layers: Sequence[AttentionProjections], gates: Tensor | None, n_heads: int,
                 capture: bool = False) -> None:
        self.layers, self.gates, self.n_heads, self.capture = list(layers), gates, n_heads, capture
        self.captured: list[Tensor | None] = [None] * len(self.layers)
        self._handles: list[torch.utils.hooks.RemovableHandle] = []

    def _hook(self, layer: int):
        def pre(_module: nn.Module, args: tuple[Tensor, ...]):
            x = args[0]
            if self.gates is not None:
                g = self.gates[layer].to(x.dtype)
                x = (x.reshape(*x.shape[:-1], self.n_heads, -1) * g[:, None]).reshape(x.shape)
            if self.capture:
                self.captured[layer] = x.detach()
            return (x, *args[1:])
        return pre

    def __enter__(self) -> HeadGate:
        self._handles = [p.out.register_forward_pre_hook(self._hook(i)) for i, p in enumerate(self.layers)]
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


def _slice_linear(lin: nn.Linear, idx: Tensor, dim: int) -> None:
    """Keep only ``idx`` along ``dim`` of the weight (0 = output rows, also slicing the bias; 1 = input columns)."""
    w = lin.weight.detach().index_select(dim, idx).clone()
    lin.weight = nn.Parameter(w, requires_grad=lin.weight.requires_grad)
    if dim == 0:
        if lin.bias is not None:
            lin.bias = nn.Parameter(lin.bias.detach()[idx].clone(), requires_grad=lin.bias.requires_grad)
        lin.out_features = len(idx)
    else:
        lin.in_features = len(idx)


def slice_heads(layer: AttentionProjections, keep: Tensor, head_dim: int) -> int:
    """Physically remove the heads where ``keep`` (H,) is False; returns the number of heads left.

    Rows of q/k/v and columns of the output projection belonging to removed heads are dropped, so the attention
    does less work; the caller updates the attention module's head count. The output equals gating those heads to 0.
    """
    heads = torch.nonzero(keep, as_tuple=False).flatten()
    if len(heads) == 0:
        raise ValueError("slice_heads would leave a layer with no head; keep at least one")
    idx = (heads[:, None] * head_dim + torch.arange(head_dim)).flatten()
    for lin in (layer.query, layer.key, layer.value):
        _slice_linear(lin, idx, 0)
    _slice_linear(layer.out, idx, 1)
    return len(heads)
