"""A tiny pre-LN causal transformer with the internals the geometry methods need exposed.

``forward`` can return every layer's residual stream (curvature), every layer's attention keys (KV-cache scoring),
accept an extra per-layer, per-head attention mask (KV eviction after prefill is exactly "later rows may not attend
to evicted columns"), add a per-layer shift to the attention keys (planting keys of a chosen geometry in the cache),
and take an input-embedding tensor instead of ids (learnable look-ahead tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn import functional as F


@dataclass(frozen=True)
class TinyGPTConfig:
    """Sizes of the model; ~70–150 ms per training step on one core at the defaults with batch 32 × 128."""

    vocab: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    max_len: int = 256
    mlp_mult: int = 4


@dataclass
class TinyGPTOutput:
    """Logits plus whatever was asked for: residual streams (n_layers + 1 entries) and keys per layer (B, H, T, dh)."""

    logits: Tensor
    hidden: list[Tensor] = field(default_factory=list)
    keys: list[Tensor] = field(default_factory=list)


class Block(nn.Module):
    """Pre-LN attention + MLP block with explicit q/k/v so keys can be read and heads masked."""

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.n_heads, self.d_head = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.mlp_mult * cfg.d_model), nn.GELU(),
                                 nn.Linear(cfg.mlp_mult * cfg.d_model, cfg.d_model))

    def forward(self, x: Tensor, allowed: Tensor, key_shift: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``allowed``: bool, broadcastable to (B, H, T, T), True where row may attend to column; ``key_shift``
        (broadcastable to (B, H, T, dh)) is added to the keys before attention."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, self.d_head).transpose(1, 2) for z in (q, k, v))
        if key_shift is not None:
            k = k + key_shift
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        x = x + self.mlp(self.ln2(x))
        return x, k


class TinyGPT(nn.Module):
    """Token + learned position embeddings, ``n_layers`` blocks, final LayerNorm, untied output head."""

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab)

    def forward(self, ids: Tensor | None = None, *, embeds: Tensor | None = None, head_mask: Tensor | None = None,
                return_hidden: bool = False, return_keys: bool = False,
                key_shift: Tensor | None = None) -> TinyGPTOutput:
        """Run on ``ids`` (B, T) or ``embeds`` (B, T, d). ``head_mask``: bool (B or 1, n_layers, H, T, T), True =
        may attend, combined with the causal mask. ``key_shift``: (B or 1, n_layers, H, T, dh) added to every
        layer's keys (the returned keys include it)."""
        x = self.tok(ids) if embeds is None else embeds
        b, t, _ = x.shape
        x = x + self.pos(torch.arange(t, device=x.device))
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        out = TinyGPTOutput(logits=x.new_zeros(0))
        if return_hidden:
            out.hidden.append(x)
        for i, block in enumerate(self.blocks):
            allowed = causal if head_mask is None else causal & head_mask[:, i]
            x, k = block(x, allowed, None if key_shift is None else key_shift[:, i])
            if return_hidden:
                out.hidden.append(x)
            if return_keys:
                out.keys.append(k)
        out.logits = self.head(self.ln_f(x))
        return out
