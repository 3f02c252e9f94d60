"""The Policy interface every action-producing model in Embodia implements."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np


@runtime_checkable
class Policy(Protocol):
    """Maps observations to actions; knows nothing of the env class.

    ``reset`` is called once at the start of every episode with the episode's instruction ("" when the task has
    none) and the ``info`` dict returned by ``env.reset``; ``act`` is called once per control step. The episode
    runner adds ``info["policy_seed"]`` (an int derived from suite, task, policy and episode): a policy with
    randomness of its own reseeds from it, so an episode never depends on which episodes ran before it.
    """

    def reset(self, instruction: str, info: dict[str, Any]) -> None: ...

    def act(self, obs: Any) -> Any: ...


class RandomPolicy:
    """Samples uniformly from an action space with its own seeded generator (the reference floor)."""

    def __init__(self, action_space: gym.Space, seed: int = 0) -> None:
        self.action_space = action_space
        self.action_space.seed(seed)

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        if "policy_seed" in info:
            self.action_space.seed(int(info["policy_seed"]))

    def act(self, obs: Any) -> Any:
        return self.action_space.sample()


def policy_seed_rng(seed: int) -> np.random.Generator:
    """A generator for a policy's own randomness, independent of the environment's."""
    return np.random.default_rng(np.random.SeedSequence([seed, 0x9E3779B9]))
