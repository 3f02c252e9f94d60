"""Grasp-failure recovery around any SIMPLER-convention policy: reopen and back off when a grasp closed on nothing.

A parallel gripper that closes on air shuts completely; one that closes on an object stops at the object's width.
Real pick-and-place stacks check this from the finger encoders and retry. The wrapped policy sees
``obs["ee_state"] = [x, y, z, yaw, gripper_opening, gripper_closed_command]``; when the command has been "closed"
for ``settle_steps`` steps and the fingers are nearly touching, :class:`GraspRetry` overrides the next
``open_steps`` actions with "open and rise" (no xy motion), then hands control back, at most ``max_retries`` times
per episode. The base policy is still called every step (so its own state — action ensembles, object memory —
advances as usual) and is never modified; only proprioception the base policy already receives is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.config import Options
from envs.errors import ConfigError
from policies.base import Policy


@dataclass(frozen=True)
class GraspRetryConfig(Options):
    """When a grasp counts as empty and what the retry does."""

    max_retries: int = 2
    empty_width: float = 0.01  # metres between the fingers below which nothing is held (objects are >= 2.5 cm)
    settle_steps: int = 2  # consecutive closed-and-empty steps before acting (the fingers take a step to close)
    open_steps: int = 3  # steps of "open and rise" before the base policy takes over again
    rise: float = 0.03  # metres per step upward while reopening (the env clips deltas at 3 cm)

    def check(self) -> None:
        if self.max_retries < 0:
            raise ConfigError(f"grasp max_retries must be >= 0, got {self.max_retries}")
        if not 0.0 < self.empty_width < 0.08:
            raise ConfigError(f"grasp empty_width must be in (0, 0.08) metres, got {self.empty_width}")
        if self.settle_steps < 1 or self.open_steps < 1:
            raise ConfigError(f"grasp settle_steps and open_steps must be >= 1, got {self.settle_steps}, "
                              f"{self.open_steps}")


class GraspRetry:
    """A :class:`~policies.base.Policy` wrapper: the base policy's actions, except after a grasp closed on air."""

    def __init__(self, base: Policy, config: GraspRetryConfig | None = None) -> None:
        self.base = base
        self.cfg = config or GraspRetryConfig()
        self.retries = 0
        self._empty_steps = 0
        self._reopen_left = 0

    def __getattr__(self, name: str) -> Any:
        # Attribute access falls through to the base (e.g. VAP's ``base.instruction``), as gymnasium wrappers do.
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Reset the base policy and the retry count."""
        self.base.reset(instruction, info)
        self.retries = 0
        self._empty_steps = 0
        self._reopen_left = 0

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        """The base policy's action, or "open and rise" while recovering from an empty grasp."""
        action = np.asarray(self.base.act(obs), dtype=np.float32).copy()
        if self._reopen_left > 0:
            self._reopen_left -= 1
            return self._open_and_rise(action)
        state = np.asarray(obs["ee_state"], dtype=np.float32).reshape(-1)
        empty = state[5] > 0.5 and state[4] < self.cfg.empty_width
        self._empty_steps = self._empty_steps + 1 if empty else 0
        if self._empty_steps >= self.cfg.settle_steps and self.retries < self.cfg.max_retries:
            self.retries += 1
            self._empty_steps = 0
            self._reopen_left = self.cfg.open_steps - 1
            return self._open_and_rise(action)
        return action

    def _open_and_rise(self, action: np.ndarray) -> np.ndarray:
        action[:6] = 0.0
        action[2] = self.cfg.rise
        action[6] = -1.0
        return action

    def episode_info(self) -> dict[str, Any]:
        """The base policy's per-episode record plus ``grasp_retries`` (how many empty grasps were retried)."""
        extra = getattr(self.base, "episode_info", None)
        info = dict(extra()) if callable(extra) else {}
        info["grasp_retries"] = self.retries
        return info
