"""A small prior-fitted transformer for tiny classification tables (a TabPFN-style stand-in, trained from scratch).

Prior-fitted networks learn in-context prediction: the network is trained once on many synthetic tasks drawn from a
prior, each given as a whole table (training rows with labels, test rows without), and is asked for the test
labels. At use time it predicts a new table's test rows in one forward pass, with no gradient steps.

Prior (:func:`sample_task`): structural causal models drawn as random sparse layered DAGs. Root causes
``z0 ~ N(0, I)`` flow through 1–3 further layers ``z_{l+1} = act(z_l W_l) + noise``; each node has 1–5 parents on
average, each layer a random activation, each task a random noise level. Every node is a variable of the SCM.
The target is either a root (a cause whose effects are the features, as a tissue drives expression or a digit
drives pixels; its outgoing edges strengthened) or a node of the last layer (an effect whose causes are among the
features), cut at random quantiles into ``k`` classes (2–10, labels randomly permuted); ``f`` other nodes become
the features (plus a little measurement noise).

Model (:class:`PriorFittedTransformer`): one token per row, ``Linear(features)`` plus, for training rows, a label
embedding. Attention is masked by construction: keys and values come from the training rows only, so training
rows attend among themselves and each test row attends to the training rows alone — a test row can never change
a training row's representation or another test row's prediction. Features are standardised per task with the
training rows' statistics, zero-padded to ``max_features`` and scaled by ``sqrt(max_features / f)`` so that the
embedding sees inputs of the same overall size whatever the feature count.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class PriorConfig:
    """Ranges of the synthetic task prior (sizes inclusive)."""

    max_features: int = 64
    min_features: int = 2
    max_classes: int = 10
    min_train: int = 10
    max_train: int = 100
    n_test: int = 40  # test rows per training task; any count up to max_test works at prediction time
    min_layers: int = 2
    max_layers: int = 4
    min_width: int = 8
    max_width: int = 32


@dataclass(frozen=True)
class ModelConfig:
    """Size of the transformer; ``max_features``/``max_classes`` fix its input and output widths."""

    d_model: int = 64
    n_layers: int = 3
    n_heads: int = 4
    d_ff: int = 128
    max_features: int = 64
    max_classes: int = 10
    max_train: int = 100
    max_test: int = 100


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation of the transformer on prior tasks (``tasks = steps * batch``)."""

    steps: int = 3000
    batch: int = 8
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 1e-4
    clip: float = 1.0
    seed: int = 0


_ACTIVATIONS: tuple[Callable[[np.ndarray], np.ndarray], ...] = (
    np.tanh, lambda a: np.maximum(a, 0.0), lambda a: np.where(a > 0, a, 0.1 * a), lambda a: a,
    lambda a: np.sin(0.5 * np.pi * a))


def sample_task(rng: np.random.Generator, n_rows: int, n_features: int, n_classes: int,
                cfg: PriorConfig = PriorConfig()) -> tuple[np.ndarray, np.ndarray]:
    """One SCM classification table: features ``[n_rows, n_features]`` (float32) and labels ``[n_rows]`` in
    ``0..n_classes-1``; rows are exchangeable (split them into training and test rows as you like)."""
    n_layers = int(rng.integers(cfg.min_layers, cfg.max_layers + 1))
    # the layers together must hold enough nodes for the features plus the target
    width = max(int(rng.integers(cfg.min_width, cfg.max_width + 1)), math.ceil((n_features + 1) / n_layers))
    noise = float(np.exp(rng.uniform(np.log(0.02), np.log(0.5))))
    keep = min(1.0, float(rng.uniform(1.0, 5.0)) / width)  # 1–5 parents per node on average: a sparse DAG
    # half the tasks predict a cause (a root whose effects are the features, as class drives expression or
    # pixels), half an effect in the last layer (the features include its causes)
    target_is_cause = bool(rng.random() < 0.5)
    target_idx = int(rng.integers(width))
    z = rng.standard_normal((n_rows, width))
    nodes = [z]
    for layer in range(n_layers - 1):
        w = rng.standard_normal((width, width)) * (rng.random((width, width)) < keep)
        if target_is_cause and layer == 0:
            w[target_idx] = rng.standard_normal(width) * (rng.random(width) < 0.5) * rng.uniform(1.0, 3.0)
        act = _ACTIVATIONS[int(rng.integers(len(_ACTIVATIONS)))]
        pre = z @ w
        pre = pre / (pre.std(0) + 1e-6)  # unit-variance inputs so every activation works in its useful range
        z = act(pre + 0.3 * rng.standard_normal(width)) + noise * rng.standard_normal((n_rows, width))
        z = (z - z.mean(0)) / (z.std(0) + 1e-6)
        nodes.append(z)
    layer_of_target = 0 if target_is_cause else n_layers - 1
    target = nodes[layer_of_target][:, target_idx]
    pool = np.concatenate(nodes, axis=1)
    others = np.delete(np.arange(pool.shape[1]), layer_of_target * width + target_idx)
    x = pool[:, rng.permutation(others)[:n_features]] + 0.01 * rng.standard_normal((n_rows, n_features))
    # class boundaries at random quantiles, each class at least half its even share of the rows
    share = rng.dirichlet(np.full(n_classes, 2.0)) * 0.5 + 0.5 / n_classes
    cuts = np.quantile(target, np.cumsum(share)[:-1])
    y = rng.permutation(n_classes)[np.searchsorted(cuts, target, side="right")]
    return x.astype(np.float32), y.astype(np.int64)


