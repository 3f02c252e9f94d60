"""The repeated-game loop: one agent against one opponent for T rounds, with the per-round regret curve."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.games.env import RepeatedGameEnv


@dataclass
class GameTrajectory:
    """What one repeated game produced: per-round regret, the opponent's moves, the learner's strategies."""

    regret: np.ndarray  # (T,) cumulative regret after each round
    opponent: np.ndarray  # (T,) opponent actions
    mixed: np.ndarray  # (T, K) learner mixed strategies
    total_payoff: float
    info: dict[str, Any]  # the agent's episode_info(), if any

    @property
    def final_regret(self) -> float:
        """Regret after the last round."""
        return float(self.regret[-1])

    @property
    def avg_regret(self) -> float:
        """Final regret divided by T."""
        return float(self.regret[-1] / len(self.regret))


def play_game(env: RepeatedGameEnv, agent: Any, env_seed: int, policy_seed: int = 0) -> GameTrajectory:
    """Play one full repeated game (``env.rounds`` rounds); ``env_seed`` fixes the opponent's randomness."""
    obs, info = env.reset(seed=int(env_seed))
    agent.reset("", {**info, "policy_seed": int(policy_seed)})
    t_max = env.rounds
    regret = np.empty(t_max)
    opp = np.empty(t_max, dtype=np.int64)
    mixed = np.empty((t_max, env.game.n_learner))
    total = 0.0
    for t in range(t_max):
        action = agent.act(obs)
        obs, reward, _, truncated, info = env.step(action)
        regret[t], opp[t], mixed[t] = info["regret"], info["opponent_action"], info["mixed"]
        total += reward
    extra = agent.episode_info() if callable(getattr(agent, "episode_info", None)) else {}
    return GameTrajectory(regret, opp, mixed, total, extra)


def games_episode_metrics(info: dict[str, Any], total_return: float, steps: int) -> dict[str, Any]:
    """Episode record for the ``games`` suite.

    ``success``: final average regret <= sqrt(ln K / (2T)), i.e. total regret within Hedge's worst-case bound.
    ``switched`` defaults to False; robustified policies overwrite it through ``episode_info``.
    """
    k = int(np.asarray(info["payoff"]).shape[0])
    rounds = int(info.get("round", steps))
    avg = float(info["regret"]) / max(rounds, 1)
    return {
        "success": bool(avg <= math.sqrt(math.log(k) / (2.0 * rounds))),
        "correct_object": False,
        "wrong_object": False,
        "return": float(total_return),
        "regret": float(info["regret"]),
        "avg_regret": avg,
        "switched": False,
    }
