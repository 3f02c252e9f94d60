"""The streaming training loop: one env, one learner, one transition at a time; resumable at episode ends.

A step whose ``info["life_loss"]`` is true is passed to the learner as terminal while the game (and the episode
being reported) continues.

Every episode's reset seed is derived from (run seed, episode index), so a run restored from a checkpoint taken
at an episode boundary (learner state + RNG + counters) continues exactly as the uninterrupted run would have.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np


def episode_seed(run_seed: int, episode: int) -> int:
    """The env reset seed of episode ``episode`` of a run seeded ``run_seed``."""
    return int(np.random.SeedSequence([int(run_seed), int(episode), 0xE915]).generate_state(1)[0])


@dataclass
class LoopCounters:
    """Where a run stands (saved with every checkpoint)."""

    step: int = 0
    episode: int = 0


class StreamingLoop:
    """Drives ``learner.act`` / ``learner.observe`` over ``env`` and reports finished episodes."""

    def __init__(self, env: gym.Env, learner: Any, seed: int) -> None:
        self.env, self.learner, self.seed = env, learner, int(seed)
        self.counters = LoopCounters()

    def run(self, total_steps: int, on_episode: Callable[[dict[str, Any]], None],
            on_checkpoint: Callable[[], None] | None = None, checkpoint_every: int = 0,
            on_progress: Callable[[int], None] | None = None) -> None:
        """Step until ``total_steps`` env steps in all; ``on_checkpoint`` fires at the first episode end after
        every ``checkpoint_every`` steps (a mid-episode stop is resumed from the last checkpoint)."""
        c = self.counters
        next_ckpt = (c.step // checkpoint_every + 1) * checkpoint_every if checkpoint_every else None
        obs, _ = self.env.reset(seed=episode_seed(self.seed, c.episode))
        ep_return, ep_len = 0.0, 0
        while c.step < total_steps:
            action = self.learner.act(obs)
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            # a lost life (Atari ``episodic_life``) ends the learner's episode but not the game
            learn_terminal = bool(terminated) or bool(info.get("life_loss", False))
            self.learner.observe(obs, action, float(reward), next_obs, learn_terminal, truncated)
            c.step += 1
            ep_return += float(reward)
            ep_len += 1
            if on_progress is not None:
                on_progress(1)
            if terminated or truncated:
                on_episode({"step": c.step, "episode": c.episode, "return": ep_return, "length": ep_len})
                c.episode += 1
                ep_return, ep_len = 0.0, 0
                if next_ckpt is not None and c.step >= next_ckpt and on_checkpoint is not None:
                    on_checkpoint()
                    next_ckpt = (c.step // checkpoint_every + 1) * checkpoint_every
                obs, _ = self.env.reset(seed=episode_seed(self.seed, c.episode))
            else:
                obs = next_obs

    def state_dict(self) -> dict[str, Any]:
        """Learner state plus counters; only meaningful at an episode boundary (see ``on_checkpoint``)."""
        return {"learner": self.learner.state_dict(), "counters": asdict(self.counters), "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        self.counters = LoopCounters(**state["counters"])
