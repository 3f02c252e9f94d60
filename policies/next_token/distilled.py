"""A small causal transformer *trained* to output the robustified agent's mixed strategy (claim e).

Inputs per position t are the same features the explicit layers read (previous payoff vector, what the base
model's best response earned then, the current best response, t/T); the target is ``RobustAgent``'s mixed
strategy. Training histories mix three sources so both gate branches are common: opponents from D (the switch
rarely fires), the anti-model adversary (it fires after ~tau rounds), and an opponent that is adversarial only
with probability 1/2 per round (it fires at varied times).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from envs.config import Options
from envs.games.env import RepeatedGameEnv
from envs.games.matrix import MatrixGame
from envs.games.opponents import AntiModelOpponent, MixtureOpponent
from policies.next_token.agents import BestResponseAgent, RobustAgent
from policies.next_token.predictors import NGramPredictor


@dataclass(frozen=True)
class DistillConfig(Options):
    """Size of the distilled model and of its training run."""

    rounds: int = 200
    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 2
    histories: int = 600
    steps: int = 400
    batch: int = 32
    lr: float = 3e-3


class PartlyAdversarialOpponent:
    """Each round: the anti-model's move with probability ``p_adv``, otherwise a draw from D."""

    def __init__(self, p_adv: float = 0.5) -> None:
        self.p_adv, self.anti, self.base = p_adv, AntiModelOpponent(), MixtureOpponent()

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        self.rng = rng
        self.anti.reset(n_actions, rng)
        self.base.reset(n_actions, rng)

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        if self.rng.random() < self.p_adv:
            return self.anti.act(history, learner_mixed, game)
        return self.base.act(history, learner_mixed, game)


class _Recorder(RobustAgent):
    """RobustAgent that also records the per-position features and its own outputs."""

    def _on_reset(self, info: dict[str, Any]) -> None:
        super()._on_reset(info)
        self.feats: list[np.ndarray] = []
        self.targets: list[np.ndarray] = []
        self._prev_u = np.zeros(self.k)
        self._prev_c = 0.0
        self._prev_b = 0

    def _observe(self, j: int, u: np.ndarray) -> None:
        super()._observe(j, u)
        self._prev_u, self._prev_c = u, float(u[self._prev_b])

    def _decide(self) -> np.ndarray:
        p = super()._decide()
        b = self._br()
        self.feats.append(features_row(self._prev_u, self._prev_c, b, self.t, self.rounds, self.k))
        self.targets.append(p)
        self._prev_b = b
        return p


def features_row(u_prev: np.ndarray, c_prev: float, b: int, t: int, rounds: int, k: int) -> np.ndarray:
    """[u_{t-1}, u_{t-1}[b_{t-1}], onehot(b_t), t/T] for one position."""
    return np.concatenate([u_prev, [c_prev], np.eye(k)[b], [t / rounds]])


def make_histories(game: MatrixGame, cfg: DistillConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(H, T, F) features and (H, T, K) robust targets from the three history sources."""
    feats, targets = [], []
    for h in range(cfg.histories):
        kind = h % 3
        opp = (MixtureOpponent(), AntiModelOpponent(), PartlyAdversarialOpponent())[kind]
        env = RepeatedGameEnv(game, opp, rounds=cfg.rounds)
        agent = _Recorder(NGramPredictor())
        obs, info = env.reset(seed=seed * 100_000 + h)
        agent.reset("", info)
        for _ in range(cfg.rounds):
            obs, *_ = env.step(agent.act(obs))
        feats.append(np.stack(agent.feats))
        targets.append(np.stack(agent.targets))
    return np.stack(feats).astype(np.float32), np.stack(targets).astype(np.float32)


class DistilledRobustModel(nn.Module):
    """Linear embedding of the features, a causal transformer encoder, a K-way head."""

    def __init__(self, k: int, cfg: DistillConfig) -> None:
        super().__init__()
        self.k, self.cfg = k, cfg
        self.inp = nn.Linear(2 * k + 2, cfg.d_model)
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, 4 * cfg.d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, cfg.n_layers, enable_nested_tensor=False)
        self.head = nn.Linear(cfg.d_model, k)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, L, F) -> (B, L, K) logits."""
        length = feats.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(length)
        return self.head(self.blocks(self.inp(feats), mask=mask, is_causal=True))


def train_distilled(game: MatrixGame, cfg: DistillConfig, seed: int) -> tuple[DistilledRobustModel, dict[str, Any]]:
    """Fit the model to robust targets (soft cross-entropy); report held-out mean TV to the algorithm."""
    torch.manual_seed(seed)
    x, y = make_histories(game, cfg, seed)
    n_val = max(cfg.histories // 6, 3)
    xt, yt = torch.as_tensor(x[n_val:]), torch.as_tensor(y[n_val:])
    xv, yv = torch.as_tensor(x[:n_val]), torch.as_tensor(y[:n_val])
    model = DistilledRobustModel(game.n_learner, cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(cfg.steps):
        idx = torch.randint(0, xt.shape[0], (cfg.batch,), generator=gen)
        for g in opt.param_groups:
            g["lr"] = cfg.lr * 0.5 * (1 + np.cos(np.pi * step / cfg.steps))
        logp = torch.log_softmax(model(xt[idx]), -1)
        loss = -(yt[idx] * logp).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        pv = torch.softmax(model(xv), -1)
    tv = 0.5 * (pv - yv).abs().sum(-1)
    return model, {"final_loss": float(np.mean(losses[-20:])), "val_mean_tv": float(tv.mean()),
                   "val_p95_tv": float(torch.quantile(tv.flatten(), 0.95)), "val_histories": n_val}


class DistilledRobustAgent(BestResponseAgent):
    """Plays the distilled model's output on the running feature history (base model: 3-gram best response)."""

    def __init__(self, model: DistilledRobustModel, **kw: Any) -> None:
        super().__init__(NGramPredictor(), **kw)
        self.model = model

    def _on_reset(self, info: dict[str, Any]) -> None:
        super()._on_reset(info)
        self.feats: list[np.ndarray] = []
        self._prev_u, self._prev_c, self._prev_b = np.zeros(self.k), 0.0, 0

    def _observe(self, j: int, u: np.ndarray) -> None:
        super()._observe(j, u)
        self._prev_u, self._prev_c = u, float(u[self._prev_b])

    @torch.no_grad()
    def _decide(self) -> np.ndarray:
        b = self._br()
        self.feats.append(features_row(self._prev_u, self._prev_c, b, self.t, self.rounds, self.k))
        self._prev_b = b
        x = torch.as_tensor(np.stack(self.feats)[None].astype(np.float32))
        return torch.softmax(self.model(x)[0, -1].double(), -1).numpy()
