"""Claim (e), second construction: train a causal transformer on the exact D' conditionals (a KL loss).

D' here is the sample-then-best-reply robustification of the sharpened discounted bigram (``dprime.SAMPLE_BR_CONFIG``).
Histories are simulated in batches on the fly (vectorised over histories: no history is seen twice), from a mix of
sources (``KL_SOURCES``): samples of D' itself, real opponents from D, the anti-model against the exact D' learner,
half-adversarial play, the anti-model followed by a D opponent (so the switched branch sees varied payoffs), and
*on-policy* histories: the anti-model against the learner that responds to the model being trained (the histories
the model meets when it is used as an agent). The loss is KL(D'(.|h) || model(.|h)) at every position; the model
kept is the one with the lowest held-out mean TV (early stopping).
"""

from __future__ import annotations

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
from envs.games.matrix import MatrixGame
from envs.games.opponents import MixtureOpponent
from policies.next_token.dprime import DPrimeConfig, anytime_eta, anytime_tau, best_reply_map
from policies.next_token.transformer import CausalTransformer, TransformerConfig, load_model, save_model

KL_SOURCES = ("dprime", "D", "anti_model", "partly_adversarial", "anti_then_D", "on_policy")


def _check_setting(game: MatrixGame, cfg: DPrimeConfig) -> np.ndarray:
    br = best_reply_map(game.payoff)
    if cfg.rule != "sample_br" or cfg.base != "discounted_bigram":
        raise ConfigError("the batched D' simulator covers rule=sample_br with base=discounted_bigram")
    if game.n_learner != game.n_opponent or len(set(br.tolist())) != game.n_learner:
        raise ConfigError(f"game {game.name} has no one-to-one best replies (use rps or matching_pennies)")
    return br


