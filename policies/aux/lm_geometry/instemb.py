"""InstEmb: instruction-following embeddings from a causal LM without decoding the answer.

An input (text + instruction) is embedded by one forward pass of a causal LM. Two training signals shape two
"anchors" of that pass:

- input-intrinsic: InfoNCE on the hidden state of the **last input token** (query vs. target documents);
- output-aware: ``K`` learnable **look-ahead tokens** are appended to the input; the mean of their final hidden states
  is self-distilled (``1 − cos``, teacher side without gradient) toward the pooled representation of the **golden
  output** — the answer the LM would generate — encoded by the same model.

**Dual-Anchor Alignment Pooling** (DAAP) scores each anchor in the space its objective trained it in and mixes the
two scores: with ``n(·)`` the unit-normalisation, ``e = [√α · n(h_last), √(1−α) · n(mean_k h_lookahead_k)]`` so that
``cos(e_a, e_b) = α·cos(last_a, last_b) + (1−α)·cos(look_a, look_b)`` (both halves are unit, ``‖e‖ = 1``).

Baselines share the same helpers: mean pooling and last-token pooling trained with InfoNCE alone, and
generate-then-re-encode (greedy decoding of the answer, then embedding the generated text as a document).

Sequences are right-padded id tensors with per-row ``lengths``; in a causal model the pads after a row's last real
token can never influence that row's real positions, so no attention mask is needed. Look-ahead tokens are written
directly after each row's last real token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from policies.aux.lm_geometry.tiny_gpt import TinyGPT


@dataclass(frozen=True)
class InstEmbConfig:
    """Hyper-parameters of InstEmb (fixed before any evaluation; none is chosen on test data)."""

    n_lookahead: int = 4  # K learnable look-ahead tokens
    alpha: float = 0.5  # DAAP weight of the last-token anchor; 1 − alpha goes to the look-ahead anchor
    temperature: float = 0.05  # InfoNCE temperature
    distill_weight: float = 1.0  # weight of the look-ahead self-distillation loss

    def __post_init__(self) -> None:
        if self.n_lookahead < 1:
            raise ValueError(f"n_lookahead must be >= 1, got {self.n_lookahead}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")


def final_states(model: TinyGPT, ids: Tensor | None = None, *, embeds: Tensor | None = None) -> Tensor:
    """Final-layer hidden states after the output LayerNorm (B, T, d): what the LM head reads."""
    return model.ln_f(model(ids, embeds=embeds, return_hidden=True).hidden[-1])


def _row_index(lengths: Tensor) -> Tensor:
    return torch.arange(lengths.shape[0], device=lengths.device)


def last_token_pool(h: Tensor, lengths: Tensor) -> Tensor:
    """Hidden state of each row's last real token: ``h[b, lengths[b] − 1]`` (B, d)."""
    return h[_row_index(lengths), lengths - 1]


def span_mean_pool(h: Tensor, start: Tensor, end: Tensor) -> Tensor:
    """Mean of ``h[b, start[b]:end[b]]`` per row (B, d); every span must be non-empty."""
    if bool((end <= start).any()):
        raise ValueError("every span must hold at least one position")
    pos = torch.arange(h.shape[1], device=h.device)
    w = ((pos[None] >= start[:, None]) & (pos[None] < end[:, None])).to(h.dtype)
    return (w[..., None] * h).sum(1) / w.sum(1, keepdim=True)


def mean_pool(h: Tensor, lengths: Tensor) -> Tensor:
    """Mean over each row's real tokens ``h[b, :lengths[b]]`` (B, d): the mean-pooling baseline."""
    return span_mean_pool(h, torch.zeros_like(lengths), lengths)


def daap(last: Tensor, lookahead: Tensor, alpha: float) -> Tensor:
    """Dual-Anchor Alignment Pooling: ``[√α n(last), √(1−α) n(lookahead)]`` (B, 2d), unit norm.

    The dot product of two DAAP vectors is ``α cos(last) + (1−α) cos(lookahead)``: each anchor is compared only with
    the same anchor of the other side, i.e. in the space its own training objective shaped.
    """
    return torch.cat([math.sqrt(alpha) * F.normalize(last, dim=-1),
                      math.sqrt(1.0 - alpha) * F.normalize(lookahead, dim=-1)], dim=-1)


def info_nce(q: Tensor, d: Tensor, labels: Tensor, temperature: float) -> Tensor:
    """InfoNCE: cross-entropy of ``cos(q_i, d_j)/τ`` over candidates ``d`` with the positive ``d[labels[i]]``."""
    logits = F.normalize(q, dim=-1) @ F.normalize(d, dim=-1).T / temperature
    return F.cross_entropy(logits, labels)


def distill_loss(student: Tensor, teacher: Tensor) -> Tensor:
    """Self-distillation ``mean(1 − cos(student, stopgrad(teacher)))``: the teacher gets no gradient."""
    return (1 - F.cosine_similarity(student, teacher.detach(), dim=-1)).mean()


