"""A small causal transformer that predicts the opponent's next action, its training loop, and a Predictor wrapper.

Input: ``[BOS] + last (context-1) actions``; output at each position: logits over the N actions that come next.
Trained on random crops of sequences sampled from D (``envs.games.sample_sequences``), so it works as a
bounded-context (window = context-1) predictor at any point of a long game.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from envs.config import Options
from envs.errors import ConfigError
from envs.weights import check_finite


@dataclass(frozen=True)
class TransformerConfig(Options):
    """Architecture of the next-token model."""

    n_actions: int = 3
    context: int = 32
    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 2
    alibi: bool = False  # add a learned per-head recency bias -slope * (i - j) to the attention scores


class CausalTransformer(nn.Module):
    """Token + learned position embeddings, pre-LN causal encoder blocks, a linear head over N actions.

    With ``alibi`` every head also gets a learned linear recency bias (ALiBi with trainable slopes, shared by the
    layers): exponentially discounted counts -- a recency-weighted in-context n-gram -- are then one attention
    pattern instead of something the position embeddings must build.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.n_actions + 1, cfg.d_model)  # index N is BOS
        self.pos = nn.Embedding(cfg.context, cfg.d_model)
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, 4 * cfg.d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, cfg.n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.n_actions)
        if cfg.alibi:
            # log-slopes from 1/2 down to 1/64 across heads (ALiBi's geometric spread), then learned
            init = torch.linspace(math.log(0.5), math.log(1 / 64), cfg.n_heads)
            self.log_slopes = nn.Parameter(init)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, L) int tokens -> (B, L, N) next-action logits; position l sees tokens 0..l only."""
        length = tokens.shape[1]
        x = self.tok(tokens) + self.pos(torch.arange(length, device=tokens.device))
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        if not self.cfg.alibi:
            return self.head(self.norm(self.blocks(x, mask=mask, is_causal=True)))
        pos = torch.arange(length, device=tokens.device)
        dist = (pos[:, None] - pos[None, :]).clamp_min(0).to(x.dtype)
        bias = mask[None] - self.log_slopes.exp()[:, None, None] * dist  # (H, L, L)
        bias = bias.repeat(tokens.shape[0], 1, 1)  # (B * H, L, L), batch-major as attention expects
        # The fused inference path (eval mode without grad) misreads a per-head (B * H, L, L) float mask (outputs
        # off by O(1) in torch 2.13): run the regular path, restoring the global switch afterwards.
        fast = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            return self.head(self.norm(self.blocks(x, mask=bias)))
        finally:
            torch.backends.mha.set_fastpath_enabled(fast)


@dataclass(frozen=True)
class TrainConfig(Options):
    """Next-token training on D: dataset size, optimisation, logging."""

    steps: int = 600
    batch: int = 64
    lr: float = 3e-3
    sequences: int = 2000
    seq_len: int = 96
    log_every: int = 20


def make_batch(data: np.ndarray, context: int, batch: int, n_actions: int, rng: np.random.Generator):
    """Random crops: half start at the sequence start, half mid-sequence; BOS always leads the context."""
    rows = rng.integers(0, data.shape[0], size=batch)
    max_start = data.shape[1] - (context - 1) - 1
    starts = np.where(rng.random(batch) < 0.5, 0, rng.integers(0, max_start + 1, size=batch))
    crops = np.stack([data[r, s:s + context] for r, s in zip(rows, starts, strict=True)])  # context actions
    inputs = np.concatenate([np.full((batch, 1), n_actions), crops[:, :-1]], axis=1)
    return torch.as_tensor(inputs, dtype=torch.long), torch.as_tensor(crops, dtype=torch.long)


def train_next_token(
    cfg: TransformerConfig,
    train: TrainConfig,
    seed: int,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    start: tuple[CausalTransformer, torch.optim.Optimizer, int] | None = None,
    on_checkpoint: Callable[[CausalTransformer, torch.optim.Optimizer, int], None] | None = None,
) -> tuple[CausalTransformer, list[float]]:
    """Train on sequences from D (seeded); the batch at step s depends only on (seed, s), so resuming is exact."""
    from envs.games import sample_sequences

    if train.seq_len < cfg.context + 1:
        raise ConfigError(f"seq_len ({train.seq_len}) must exceed context ({cfg.context})")
    torch.manual_seed(seed)
    data = sample_sequences(cfg.n_actions, train.seq_len, train.sequences, seed=seed + 1_000_003)
    if start is None:
        model = CausalTransformer(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=train.lr, weight_decay=0.01)
        step0 = 0
    else:
        model, opt, step0 = start
    losses: list[float] = []
    window: list[float] = []
    for step in range(step0, train.steps):
        rng = np.random.default_rng(np.random.SeedSequence([seed, step]))
        x, y = make_batch(data, cfg.context, train.batch, cfg.n_actions, rng)
        lr = train.lr * 0.5 * (1 + math.cos(math.pi * step / train.steps))  # cosine decay
        for g in opt.param_groups:
            g["lr"] = lr
        loss = nn.functional.cross_entropy(model(x).reshape(-1, cfg.n_actions), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        value = loss.item()
        losses.append(value)
        window.append(value)
        if on_progress is not None:
            on_progress(1)
        if (step + 1) % train.log_every == 0 or step + 1 == train.steps:
            if on_log is not None:
                on_log({"step": step + 1, "loss": float(np.mean(window)), "lr": lr})
            window = []
            if on_checkpoint is not None:
                on_checkpoint(model, opt, step + 1)
    return model, losses


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save_model(model: CausalTransformer, path: Path, extra: dict[str, Any] | None = None) -> str:
    """Save config + weights, write ``<path>.sha256``, return the digest."""
    path = Path(path)
    check_finite(model.state_dict(), f"next-token model {path}")  # a diverged run must not be saved
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": asdict(model.cfg), "state_dict": model.state_dict(), "extra": extra or {}}, path)
    digest = file_sha256(path)
    path.with_name(path.name + ".sha256").write_text(f"{digest}  {path.name}\n")
    return digest


def load_model(path: Path, verify: bool = True) -> CausalTransformer:
    """Load a saved model; with ``verify`` the sha256 beside it must match (a corrupt checkpoint is a ConfigError)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"checkpoint not found: {path}")
    sha_file = path.with_name(path.name + ".sha256")
    if verify and sha_file.exists():
        want = sha_file.read_text().split()[0]
        if file_sha256(path) != want:
            raise ConfigError(f"checkpoint {path} does not match its sha256 {want[:12]}...")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        model = CausalTransformer(TransformerConfig(**blob["config"]))
        model.load_state_dict(blob["state_dict"])
    except Exception as exc:  # truncated or foreign file
        raise ConfigError(f"checkpoint {path} is corrupt or not a next-token model: {type(exc).__name__}") from exc
    model.eval()
    return model


class TransformerPredictor:
    """Predictor wrapper: feeds ``[BOS] + last (context-1)`` actions, returns the softmax at the last position."""

    def __init__(self, model: CausalTransformer) -> None:
        self.model = model.eval()
        self.n = model.cfg.n_actions
        self.hist: list[int] = []
        self._cache: np.ndarray | None = None

    def reset(self, n_actions: int) -> None:
        if n_actions != self.n:
            raise ConfigError(f"model predicts {self.n} opponent actions, game has {n_actions}")
        self.hist, self._cache = [], None

    def update(self, action: int) -> None:
        self.hist.append(int(action))
        self._cache = None

    @torch.no_grad()
    def predict(self) -> np.ndarray:
        if self._cache is None:
            ctx = [self.n] + self.hist[-(self.model.cfg.context - 1):]
            logits = self.model(torch.tensor([ctx], dtype=torch.long))[0, -1]
            self._cache = torch.softmax(logits.double(), -1).numpy()
        return self._cache


def time_it(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(result, seconds) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0
