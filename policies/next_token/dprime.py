"""Claim (e): the robustified next-token distribution D' as a predictor, and a causal transformer trained on it.

The decision maker is an *approximate* best response to a predicted opponent distribution p: the logit response
q = softmax(beta * A p) (pure best response as beta -> infinity). Mixed play is what lets a predictor encode Hedge:

    D'(. | h) = P(. | h)              while the switch has not fired on h,
    D'(. | h) = H(h)                  afterwards, where softmax(beta * A H(h)) = softmax(eta_t G_t)

P is the base next-token model (an in-context n-gram fitted to D), G_t the cumulative payoff of every learner action
on h, L_t the learner's expected payoff of its own logit responses to D' on h, and the switch fires (for good) at
the first round t with max_i G_t[i] - L_t > tau_t = sqrt(2 t ln(K/delta)); eta_t = sqrt(8 ln K / t) (anytime
schedules, so one model serves every horizon up to its context). H(h) solves a linear system; it exists for square
games whose equaliser is interior (RPS, matching pennies). D' is a distribution over opponent sequences: its
conditionals are a deterministic function of the opponent history alone.

Two decision rules (``DECISION_RULES``): ``logit`` (above) multiplies every prediction error by beta before it
reaches the strategy, so D' must be matched to ~1/beta; ``sample_br`` -- draw one opponent action from p and play the
best reply to it, q = sum_j p_j e_{BR(j)} -- passes a prediction error of TV eps to the strategy as TV <= eps. With
``sample_br`` H(h) is Hedge's strategy pulled back through BR (a permutation in RPS), O(1) away from the base model,
whose predictions are sharpened (p^gamma) so that plain play on them stays exploitable.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from envs.config import Options
from envs.errors import ConfigError
from envs.games.matrix import MatrixGame
from envs.games.opponents import AntiModelOpponent, MixtureOpponent
from policies.next_token.agents import RepeatedGameAgent, softmax
from policies.next_token.predictors import (
    DiscountedBigramPredictor,
    NGramPredictor,
    Predictor,
    SharpenedPredictor,
)
from policies.next_token.transformer import CausalTransformer, TransformerConfig, load_model, save_model


def logit_response(payoff: np.ndarray, p: np.ndarray, beta: float) -> np.ndarray:
    """The learner's approximate best response to an opponent distribution ``p``: softmax(beta * A p)."""
    return softmax(float(beta) * (np.asarray(payoff) @ np.asarray(p, dtype=np.float64)))


class HedgeMatching:
    """Solves for the opponent distribution whose logit response is a given mixed strategy.

    softmax(beta A p) = softmax(z) iff A p = z / beta + c 1 for some c; with 1'p = 1 this is one (N+1) linear system.
    If the exact solution leaves the simplex, z is shrunk towards 0 (the equaliser, which is interior) until it fits:
    the learner then plays softmax(s z) with s < 1, i.e. Hedge at a lower learning rate.
    """

    def __init__(self, payoff: np.ndarray, beta: float) -> None:
        a = np.asarray(payoff, dtype=np.float64)
        k, n = a.shape
        if k != n:
            raise ConfigError(f"Hedge-matching predictions need a square game, got {k}x{n}")
        system = np.zeros((n + 1, n + 1))
        system[:n, :n], system[:n, n], system[n, :n] = a, -1.0, 1.0
        try:
            self._inv = np.linalg.inv(system)
        except np.linalg.LinAlgError:
            raise ConfigError("Hedge-matching predictions need an invertible payoff system") from None
        self.beta = float(beta)
        self.equaliser = self._inv[:n, n]  # solution for z = 0
        if self.equaliser.min() <= 0:
            raise ConfigError("Hedge-matching predictions need a game whose equalising strategy is interior")

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """The distribution p' with softmax(beta A p') = softmax(s z), s in (0, 1] as large as the simplex allows."""
        z = np.asarray(z, dtype=np.float64)
        d = self._inv[:-1, :-1] @ (z - z.mean()) / self.beta  # direction away from the equaliser
        neg = d < 0
        s = min(1.0, float(np.min(self.equaliser[neg] / -d[neg]))) if neg.any() else 1.0
        p = np.clip(self.equaliser + s * d, 0.0, None)
        return p / p.sum()


DECISION_RULES = ("logit", "sample_br")


def best_reply_map(payoff: np.ndarray) -> np.ndarray:
    """(N,) the learner's best reply to each pure opponent action (first maximiser on ties)."""
    return np.argmax(np.asarray(payoff, dtype=np.float64), axis=0)


