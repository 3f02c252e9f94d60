"""Decision makers for repeated games, each a ``Policy``: Hedge, best response to a predictor, and robustified BR.

All of them receive the previous round's opponent action as the observation (N = "no round yet"), keep the
full-information feedback themselves, and return a mixed strategy over the learner's K actions.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from envs.config import Options, require
from envs.errors import ConfigError, choice_error
from policies.next_token.predictors import Predictor


@dataclass(frozen=True)
class WindowOptions(Options):
    """``--policy-option`` keys of the bounded-context robustified agent (:class:`WindowedRobustAgent`)."""

    title = "windowed_robust"
    window: int = field(default=100, metadata={"help": "context window (rounds) of the predictor and the trigger"})

    def check(self) -> None:
        require(self.window >= 1, f"window must be >= 1, got {self.window}")


@dataclass(frozen=True)
class TauOptions(Options):
    """``--policy-option`` keys of the explicit-layer robustified transformer
    (:class:`policies.next_token.explicit_layers.ExplicitRobustAgent`)."""

    title = "robust_transformer"
    tau: Literal["delta", "exp"] | float = field(
        default="delta",
        metadata={"help": "trigger threshold: delta = sqrt(2T ln(K/0.05)), exp = T^(2/3), or a number"})


def hedge_eta(rounds: int, n_actions: int) -> float:
    """The learning rate sqrt(8 ln K / T) for which Hedge's regret is at most sqrt(T ln K / 2) (payoffs in [0,1])."""
    return math.sqrt(8.0 * math.log(n_actions) / max(int(rounds), 1))


def hedge_regret_bound(rounds: int, n_actions: int) -> float:
    """sqrt(T ln K / 2): Hedge's worst-case regret with ``hedge_eta``."""
    return math.sqrt(rounds * math.log(n_actions) / 2.0)


def softmax(x: np.ndarray) -> np.ndarray:
    """Numerically stable softmax."""
    z = np.exp(x - x.max())
    return z / z.sum()


TAU_SCHEDULES = ("exp", "delta")


def tau_schedule(schedule: str | float, rounds: int, n_actions: int, delta: float = 0.05) -> float:
    """Switch threshold: ``exp`` = T^(2/3) (TV exponentially small in T^(1/3)); ``delta`` = sqrt(2 T ln(K/delta))."""
    if isinstance(schedule, (int, float)):
        return float(schedule)
    if schedule == "exp":
        return float(rounds) ** (2.0 / 3.0)
    if schedule == "delta":
        if not 0.0 < delta < 1.0:
            raise ConfigError(f"delta must be in (0, 1), got {delta!r}")
        return math.sqrt(2.0 * rounds * math.log(n_actions / delta))
    raise choice_error("tau schedule", schedule, TAU_SCHEDULES)


def switch_probability_bound(tau: float, rounds: int, n_actions: int) -> float:
    """K exp(-tau^2 / 2T): Azuma bound on P(switch) when the opponent really follows the predicted distribution."""
    return min(1.0, n_actions * math.exp(-(tau**2) / (2.0 * rounds)))


class RepeatedGameAgent:
    """Shared bookkeeping: payoff matrix, cumulative payoff per action, the learner's own expected payoff."""

    def __init__(self, payoff: np.ndarray | None = None, rounds: int | None = None) -> None:
        self._payoff0, self._rounds0 = payoff, rounds

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Read the game (``info["payoff"]``, ``info["rounds"]``) and clear the history."""
        payoff = info.get("payoff", self._payoff0)
        if payoff is None:
            raise ConfigError("repeated-game agents need info['payoff'] (the K x N payoff matrix)")
        self.payoff = np.asarray(payoff, dtype=np.float64)
        self.k, self.n = self.payoff.shape
        self.rounds = int(info.get("rounds", self._rounds0 or 1000))
        self.t = 0
        self.cum = np.zeros(self.k)
        self.learner = 0.0
        self._last_p: np.ndarray | None = None
        self._on_reset(info)

    def _on_reset(self, info: dict[str, Any]) -> None:
        pass

    def _observe(self, j: int, u: np.ndarray) -> None:
        pass

    def _decide(self) -> np.ndarray:
        raise NotImplementedError

    def act(self, obs: Any) -> np.ndarray:
        """Absorb the previous round's opponent action (if any), then return this round's mixed strategy."""
        j = int(np.asarray(obs).reshape(-1)[0])
        if self._last_p is not None and 0 <= j < self.n:
            u = self.payoff[:, j]
            self.cum += u
            self.learner += float(self._last_p @ u)
            self.t += 1
            self._observe(j, u)
        p = self._decide()
        self._last_p = p
        return p.astype(np.float32)

    def regret(self) -> float:
        """Regret so far against the best fixed action in hindsight (expected payoffs)."""
        return float(self.cum.max() - self.learner)


class HedgeAgent(RepeatedGameAgent):
    """Exponential weights on cumulative payoffs with eta = sqrt(8 ln K / T)."""

    def __init__(self, eta: float | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.eta_fixed = eta

    def _on_reset(self, info: dict[str, Any]) -> None:
        self.eta = self.eta_fixed if self.eta_fixed is not None else hedge_eta(self.rounds, self.k)

    def _decide(self) -> np.ndarray:
        return softmax(self.eta * self.cum)


def one_hot(i: int, k: int) -> np.ndarray:
    """The pure strategy on action i."""
    p = np.zeros(k)
    p[i] = 1.0
    return p


class BestResponseAgent(RepeatedGameAgent):
    """Plays a pure best response to the predictor's next-action distribution (the exploitable baseline)."""

    def __init__(self, predictor: Predictor, **kw: Any) -> None:
        super().__init__(**kw)
        self.predictor = predictor

    def _on_reset(self, info: dict[str, Any]) -> None:
        self.predictor.reset(self.n)

    def _observe(self, j: int, u: np.ndarray) -> None:
        self.predictor.update(j)

    def _br(self) -> int:
        return int(np.argmax(self.payoff @ self.predictor.predict()))

    def _decide(self) -> np.ndarray:
        return one_hot(self._br(), self.k)


