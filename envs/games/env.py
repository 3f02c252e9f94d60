"""A repeated matrix game as a gymnasium env: one episode is T rounds against one opponent.

Action: the learner's mixed strategy (K non-negative weights, normalised by the env; all-zero means uniform), so
adaptive opponents can react to the distribution and regret is measured on expected payoffs. Observation: the
opponent's previous action (N means "no round played yet"). Reward: the learner's expected payoff p . A[:, j].
Info carries the full-information feedback (payoff vector) and the running regret against the best fixed action.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from envs.config import Options, require
from envs.errors import ConfigError
from envs.games.matrix import MatrixGame
from envs.games.opponents import Opponent


@dataclass(frozen=True)
class GamesEnvOptions(Options):
    """Options of a repeated game (``--env-option`` keys of the games suite, keywords of its gymnasium ids)."""

    title = "games env"
    rounds: int = field(default=1000, metadata={"help": "rounds per episode"})
    game_seed: int = field(default=0, metadata={"help": "seed of the random KxN games' payoffs"})

    def check(self) -> None:
        require(1 <= self.rounds <= 10_000_000, f"rounds must be in [1, 10000000], got {self.rounds}")
        require(self.game_seed >= 0, f"game_seed must be >= 0, got {self.game_seed}")


def normalise_mixed(action: np.ndarray, k: int) -> np.ndarray:
    """Clip to non-negative and normalise to a distribution over K actions (uniform when it sums to 0)."""
    p = np.clip(np.asarray(action, dtype=np.float64).reshape(-1), 0.0, None)
    if p.shape[0] != k:
        raise ValueError(f"mixed strategy must have {k} entries, got {p.shape[0]}")
    total = p.sum()
    return p / total if total > 0 and np.isfinite(total) else np.full(k, 1.0 / k)


class RepeatedGameEnv(gym.Env):
    """T rounds of ``game`` against ``opponent``; ``reset(seed=s)`` fixes the opponent's draws."""

    metadata = {"render_modes": []}

    def __init__(self, game: MatrixGame, opponent: Opponent, rounds: int = 1000, opponent_name: str = "") -> None:
        if int(rounds) < 1:
            raise ConfigError(f"rounds must be a positive integer, got {rounds!r}")
        self.game, self.opponent, self.rounds = game, opponent, int(rounds)
        self.opponent_name = opponent_name or type(opponent).__name__
        k, n = game.n_learner, game.n_opponent
        self.action_space = gym.spaces.Box(0.0, 1.0, shape=(k,), dtype=np.float32)
        self.observation_space = gym.spaces.Discrete(n + 1)
        self._t = 0
        self._history: list[int] = []
        self._cum_payoffs = np.zeros(k)
        self._cum_learner = 0.0

    def _base_info(self) -> dict[str, Any]:
        return {"payoff": self.game.payoff.copy(), "rounds": self.rounds, "game": self.game.name,
                "opponent": self.opponent_name}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.opponent.reset(self.game.n_opponent, self.np_random)
        self._t, self._history = 0, []
        self._cum_payoffs = np.zeros(self.game.n_learner)
        self._cum_learner = 0.0
        return np.int64(self.game.n_opponent), self._base_info()

    def step(self, action):
        if self._t >= self.rounds:
            raise RuntimeError("episode is over; call reset()")
        p = normalise_mixed(action, self.game.n_learner)
        j = int(self.opponent.act(self._history, p, self.game))
        u = self.game.payoff_vector(j)
        reward = float(p @ u)
        self._history.append(j)
        self._cum_payoffs += u
        self._cum_learner += reward
        self._t += 1
        regret = float(self._cum_payoffs.max() - self._cum_learner)
        info = {**self._base_info(), "round": self._t, "opponent_action": j, "payoff_vector": u.copy(),
                "mixed": p, "regret": regret, "avg_regret": regret / self._t,
                "best_fixed_payoff": float(self._cum_payoffs.max()), "learner_payoff": self._cum_learner}
        truncated = self._t >= self.rounds
        return np.int64(j), reward, False, truncated, info