def sample_br_response(payoff: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Draw an opponent action from ``p``, play the best reply to it: the mixed strategy sum_j p_j e_{BR(j)}."""
    q = np.zeros(np.asarray(payoff).shape[0])
    np.add.at(q, best_reply_map(payoff), np.asarray(p, dtype=np.float64))
    return q


class SampleBRMatching:
    """The opponent distribution whose sample-then-best-reply strategy is softmax(z): Hedge pulled back through BR.

    Needs BR to be a bijection between opponent and learner actions (RPS, matching pennies); then p_j = q_{BR(j)}.
    """

    def __init__(self, payoff: np.ndarray) -> None:
        a = np.asarray(payoff, dtype=np.float64)
        self.br = best_reply_map(a)
        if a.shape[0] != a.shape[1] or len(set(self.br.tolist())) != a.shape[0]:
            raise ConfigError("sample-then-best-reply predictions need a square game whose best replies to the "
                              "opponent's pure actions are all different (rps, matching_pennies)")

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """The distribution p with sample_br_response(p) = softmax(z)."""
        return softmax(np.asarray(z, dtype=np.float64))[self.br]


def check_rule(rule: str) -> str:
    """``rule`` if it is one of ``DECISION_RULES`` (else a ConfigError naming the valid ones)."""
    if rule not in DECISION_RULES:
        raise ConfigError(f"decision rule must be one of {', '.join(DECISION_RULES)}, got {rule!r}")
    return rule


def respond(payoff: np.ndarray, p: np.ndarray, rule: str, beta: float) -> np.ndarray:
    """The learner's mixed strategy for prediction ``p`` under ``rule`` (see ``DECISION_RULES``)."""
    return sample_br_response(payoff, p) if rule == "sample_br" else logit_response(payoff, p, beta)


def anytime_tau(t: int, k: int, delta: float) -> float:
    """tau_t = sqrt(2 t ln(K / delta))."""
    return math.sqrt(2.0 * t * math.log(k / delta))


def anytime_eta(t: int, k: int) -> float:
    """eta_t = sqrt(8 ln K / t)."""
    return math.sqrt(8.0 * math.log(k) / max(int(t), 1))


POST_SWITCH = ("hedge", "uniform")


class RobustifiedPredictor:
    """D' as a ``Predictor``: the base model until the regret trigger, then the Hedge-matching distribution.

    ``post_switch="uniform"`` is a control, not D': after the switch it predicts the uniform distribution, to show
    whether a test of D' measures the Hedge content of the switched branch at all.
    """

    def __init__(self, payoff: np.ndarray, base: Predictor, beta: float = 300.0, delta: float = 0.05,
                 rule: str = "logit", post_switch: str = "hedge") -> None:
        self.payoff = np.asarray(payoff, dtype=np.float64)
        self.base, self.beta, self.delta = base, float(beta), float(delta)
        self.rule = check_rule(rule)
        if post_switch not in POST_SWITCH:
            raise ConfigError(f"post_switch must be one of {', '.join(POST_SWITCH)}, got {post_switch!r}")
        self.post_switch = post_switch
        self.match = SampleBRMatching(self.payoff) if rule == "sample_br" else HedgeMatching(self.payoff, beta)
        self.k = self.payoff.shape[0]
        self.reset(self.payoff.shape[1])

    def reset(self, n_actions: int) -> None:
        self.base.reset(n_actions)
        self.t, self.cum, self.learner = 0, np.zeros(self.k), 0.0
        self.switched, self.switch_round = False, -1
        self._p: np.ndarray | None = None

    def predict(self) -> np.ndarray:
        if self._p is None:
            if not self.switched and self.t > 0 and self.cum.max() - self.learner > anytime_tau(self.t, self.k,
                                                                                                  self.delta):
                self.switched, self.switch_round = True, self.t
            if not self.switched:
                self._p = np.asarray(self.base.predict(), dtype=np.float64)
            elif self.post_switch == "uniform":
                self._p = np.full(self.payoff.shape[1], 1.0 / self.payoff.shape[1])
            else:
                self._p = self.match(anytime_eta(self.t, self.k) * self.cum)
        return self._p

    def update(self, action: int) -> None:
        q = respond(self.payoff, self.predict(), self.rule, self.beta)  # what the learner played this round
        u = self.payoff[:, int(action)]
        self.cum += u
        self.learner += float(q @ u)
        self.t += 1
        self.base.update(int(action))
        self._p = None


class LogitResponseAgent(RepeatedGameAgent):
    """Plays the response to any predictor's next-action distribution p: by default the logit response
    softmax(beta A p); ``rule="sample_br"`` plays the best reply to an action drawn from p."""

    def __init__(self, predictor: Predictor, beta: float = 300.0, rule: str = "logit", **kw: Any) -> None:
        super().__init__(**kw)
        self.predictor, self.beta, self.rule = predictor, float(beta), check_rule(rule)

    def _on_reset(self, info: dict[str, Any]) -> None:
        self.predictor.reset(self.n)

    def _observe(self, j: int, u: np.ndarray) -> None:
        self.predictor.update(j)

    def _decide(self) -> np.ndarray:
        return respond(self.payoff, self.predictor.predict(), self.rule, self.beta)

    def episode_info(self) -> dict[str, Any]:
        """Switch diagnostics when the predictor is D'."""
        return {"switched": bool(getattr(self.predictor, "switched", False)),
                "switch_round": int(getattr(self.predictor, "switch_round", -1))}


@dataclass(frozen=True)
class DPrimeConfig(Options):
    """The D' training run: horizon (= model context - 1), decision rule, data mix, model size, optimisation."""

    rounds: int = 200
    beta: float = 300.0
    delta: float = 0.05
    base_order: int = 1
    rule: str = "logit"
    base: str = "ngram"
    decay: float = 0.9
    sharpen: float = 1.0
    histories: int = 400
    val_fraction: float = 0.125
    steps: int = 600
    batch: int = 32
    lr: float = 3e-3
    d_model: int = 48
    n_layers: int = 3
    n_heads: int = 4


SOURCES = ("dprime", "D", "anti_model", "partly_adversarial")


BASES = ("ngram", "discounted_bigram")

# The claim (e) setting where D' differs from the base model by O(1) after the switch and a prediction error of TV
# eps moves the strategy by at most eps: sample-then-best-reply on a sharpened, discounted in-context bigram.
SAMPLE_BR_CONFIG = DPrimeConfig(rule="sample_br", base="discounted_bigram", decay=0.9, sharpen=8.0)


def base_predictor(cfg: DPrimeConfig) -> Predictor:
    """The base next-token model P of a D' config: the in-context n-gram (``base="ngram"``) or the discounted
    bigram (``"discounted_bigram"``), sharpened to the power ``sharpen``."""
    if cfg.base not in BASES:
        raise ConfigError(f"base must be one of {', '.join(BASES)}, got {cfg.base!r}")
    base: Predictor = (NGramPredictor(order=cfg.base_order) if cfg.base == "ngram"
                       else DiscountedBigramPredictor(cfg.decay))
    return base if cfg.sharpen == 1.0 else SharpenedPredictor(base, cfg.sharpen)


def exact_dprime(game: MatrixGame, cfg: DPrimeConfig, post_switch: str = "hedge") -> RobustifiedPredictor:
    """D' of a config as a predictor (fresh state)."""
    return RobustifiedPredictor(game.payoff, base_predictor(cfg), cfg.beta, cfg.delta, cfg.rule, post_switch)


def sample_histories(game: MatrixGame, cfg: DPrimeConfig, seed: int, count: int) -> dict[str, np.ndarray]:
    """``count`` histories, source h % 4 (see ``SOURCES``), each with next-token labels sampled from D'.

    Source ``dprime``: autoregressive samples of D' (the label *is* the next token). ``D``: a real opponent from
    the mixture D plays. ``anti_model``: the adversary plays against the logit response to D'.
    ``partly_adversarial``: the adversary's move with prob. 1/2, else a D' sample. In every case the label at
    position t is a fresh draw from D'(. | history before t) -- plain next-token targets on D' -- and the exact
    conditionals D'(. | h) and P(. | h) are kept for evaluation.
    """
    t_len, n = cfg.rounds, game.n_opponent
    inputs = np.zeros((count, t_len), dtype=np.int64)
    labels = np.zeros((count, t_len), dtype=np.int64)
    dprime = np.zeros((count, t_len, n))
    base_p = np.zeros((count, t_len, n))
    switched = np.zeros(count, dtype=bool)
    source = np.arange(count) % len(SOURCES)
    for h in range(count):
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), h]))
        pred = exact_dprime(game, cfg)
        pred.reset(n)
        kind = SOURCES[source[h]]
        opp = MixtureOpponent() if kind == "D" else AntiModelOpponent()
        opp.reset(n, rng)
        hist: list[int] = []
        for t in range(t_len):
            p = pred.predict()
            base_p[h, t] = p if not pred.switched else pred.base.predict()
            dprime[h, t] = p
            y = int(rng.choice(n, p=p))
            q = respond(game.payoff, p, cfg.rule, cfg.beta)
            if kind == "dprime" or (kind == "partly_adversarial" and rng.random() >= 0.5):
                j = y
            else:
                j = int(opp.act(hist, q, game))
            labels[h, t], inputs[h, t] = y, j
            hist.append(j)
            pred.update(j)
        switched[h] = pred.switched
    return {"inputs": inputs, "labels": labels, "dprime": dprime, "base": base_p, "switched": switched,
            "source": source}


