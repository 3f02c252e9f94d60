"""MinAtar games as channel-first uint8 gymnasium envs (a direct adapter over ``minatar.Environment``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envs.errors import ConfigError, choice_error

MINATAR_GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


class MinAtarEnv(gym.Env):
    """One MinAtar game with its minimal action set; observations (C, 10, 10) uint8 0/1 planes.

    Written directly over ``minatar.Environment`` (its own gym class skips gymnasium's seeding contract) so
    ``reset(seed=s)`` determines the episode, sticky actions included.
    """

    metadata = {"render_modes": []}

    def __init__(self, game: str, sticky_action_prob: float = 0.1, difficulty_ramping: bool = True) -> None:
        if game not in MINATAR_GAMES:
            raise choice_error("minatar game", game, list(MINATAR_GAMES))
        if not 0.0 <= float(sticky_action_prob) <= 1.0:
            raise ConfigError(f"sticky_action_prob must be in [0, 1], got {sticky_action_prob!r}")
        from minatar import Environment

        self.game = game
        self._env = Environment(game, sticky_action_prob=float(sticky_action_prob),
                                difficulty_ramping=difficulty_ramping)
        self._actions = list(self._env.minimal_action_set())
        h, w, c = self._env.state_shape()
        self.action_space = gym.spaces.Discrete(len(self._actions))
        self.observation_space = gym.spaces.Box(0, 1, (c, h, w), np.uint8)

    def _obs(self) -> np.ndarray:
        return np.ascontiguousarray(self._env.state().transpose(2, 0, 1), dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None or not hasattr(self, "_seeded"):
            # The game's RandomState drives spawns and sticky actions; derive it from gymnasium's generator.
            self._env.seed(int(self.np_random.integers(2**31 - 1)))
            self._seeded = True
        self._env.last_action = 0
        self._env.reset()
        return self._obs(), {}

    def step(self, action: Any):
        reward, terminal = self._env.act(self._actions[int(action)])
        return self._obs(), float(reward), bool(terminal), False, {}


def make_minatar_env(
    game: str, sticky_action_prob: float = 0.1, max_episode_steps: int | None = None
) -> gym.Env:
    """One MinAtar game (sticky actions with probability ``sticky_action_prob``, optional step limit)."""
    env: gym.Env = MinAtarEnv(game, sticky_action_prob=sticky_action_prob)
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, int(max_episode_steps))
    return env
