"""The episodic loop: one policy, one env, one seeded episode, a flat record of what happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np


@dataclass
class EpisodeOutcome:
    """What one episode produced: its metrics, the last info, and frames when video was asked for."""

    metrics: dict[str, Any]
    steps: int
    total_return: float
    wall_s: float
    frames: list[np.ndarray] = field(default_factory=list)


def default_episode_metrics(info: dict[str, Any], total_return: float, steps: int) -> dict[str, Any]:
    """Read the manipulation metrics from the final ``info`` (absent keys count as False)."""
    return {
        "success": bool(info.get("success", False)),
        "correct_object": bool(info.get("correct_object", False)),
        "wrong_object": bool(info.get("wrong_object", False)),
        "return": float(total_return),
    }


def frame_of(env: gym.Env, obs: Any, policy: Any) -> np.ndarray | None:
    """The frame to record: the policy's prompted view beside the camera image when it has one."""
    image = obs.get("image") if isinstance(obs, dict) else None
    if image is None:
        try:
            image = env.render()
        except Exception:  # envs without rgb_array rendering record nothing
            return None
    if image is None:
        return None
    image = np.asarray(image)
    if image.ndim == 4:  # several cameras: the first is the main view
        image = image[0]
    prompted = getattr(policy, "last_prompted_image", None)
    if prompted is not None and np.asarray(prompted).shape == image.shape:
        image = np.concatenate([image, np.asarray(prompted)], axis=1)
    return image.astype(np.uint8)


def run_episode(
    env: gym.Env,
    policy: Any,
    env_seed: int,
    policy_seed: int,
    max_steps: int | None = None,
    record: bool = False,
    episode_metrics: Callable[[dict[str, Any], float, int], dict[str, Any]] | None = None,
    episode: int | None = None,
) -> EpisodeOutcome:
    """Run one episode to termination, truncation or ``max_steps``; ``reset(seed=env_seed)`` fixes the episode.

    Dataset envs (``env.unwrapped.indexed_episodes`` true: one episode = one item of a fixed split) are also told
    the episode index, ``reset(options={"episode": episode})``, so episode i is item i whatever the seed.
    """
    start = time.perf_counter()
    if episode is not None and getattr(env.unwrapped, "indexed_episodes", False):
        obs, info = env.reset(seed=int(env_seed), options={"episode": int(episode)})
    else:
        obs, info = env.reset(seed=int(env_seed))
    instruction = obs.get("instruction", "") if isinstance(obs, dict) else ""
    policy.reset(str(instruction), {**info, "policy_seed": int(policy_seed)})
    frames: list[np.ndarray] = []
    total, steps = 0.0, 0
    while True:
        action = policy.act(obs)
        if record:  # after act, so the frame shows the prompted view the policy was just fed
            frame = frame_of(env, obs, policy)
            if frame is not None:
                frames.append(frame)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        steps += 1
        if terminated or truncated or (max_steps is not None and steps >= max_steps):
            break
    if record and frames:
        frame = frame_of(env, obs, None)
        if frame is not None and frame.shape == frames[-1].shape:
            frames.append(frame)
    metrics = (episode_metrics or default_episode_metrics)(info, total, steps)
    # Policies may report per-episode diagnostics (e.g. VAP's grounding result) through ``episode_info``.
    extra = getattr(policy, "episode_info", None)
    if callable(extra):
        metrics.update(extra())
    return EpisodeOutcome(metrics=metrics, steps=steps, total_return=total, wall_s=time.perf_counter() - start,
                          frames=frames)