def _model_inputs(inputs: np.ndarray, n: int) -> torch.Tensor:
    """[BOS, x_0 .. x_{T-2}]: position t sees the history before round t."""
    bos = np.full((inputs.shape[0], 1), n)
    return torch.as_tensor(np.concatenate([bos, inputs[:, :-1]], axis=1), dtype=torch.long)


def divergences(model: CausalTransformer, data: dict[str, np.ndarray]) -> dict[str, Any]:
    """Mean per-position TV and KL(D' || model) on the given histories, per source, and TV(P, D') on them."""
    with torch.no_grad():
        probs = torch.softmax(model(_model_inputs(data["inputs"], model.cfg.n_actions)).double(), -1).numpy()
    target = data["dprime"]
    tv = 0.5 * np.abs(probs - target).sum(-1)
    kl = (target * (np.log(np.maximum(target, 1e-12)) - np.log(np.maximum(probs, 1e-12)))).sum(-1)
    tv_base = 0.5 * np.abs(data["base"] - target).sum(-1)
    out: dict[str, Any] = {}
    for i, name in enumerate(SOURCES):
        rows = data["source"] == i
        if rows.any():
            out[name] = {"histories": int(rows.sum()), "mean_tv_model_vs_dprime": float(tv[rows].mean()),
                         "p95_tv_model_vs_dprime": float(np.quantile(tv[rows], 0.95)),
                         "mean_kl_dprime_to_model": float(kl[rows].mean()),
                         "mean_tv_base_vs_dprime": float(tv_base[rows].mean()),
                         "switch_rate": float(data["switched"][rows].mean())}
    return out


