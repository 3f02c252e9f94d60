"""Claim (b)/(c) made concrete: a distribution D, a window w, and windowed robustifications of its predictor.

Setting (matching pennies, learner = matcher, K = N = 2):

* D: i.i.d. fair coin flips. Its conditionals are (1/2, 1/2) whatever the history, so a model with *any* window
  (even w = 0) represents D exactly; the base model P is that exact predictor.
* Decision rule: best response to a token sampled from the prediction. In matching pennies the best response to
  opponent action j is j, so the learner's mixed strategy *is* the predicted distribution; TV between predictors is
  then the same as distance between the strategies they induce.
* Adversary: an oblivious i.i.d. sequence with P(majority side) = 1/2 + eps, the side drawn per episode. Against
  it P earns T/2 while the best fixed action earns (1/2 + eps) T: regret eps T.

A w-windowed robustification D'_w may use only the last w opponent actions (and t). With w eps^2 < 1 a window of
the adversary's play looks like a window of D, so D'_w must either lean towards the in-window majority on D's
own sequences too (TV(D, D'_w) -> 1 as T grows) or keep paying ~eps per round. With unbounded context the switch
statistic (full-history regret of P) separates the two, which is the extended-context fix.

Each variant maps the opponent sequences (B, T) to the predicted P(action 1) at every round, vectorised over t.
TV(D, D') is estimated on D's own sequences by the likelihood ratio W = prod_t D'(x_t | h) / D(x_t | h):
TV = E_D[(1 - W)^+] exactly, and KL(D || D') = -E_D[ln W].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from envs.errors import choice_error

FAMILIES = ("trigger", "mix", "full")


@dataclass(frozen=True)
class Variant:
    """One robustification: ``family`` trigger (Hedge on the window while the window's regret of P exceeds tau),
    mix (always (1 - lam) P + lam Hedge-on-window), or full (unbounded context: permanent switch when P's regret
    exceeds tau_T = sqrt(2 T ln(K/delta)), then Hedge on the whole history)."""

    family: str
    window: int = 50
    tau: float = 0.0
    lam: float = 1.0
    delta: float = 0.05

    @property
    def name(self) -> str:
        """Short label used in tables and plots."""
        if self.family == "trigger":
            return f"trigger w={self.window} tau={self.tau:g}"
        if self.family == "mix":
            return f"mix w={self.window} lam={self.lam:g}"
        return "full context (switch at tau_T)"


def _hedge_p1(diff: np.ndarray, eta: float) -> np.ndarray:
    """Hedge's weight on action 1 given (payoff of 1 - payoff of 0) = n1 - n0: a logistic of eta * diff."""
    return 1.0 / (1.0 + np.exp(-eta * diff))


def predictions(variant: Variant, x: np.ndarray) -> np.ndarray:
    """(B, T) opponent actions in {0, 1} -> (B, T) predicted P(x_t = 1 | x_<t) under ``variant``."""
    b, t_len = x.shape
    ones = np.concatenate([np.zeros((b, 1)), np.cumsum(x, axis=1)], axis=1)  # (B, T+1): #1 among the first t
    t_idx = np.arange(t_len + 1)
    if variant.family in ("trigger", "mix"):
        w = int(variant.window)
        lo = np.maximum(t_idx - w, 0)
        n1 = ones[:, :t_len] - ones[:, lo[:t_len]]  # counts in the window before round t
        m = (t_idx[:t_len] - lo[:t_len])[None, :]
        diff = 2 * n1 - m  # n1 - n0
        hedge = _hedge_p1(diff, math.sqrt(8.0 * math.log(2) / w))
        if variant.family == "mix":
            return (1 - variant.lam) * 0.5 + variant.lam * hedge
        regret_p = np.abs(diff) / 2.0  # P plays (1/2, 1/2): in-window regret = max(n0, n1) - m/2
        return np.where(regret_p > variant.tau, hedge, 0.5)
    if variant.family == "full":
        tau = math.sqrt(2.0 * t_len * math.log(2 / variant.delta))
        diff = 2 * ones[:, :t_len] - t_idx[None, :t_len]
        # before the switch the learner plays P = (1/2, 1/2), so its regret is |n1 - n0| / 2; the switch is permanent
        switched = np.maximum.accumulate(np.abs(diff) / 2.0 > tau, axis=1)
        return np.where(switched, _hedge_p1(diff, math.sqrt(8.0 * math.log(2) / t_len)), 0.5)
    raise choice_error("robustification family", variant.family, FAMILIES)


def regret_curves(p1: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(B, T) cumulative regret of the learner that plays P(1) = p1 against x (matching pennies, expected payoffs)."""
    payoff = np.where(x == 1, p1, 1.0 - p1)
    learner = np.cumsum(payoff, axis=1)
    ones = np.cumsum(x, axis=1)
    best = np.maximum(ones, np.arange(1, x.shape[1] + 1)[None, :] - ones)
    return best - learner


def fair_coin(episodes: int, rounds: int, seed: int) -> np.ndarray:
    """Sequences from D."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), 1])).integers(0, 2, size=(episodes, rounds))


def biased_adversary(episodes: int, rounds: int, eps: float, seed: int) -> np.ndarray:
    """Oblivious i.i.d. sequences with P(side) = 1/2 + eps, the side drawn per episode."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 2]))
    side = rng.integers(0, 2, size=(episodes, 1))
    flips = rng.random((episodes, rounds)) < 0.5 + eps
    return np.where(flips, side, 1 - side)


def tv_and_kl(variant: Variant, episodes: int, rounds: int, seed: int) -> dict[str, float]:
    """Monte-Carlo TV(D, D'_variant) and KL(D || D') over T = ``rounds``, with normal 95 % intervals."""
    x = fair_coin(episodes, rounds, seed)
    p1 = np.clip(predictions(variant, x), 1e-12, 1 - 1e-12)
    log_w = np.sum(np.log(np.where(x == 1, p1, 1.0 - p1)) - math.log(0.5), axis=1)
    gap = np.clip(1.0 - np.exp(np.minimum(log_w, 50.0)), 0.0, None)
    half = 1.96 * gap.std(ddof=1) / math.sqrt(episodes)
    kl = -log_w
    mean = float(gap.mean())
    return {"tv": mean, "tv_ci95": [max(0.0, mean - half), min(1.0, mean + half)],
            "kl": float(kl.mean()), "kl_ci95_half": float(1.96 * kl.std(ddof=1) / math.sqrt(episodes)),
            "deviating_rounds": float(np.mean(np.abs(p1 - 0.5) > 1e-9))}


def adversary_regret(variant: Variant, horizons: list[int], episodes: int, eps: float, seed: int) -> list[float]:
    """Mean average regret R_T / T against the biased adversary, for each horizon T (fresh run per T)."""
    out = []
    for t in horizons:
        x = biased_adversary(episodes, t, eps, seed + t)
        out.append(float(regret_curves(predictions(variant, x), x)[:, -1].mean() / t))
    return out