class LookAhead(nn.Module):
    """``K`` learnable input embeddings appended after each row's last real token."""

    def __init__(self, k: int, d_model: int, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.tokens = nn.Parameter(0.02 * torch.randn(k, d_model, generator=generator))

    def append(self, tok_embeds: Tensor, lengths: Tensor) -> Tensor:
        """(B, T, d) right-padded embeddings → (B, T + K, d) with the K tokens at ``lengths[b] … lengths[b]+K−1``."""
        b, t, d = tok_embeds.shape
        k = self.tokens.shape[0]
        if bool((lengths == t).all()):  # no padding (e.g. one query at a time): a plain concatenation
            return torch.cat([tok_embeds, self.tokens.expand(b, k, d)], dim=1)
        out = torch.cat([tok_embeds, tok_embeds.new_zeros(b, k, d)], dim=1)
        slots = lengths[:, None] + torch.arange(k, device=lengths.device)[None]  # (B, K)
        rows = _row_index(lengths)[:, None].expand(b, k)
        return out.index_put((rows, slots), self.tokens.expand(b, k, d))


class InstEmbEncoder(nn.Module):
    """A causal LM plus look-ahead tokens; ``embed`` returns DAAP vectors, ``anchors`` both anchors separately."""

    def __init__(self, model: TinyGPT, cfg: InstEmbConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.model, self.cfg = model, cfg
        self.lookahead = LookAhead(cfg.n_lookahead, model.cfg.d_model, generator)

    def anchors(self, ids: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """(last-input-token state, mean look-ahead state), each (B, d), from one forward pass of length T + K."""
        x = self.lookahead.append(self.model.tok(ids), lengths)
        h = final_states(self.model, embeds=x)
        # The K look-ahead slots are contiguous: one gather instead of a masked mean keeps the per-query overhead
        # of the extra anchor to the K extra positions themselves.
        slots = lengths[:, None] + torch.arange(self.cfg.n_lookahead, device=lengths.device)[None]
        return last_token_pool(h, lengths), h[_row_index(lengths)[:, None], slots].mean(1)

    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """DAAP embedding (B, 2d)."""
        last, look = self.anchors(ids, lengths)
        return daap(last, look, self.cfg.alpha)

    def loss(self, q_ids: Tensor, q_len: Tensor, d_ids: Tensor, d_len: Tensor, labels: Tensor,
             gold_ids: Tensor, gold_start: Tensor, gold_end: Tensor,
             d_span: tuple[Tensor, Tensor] | None = None,
             teacher: TinyGPT | None = None) -> tuple[Tensor, dict[str, float]]:
        """InstEmb training loss for a batch.

        ``q_*``: inputs (text + instruction); ``d_*``: candidate documents, ``labels[i]`` = the positive of query i;
        ``gold_ids``: per query, the sequence whose positions ``gold_start:gold_end`` hold the golden output (the
        teacher pass). Documents are their own golden output (a document *is* an answer), so their look-ahead anchor
        is distilled toward the mean of their own tokens ``d_span`` (start, end; default all real tokens), which keeps
        both sides' look-ahead anchors in one space. ``teacher``: the model that encodes golden outputs (default the
        model being trained, i.e. self-distillation from its current weights; pass a frozen copy to stop the target
        from drifting).
        """
        q_last, q_look = self.anchors(q_ids, q_len)
        d_last, d_look = self.anchors(d_ids, d_len)
        contrast = info_nce(q_last, d_last, labels, self.cfg.temperature)
        teacher = self.model if teacher is None else teacher
        with torch.no_grad():
            gold = span_mean_pool(final_states(teacher, gold_ids), gold_start, gold_end)
            start, end = d_span if d_span is not None else (torch.zeros_like(d_len), d_len)
            d_gold = span_mean_pool(final_states(teacher, d_ids), start, end)
        distil = 0.5 * (distill_loss(q_look, gold) + distill_loss(d_look, d_gold))
        total = contrast + self.cfg.distill_weight * distil
        return total, {"info_nce": contrast.item(), "distill": distil.item()}


@torch.no_grad()
def greedy_generate(model: TinyGPT, ids: Tensor, lengths: Tensor, max_new: int, eos: int) -> tuple[Tensor, Tensor]:
    """Greedy decoding after each row's prompt (no KV cache: one full forward per new token, as a tiny LM allows).

    Returns the generated ids (B, max_new) — positions after a row's EOS are EOS — and the number of tokens before
    EOS per row. Stops early once every row has emitted EOS.
    """
    b = ids.shape[0]
    seq = torch.cat([ids, ids.new_full((b, max_new), eos)], dim=1)
    out = ids.new_full((b, max_new), eos)
    done = torch.zeros(b, dtype=torch.bool)
    n_out = torch.full((b,), max_new, dtype=torch.long)
    rows = _row_index(lengths)
    for s in range(max_new):
        logits = model(seq[:, :int(lengths.max()) + s]).logits
        nxt = logits[rows, lengths - 1 + s].argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, eos), nxt)
        newly = (nxt == eos) & ~done
        n_out[newly] = s
        done |= newly
        out[:, s] = nxt
        seq[rows, lengths + s] = nxt
        if bool(done.all()):
            break
    return out, n_out