def sample_batch(rng: np.random.Generator, batch: int, cfg: PriorConfig = PriorConfig()
                 ) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """``batch`` tasks sharing one shape: (x [batch, n_train + n_test, f], y [batch, n_train + n_test], n_train,
    f, k). Half the batches draw ``f`` from the upper half of the range, where the study's inputs lie."""
    lo = cfg.min_features if rng.random() < 0.5 else cfg.max_features // 4
    f = int(rng.integers(lo, cfg.max_features + 1))
    k = int(rng.integers(2, cfg.max_classes + 1))
    n_train = int(rng.integers(cfg.min_train, cfg.max_train + 1))
    xs, ys = zip(*(sample_task(rng, n_train + cfg.n_test, f, k, cfg) for _ in range(batch)), strict=True)
    return np.stack(xs), np.stack(ys), n_train, f, k


def prepare_features(xtr: np.ndarray, xte: np.ndarray, max_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-task standardisation by the training rows' statistics, clipping, zero padding to ``max_features`` and
    ``sqrt(max_features / f)`` scaling. Works on ``[..., n, f]`` arrays (a batch of tasks or one)."""
    f = xtr.shape[-1]
    if f > max_features:
        raise ValueError(f"the model takes at most {max_features} features, got {f}")
    mean = xtr.mean(-2, keepdims=True)
    std = xtr.std(-2, keepdims=True)
    std = np.where(std > 1e-8, std, 1.0)
    scale = math.sqrt(max_features / f)
    pad = [(0, 0)] * (xtr.ndim - 1) + [(0, max_features - f)]
    out = []
    for part in (xtr, xte):
        z = np.clip((part - mean) / std, -6.0, 6.0) * scale
        out.append(np.pad(z, pad).astype(np.float32))
    return out[0], out[1]


class _Block(nn.Module):
    """Pre-norm transformer block whose keys and values are the first ``n_train`` tokens only."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.heads = cfg.n_heads
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.q = nn.Linear(cfg.d_model, cfg.d_model)
        self.kv = nn.Linear(cfg.d_model, 2 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model))

    def forward(self, h: torch.Tensor, n_train: int) -> torch.Tensor:
        b, n, d = h.shape
        a = self.norm1(h)
        q = self.q(a).view(b, n, self.heads, d // self.heads).transpose(1, 2)
        k, v = self.kv(a[:, :n_train]).view(b, n_train, 2, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
        h = h + self.out(att)
        return h + self.ff(self.norm2(h))


class PriorFittedTransformer(nn.Module):
    """Rows in, test-row class logits out; see the module docstring for the masking."""

    def __init__(self, cfg: ModelConfig = ModelConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_x = nn.Linear(cfg.max_features, cfg.d_model)
        self.embed_y = nn.Embedding(cfg.max_classes, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.max_classes)

    def forward(self, x: torch.Tensor, y_train: torch.Tensor, n_classes: int) -> torch.Tensor:
        """``x`` [B, n_train + n_test, max_features] prepared features, ``y_train`` [B, n_train] →
        logits [B, n_test, max_classes] with classes ``>= n_classes`` at -inf."""
        n_train = y_train.shape[1]
        h = self.embed_x(x)
        h = torch.cat([h[:, :n_train] + self.embed_y(y_train), h[:, n_train:]], dim=1)
        for block in self.blocks:
            h = block(h, n_train)
        logits = self.head(self.norm(h[:, n_train:]))
        return logits.masked_fill(torch.arange(self.cfg.max_classes) >= n_classes, float("-inf"))


def predict_proba(model: PriorFittedTransformer, xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray,
                  n_classes: int | None = None) -> np.ndarray:
    """In-context class probabilities ``[n_test, n_classes]`` for one table; labels ``ytr`` must be ``0..k-1``.

    No gradient steps: one forward pass per chunk of ``max_test`` test rows (test rows are independent of each
    other, so chunking changes nothing)."""
    cfg = model.cfg
    ytr = np.asarray(ytr, dtype=np.int64)
    k = int(n_classes if n_classes is not None else ytr.max() + 1)
    if not 2 <= k <= cfg.max_classes or ytr.min() < 0 or ytr.max() >= k:
        raise ValueError(f"labels must lie in 0..k-1 with 2 <= k <= {cfg.max_classes}; got k={k}, "
                         f"labels {ytr.min()}..{ytr.max()}")
    if not 1 <= len(xtr) <= cfg.max_train:
        raise ValueError(f"the model takes 1 to {cfg.max_train} training rows, got {len(xtr)}")
    ftr, fte = prepare_features(np.asarray(xtr, np.float64), np.asarray(xte, np.float64), cfg.max_features)
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(fte), cfg.max_test):
            x = torch.from_numpy(np.concatenate([ftr, fte[start:start + cfg.max_test]]))[None]
            logits = model(x, torch.from_numpy(ytr)[None], k)[0, :, :k]
            out.append(torch.softmax(logits, -1).numpy())
    return np.concatenate(out) if out else np.zeros((0, k), np.float32)


def build_model(config: dict, seed: int = 0) -> PriorFittedTransformer:
    """A freshly initialised model from a config dict; the seed fixes the initial weights without touching the
    global torch random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return PriorFittedTransformer(ModelConfig(**config))


def train_prior_fitted(model_cfg: ModelConfig, train_cfg: TrainConfig, prior_cfg: PriorConfig = PriorConfig(),
                       on_log: Callable[[dict], None] | None = None, log_every: int = 100,
                       init_state: dict[str, torch.Tensor] | None = None
                       ) -> tuple[PriorFittedTransformer, list[float]]:
    """Fit the transformer on ``steps * batch`` fresh prior tasks (never reused); returns (model, loss per step).

    Cross-entropy on the test rows; AdamW with linear warm-up and cosine decay. ``init_state`` (a state dict of
    the same architecture) continues an earlier model's training instead of starting from random weights. Same
    configs, seed and initial weights → the same weights on the same machine and thread count."""
    if prior_cfg.max_features != model_cfg.max_features or prior_cfg.max_classes != model_cfg.max_classes:
        raise ValueError("prior and model disagree on max_features / max_classes")
    model = build_model(asdict(model_cfg), train_cfg.seed)
    if init_state is not None:
        model.load_state_dict(init_state, strict=True)
    rng = np.random.default_rng(train_cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)

    def lr_at(step: int) -> float:
        if step < train_cfg.warmup:
            return (step + 1) / train_cfg.warmup
        done = (step - train_cfg.warmup) / max(1, train_cfg.steps - train_cfg.warmup)
        return 0.5 * (1.0 + math.cos(math.pi * done))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    losses: list[float] = []
    model.train()
    for step in range(train_cfg.steps):
        x, y, n_train, _, k = sample_batch(rng, train_cfg.batch, prior_cfg)
        xtr, xte = prepare_features(x[:, :n_train].astype(np.float64), x[:, n_train:].astype(np.float64),
                                    model_cfg.max_features)
        logits = model(torch.from_numpy(np.concatenate([xtr, xte], 1)), torch.from_numpy(y[:, :n_train]), k)
        loss = F.cross_entropy(logits[..., :k].reshape(-1, k), torch.from_numpy(y[:, n_train:]).reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), train_cfg.clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if on_log is not None and (step + 1) % log_every == 0:
            on_log({"step": step + 1, "loss": float(np.mean(losses[-log_every:])), "lr": sched.get_last_lr()[0]})
    model.eval()
    return model, losses