class RobustAgent(BestResponseAgent):
    """Unbounded-context robustification: best-respond until max regret exceeds tau, then Hedge for good.

    After the switch Hedge runs on *all* cumulative payoffs (warm start) — regret stays <= tau + 1 + sqrt(T ln K / 2)
    on every sequence, and the whole rule is sums over the history, which is what the explicit transformer layers
    in ``explicit_layers`` compute. If the opponent follows the predicted distribution, the switch fires with
    probability <= K exp(-tau^2 / 2T).
    """

    def __init__(self, predictor: Predictor, tau: str | float = "delta", delta: float = 0.05, **kw: Any) -> None:
        super().__init__(predictor, **kw)
        self.tau_spec, self.delta = tau, delta

    def _on_reset(self, info: dict[str, Any]) -> None:
        super()._on_reset(info)
        self.tau = tau_schedule(self.tau_spec, self.rounds, self.k, self.delta)
        self.eta = hedge_eta(self.rounds, self.k)
        self.switched, self.switch_round = False, -1

    def _decide(self) -> np.ndarray:
        if not self.switched and self.regret() > self.tau:
            self.switched, self.switch_round = True, self.t
        if self.switched:
            return softmax(self.eta * self.cum)
        return one_hot(self._br(), self.k)

    def episode_info(self) -> dict[str, Any]:
        """Per-episode diagnostics merged into the episode record."""
        return {"switched": bool(self.switched), "switch_round": int(self.switch_round), "tau": float(self.tau)}


class WindowedRobustAgent(BestResponseAgent):
    """Bounded-context robustification: everything it uses lives in the last ``window`` rounds.

    Trigger statistic: max_i sum over the window of (u_s[i] - u_s[b_s]) where b_s is the best response the
    predictor gave at round s (the counterfactual best-response regret, as in the explicit layers); it plays Hedge
    on the window's payoff sums while any trigger fired within the window, best response otherwise. With
    ``window >= T`` it is exactly ``RobustAgent`` (checked in the tests).
    """

    def __init__(self, predictor: Predictor, window: int, tau: str | float = "delta", delta: float = 0.05,
                 **kw: Any) -> None:
        super().__init__(predictor, **kw)
        if int(window) < 1:
            raise ConfigError(f"window must be a positive integer, got {window!r}")
        self.window, self.tau_spec, self.delta = int(window), tau, delta

    def _on_reset(self, info: dict[str, Any]) -> None:
        super()._on_reset(info)
        horizon = min(self.window, self.rounds)
        self.tau = tau_schedule(self.tau_spec, horizon, self.k, self.delta)
        self.eta = hedge_eta(horizon, self.k)
        self.buf: deque[tuple[np.ndarray, float, bool]] = deque()
        self.win_cum = np.zeros(self.k)
        self.win_br = 0.0
        self._last_b = 0
        self.fired_in_buf = 0
        self.switched, self.switch_round = False, -1
        self.deviations = 0

    def _observe(self, j: int, u: np.ndarray) -> None:
        super()._observe(j, u)
        self.buf.append((u, float(u[self._last_b]), self._fired))
        self.win_cum += u
        self.win_br += float(u[self._last_b])
        self.fired_in_buf += int(self._fired)
        if len(self.buf) > self.window:
            old_u, old_br, old_fired = self.buf.popleft()
            self.win_cum -= old_u
            self.win_br -= old_br
            self.fired_in_buf -= int(old_fired)

    def _decide(self) -> np.ndarray:
        b = self._br()
        self._last_b = b
        self._fired = bool(self.win_cum.max() - self.win_br > self.tau)
        recent_fire = self._fired or self.fired_in_buf > 0
        if recent_fire:
            if not self.switched:
                self.switched, self.switch_round = True, self.t
            self.deviations += 1
            return softmax(self.eta * self.win_cum)
        return one_hot(b, self.k)

    def episode_info(self) -> dict[str, Any]:
        """Per-episode diagnostics merged into the episode record."""
        return {"switched": bool(self.switched), "switch_round": int(self.switch_round), "tau": float(self.tau),
                "deviation_rounds": int(self.deviations)}