def train_dprime(game: MatrixGame, cfg: DPrimeConfig, seed: int) -> tuple[CausalTransformer, dict[str, Any]]:
    """Train a causal transformer (context T + 1) on D' samples with next-token cross-entropy; held-out report."""
    torch.manual_seed(seed)
    data = sample_histories(game, cfg, seed, cfg.histories)
    n_val = max(int(cfg.histories * cfg.val_fraction) // len(SOURCES) * len(SOURCES), len(SOURCES))
    train = {k: v[n_val:] for k, v in data.items()}
    val = {k: v[:n_val] for k, v in data.items()}
    mcfg = TransformerConfig(n_actions=game.n_opponent, context=cfg.rounds + 1, d_model=cfg.d_model,
                             n_layers=cfg.n_layers, n_heads=cfg.n_heads)
    model = CausalTransformer(mcfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    x_all, y_all = _model_inputs(train["inputs"], game.n_opponent), torch.as_tensor(train["labels"])
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(cfg.steps):
        idx = torch.randint(0, x_all.shape[0], (cfg.batch,), generator=gen)
        for g in opt.param_groups:
            g["lr"] = cfg.lr * 0.5 * (1 + math.cos(math.pi * step / cfg.steps))
        loss = nn.functional.cross_entropy(model(x_all[idx]).reshape(-1, game.n_opponent), y_all[idx].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return model, {"final_loss": float(np.mean(losses[-20:])), "first_loss": float(np.mean(losses[:20])),
                   "train_histories": int(x_all.shape[0]), "val_histories": n_val, "held_out": divergences(model, val)}


def cached_dprime_model(game: MatrixGame, cfg: DPrimeConfig, seed: int, path: Path | None
                        ) -> tuple[CausalTransformer, dict[str, Any]]:
    """Load the model from ``path`` if it was trained with this game, config and seed; else train and save it."""
    key = {"game": game.name, "config": asdict(cfg), "seed": int(seed)}
    if path is not None and Path(path).exists():
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if blob.get("extra", {}).get("key") == key:
            return load_model(path), dict(blob["extra"]["report"], cached=True)
    model, report = train_dprime(game, cfg, seed)
    if path is not None:
        report["sha256"] = save_model(model, Path(path), extra={"key": key, "report": report})
    return model, dict(report, cached=False)