def simulate(game: MatrixGame, cfg: DPrimeConfig, sources: np.ndarray, seed: int,
             model: CausalTransformer | None = None, prior: float = 0.5) -> dict[str, np.ndarray]:
    """Play ``len(sources)`` histories of ``cfg.rounds`` rounds at once; exact D' and base conditionals per position.

    ``sources`` holds indices into ``KL_SOURCES``; ``on_policy`` rows need ``model`` (the learner responds to its
    predictions). Returns tokens (B, T), dprime and base (B, T, N), after_switch (B, T: the switched branch is in
    force at that position) and switch_round (B, -1 if never). Same numbers as ``RobustifiedPredictor`` over the
    same tokens (tested).
    """
    br = _check_setting(game, cfg)
    inv = np.argsort(br)  # q[:, i] = d[:, inv[i]]: the learner plays BR(j) with the probability of j
    a = np.asarray(game.payoff, dtype=np.float64)
    sources = np.asarray(sources, dtype=np.int64)
    b, t_len, n, k = len(sources), cfg.rounds, game.n_opponent, game.n_learner
    if (sources == KL_SOURCES.index("on_policy")).any() and model is None:
        raise ConfigError("on_policy histories need a model")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 7]))
    d_opp: dict[int, MixtureOpponent] = {}
    hand_over = np.full(b, t_len)  # anti_then_D: round where the D opponent takes over
    for h in np.flatnonzero((sources == 1) | (sources == 4)):
        opp = MixtureOpponent()
        opp.reset(n, np.random.default_rng(np.random.SeedSequence([int(seed), int(h)])))
        d_opp[int(h)] = opp
        if sources[h] == 4:
            hand_over[h] = int(rng.integers(t_len // 4, 3 * t_len // 4 + 1))
    tokens = np.zeros((b, t_len), dtype=np.int64)
    dprime = np.zeros((b, t_len, n))
    base = np.zeros((b, t_len, n))
    after = np.zeros((b, t_len), dtype=bool)
    switch_round = np.full(b, -1)
    bigram, unigram = np.zeros((b, n, n)), np.zeros((b, n))
    last = np.full(b, -1)
    cum, learner = np.zeros((b, k)), np.zeros(b)
    switched = np.zeros(b, dtype=bool)
    rows = np.arange(b)
    on_rows = np.flatnonzero(sources == 5)
    hist: list[list[int]] = [[] for _ in range(b)]
    for t in range(t_len):
        c = np.where((last >= 0)[:, None], bigram[rows, np.maximum(last, 0)], 0.0)
        c = np.where((c.sum(-1) >= 1.0)[:, None], c, unigram)
        p = (c + prior) / (c.sum(-1, keepdims=True) + prior * n)
        logp = cfg.sharpen * np.log(np.maximum(p, 1e-300))
        p = np.exp(logp - logp.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        if t > 0:
            fire = ~switched & (cum.max(-1) - learner > anytime_tau(t, k, cfg.delta))
            switch_round[fire] = t
            switched |= fire
        z = anytime_eta(t, k) * cum
        hedge = np.exp(z - z.max(-1, keepdims=True))
        hedge /= hedge.sum(-1, keepdims=True)
        d = np.where(switched[:, None], hedge[:, br], p)
        dprime[:, t], base[:, t], after[:, t] = d, p, switched
        q = d[:, inv]
        q_play = q.copy()
        if len(on_rows):
            with torch.no_grad():
                x = torch.as_tensor(np.concatenate([np.full((len(on_rows), 1), n), tokens[on_rows, :t]], 1))
                pm = torch.softmax(model(x)[:, -1].double(), -1).numpy()
            q_play[on_rows] = pm[:, inv]
        # the anti-model: the action minimising the learner's expected payoff, ties broken at random
        exp_pay = q_play @ a
        worst = exp_pay <= exp_pay.min(-1, keepdims=True) + 1e-12
        anti = np.argmax(worst * rng.random((b, n)), -1)
        sample = (rng.random(b)[:, None] > np.cumsum(d, -1)).sum(-1).clip(0, n - 1)
        j = np.where(sources == 0, sample, anti)
        j = np.where((sources == 3) & (rng.random(b) >= 0.5), sample, j)
        for h, opp in d_opp.items():
            if t >= hand_over[h] or sources[h] == 1:
                j[h] = opp.act(hist[h], q_play[h], game)
        tokens[:, t] = j
        for h in d_opp:
            hist[h].append(int(j[h]))
        u = a[:, j].T  # (B, K) payoff of every learner action this round
        learner += (q * u).sum(-1)  # D' is a function of the history: its own learner's payoff, not the model's
        cum += u
        bigram *= cfg.decay
        unigram *= cfg.decay
        has = last >= 0
        bigram[rows[has], last[has], j[has]] += 1.0
        unigram[rows, j] += 1.0
        last = j
    return {"tokens": tokens, "dprime": dprime, "base": base, "after_switch": after, "switch_round": switch_round,
            "source": sources}


def model_inputs(tokens: np.ndarray, n: int) -> torch.Tensor:
    """[BOS, x_0 .. x_{T-2}]: position t sees the history before round t."""
    bos = np.full((tokens.shape[0], 1), n)
    return torch.as_tensor(np.concatenate([bos, tokens[:, :-1]], axis=1), dtype=torch.long)


def model_probs(model: CausalTransformer, tokens: np.ndarray) -> np.ndarray:
    """(B, T, N) the model's next-token distribution at every position of the given histories."""
    with torch.no_grad():
        return torch.softmax(model(model_inputs(tokens, model.cfg.n_actions)).double(), -1).numpy()


def tv_report(model: CausalTransformer, data: dict[str, np.ndarray]) -> dict[str, Any]:
    """Mean TV(model, D') over all positions, before and after the switch, per source; TV(base, D') after it."""
    tv = 0.5 * np.abs(model_probs(model, data["tokens"]) - data["dprime"]).sum(-1)
    tv_base = 0.5 * np.abs(data["base"] - data["dprime"]).sum(-1)
    after = data["after_switch"]
    out: dict[str, Any] = {"all": _tv_split(tv, tv_base, after)}
    for i, name in enumerate(KL_SOURCES):
        rows = data["source"] == i
        if rows.any():
            out[name] = _tv_split(tv[rows], tv_base[rows], after[rows])
    return out


def _tv_split(tv: np.ndarray, tv_base: np.ndarray, after: np.ndarray) -> dict[str, Any]:
    return {"histories": int(tv.shape[0]), "mean_tv": float(tv.mean()),
            "mean_tv_before_switch": float(tv[~after].mean()) if (~after).any() else None,
            "mean_tv_after_switch": float(tv[after].mean()) if after.any() else None,
            "positions_after_switch": int(after.sum()),
            "mean_tv_base_vs_dprime_after_switch": float(tv_base[after].mean()) if after.any() else None}


@dataclass(frozen=True)
class KLTrainConfig(Options):
    """Training on exact D' conditionals: model size, optimisation, data mix, early stopping."""

    steps: int = 200
    batch: int = 32
    lr: float = 2e-3
    d_model: int = 32
    n_layers: int = 4
    n_heads: int = 2
    alibi: bool = True
    on_policy_share: float = 0.25  # of each batch, once the model exists
    on_policy_every: int = 10  # steps between fresh on-policy histories (they cost T model calls)
    val_histories: int = 30
    eval_every: int = 50
    patience: int = 5  # evaluations without a better held-out TV before stopping


def _off_policy_sources(count: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, KL_SOURCES.index("on_policy"), size=count)


def train_dprime_kl(game: MatrixGame, cfg: DPrimeConfig, train: KLTrainConfig, seed: int,
                    log: Callable[[str], None] | None = None) -> tuple[CausalTransformer, dict[str, Any]]:
    """Train with KL(D' || model) on fresh simulated histories; early-stop on held-out mean TV; return the best."""
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    mcfg = TransformerConfig(n_actions=game.n_opponent, context=cfg.rounds + 1, d_model=train.d_model,
                             n_layers=train.n_layers, n_heads=train.n_heads, alibi=train.alibi)
    model = CausalTransformer(mcfg)
    opt = torch.optim.AdamW(model.parameters(), lr=train.lr, weight_decay=0.01)
    val_sources = np.arange(train.val_histories) % KL_SOURCES.index("on_policy")
    val = simulate(game, cfg, val_sources, seed=10_000_000 + seed)  # held out: a seed range training never uses
    n_on = int(round(train.batch * train.on_policy_share))
    best = (math.inf, -1, None)
    history: list[dict[str, Any]] = []
    on_pool: dict[str, np.ndarray] | None = None
    bad = 0
    for step in range(train.steps):
        rng = np.random.default_rng(np.random.SeedSequence([seed, step]))
        data = simulate(game, cfg, _off_policy_sources(train.batch - (n_on if step else 0), rng), seed=seed * 1_000_003
                        + step)
        if step and n_on and (on_pool is None or step % train.on_policy_every == 0):
            model.eval()
            on_pool = simulate(game, cfg, np.full(n_on, KL_SOURCES.index("on_policy")), seed=seed * 1_000_003 + step,
                               model=model)
            model.train()
        if step and on_pool is not None:
            data = {key: np.concatenate([data[key], on_pool[key]]) for key in ("tokens", "dprime")}
        lr = train.lr * 0.5 * (1 + math.cos(math.pi * step / train.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        logq = torch.log_softmax(model(model_inputs(data["tokens"], game.n_opponent)), -1)
        target = torch.as_tensor(data["dprime"], dtype=torch.float32)
        loss = (target * (torch.log(target.clamp_min(1e-12)) - logq)).sum(-1).mean()  # KL(D' || model)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % train.eval_every == 0 or step + 1 == train.steps:
            model.eval()
            rep = tv_report(model, val)["all"]
            model.train()
            row = {"step": step + 1, "train_kl": float(loss.item()), "val_mean_tv": rep["mean_tv"],
                   "val_tv_before": rep["mean_tv_before_switch"], "val_tv_after": rep["mean_tv_after_switch"],
                   "wall_s": time.perf_counter() - t0}
            history.append(row)
            if log is not None:
                log(f"step {row['step']}: train KL {row['train_kl']:.4f}, held-out TV {row['val_mean_tv']:.4f} "
                    f"(before {row['val_tv_before']:.4f}, after {row['val_tv_after']:.4f})")
            if rep["mean_tv"] < best[0]:
                best = (rep["mean_tv"], step + 1, {k: v.clone() for k, v in model.state_dict().items()})
                bad = 0
            else:
                bad += 1
                if bad >= train.patience:
                    break
    model.load_state_dict(best[2])
    model.eval()
    return model, {"best_step": best[1], "best_val_mean_tv": best[0], "history": history,
                   "train_s": time.perf_counter() - t0, "dprime_config": asdict(cfg), "train_config": asdict(train),
                   "seed": int(seed)}


def save_trained(model: CausalTransformer, path: Path, report: dict[str, Any]) -> str:
    """Write the model with its training report (sha256 beside it); returns the digest."""
    return save_model(model, Path(path), extra={"report": report})


def load_trained(path: Path) -> tuple[CausalTransformer, dict[str, Any]]:
    """Load a model written by ``save_trained`` (sha256-checked) and its training report."""
    model = load_model(Path(path))
    blob = torch.load(path, map_location="cpu", weights_only=True)
    return model, dict(blob.get("extra", {}).get("report", {}))
