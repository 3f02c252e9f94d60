"""Run a SIMPLER-trained policy (base-frame EE deltas) in an env that takes absolute TCP targets (VLABench).

The adapter keeps its own commanded pose: it starts from ``obs["ee_pose"]`` at the first step of an episode and
adds each delta with the same conversion the env's ``action_mode=delta`` uses, so both routes move the arm alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.manipulation.scene import MAX_DELTA_POS, MAX_DELTA_ROT
from envs.manipulation.vlabench.scene import WORKSPACE_HIGH, WORKSPACE_LOW, apply_delta


class DeltaToAbsolute:
    """Wraps ``base`` (a policy emitting [dx, dy, dz, droll, dpitch, dyaw, gripper]); emits absolute targets."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.pos: np.ndarray | None = None
        self.rpy: np.ndarray | None = None

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """New episode: the commanded pose is re-read from the next observation."""
        self.pos = self.rpy = None
        self.base.reset(instruction, info)

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        """The base's delta, integrated into an absolute [x, y, z, roll, pitch, yaw, gripper] target."""
        if self.pos is None:
            pose = np.asarray(obs["ee_pose"], float)
            self.pos, self.rpy = pose[:3].copy(), pose[3:6].copy()
        delta = np.asarray(self.base.act(obs), float).reshape(-1)
        self.pos, self.rpy = apply_delta(self.pos, self.rpy, delta, MAX_DELTA_POS, MAX_DELTA_ROT)
        self.pos = np.clip(self.pos, WORKSPACE_LOW, WORKSPACE_HIGH)
        return np.array([*self.pos, *self.rpy, delta[6]], np.float32)

    def __getattr__(self, name: str) -> Any:  # episode_info, last_prompted_image, ... of the wrapped policy
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)
