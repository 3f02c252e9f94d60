"""Run a SIMPLER-style policy (base-frame EE deltas) in an env that takes absolute TCP targets (VLABench).

What a delta is added to depends on what the policy was trained on (its ``action_frame``, read through any
wrappers' ``base``): ``"command"`` (the default, SIMPLER-trained and the first VLABench heads) keeps the adapter's own
commanded pose, started from ``obs["ee_pose"]`` at an episode's first step, and adds each delta with the conversion
the env's ``action_mode=delta`` uses, so both routes move the arm alike. ``"hand"`` (heads trained on deltas from the
measured hand pose) re-reads the hand position from ``obs["ee_pose"]`` every step and adds the delta to it, clipped
per axis to ``HAND_MAX_DELTA_POS`` (the scripted expert's step) instead of the SIMPLER 3 cm; the yaw still integrates on
the commanded orientation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.manipulation.scene import MAX_DELTA_POS, MAX_DELTA_ROT
from envs.manipulation.vlabench.scene import HAND_MAX_DELTA_POS, WORKSPACE_HIGH, WORKSPACE_LOW, apply_delta


def action_frame(policy: Any) -> str:
    """The frame a (possibly wrapped) policy's deltas are meant for: its own or the first ``base``'s that says."""
    seen = 0
    while policy is not None and seen < 8:  # wrappers nest a few deep (VAP → prompt → VLA); never loop forever
        frame = vars(policy).get("action_frame") if hasattr(policy, "__dict__") else None
        if frame is not None:
            return str(frame)
        policy, seen = vars(policy).get("base") if hasattr(policy, "__dict__") else None, seen + 1
    return "command"


class DeltaToAbsolute:
    """Wraps ``base`` (a policy emitting [dx, dy, dz, droll, dpitch, dyaw, gripper]); emits absolute targets."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.frame = action_frame(base)
        self.pos: np.ndarray | None = None
        self.rpy: np.ndarray | None = None

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """New episode: the commanded pose is re-read from the next observation."""
        self.pos = self.rpy = None
        self.base.reset(instruction, info)

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        """The base's delta, integrated into an absolute [x, y, z, roll, pitch, yaw, gripper] target."""
        pose = np.asarray(obs["ee_pose"], float)
        if self.pos is None:
            self.pos, self.rpy = pose[:3].copy(), pose[3:6].copy()
        if self.frame == "hand":  # the delta starts from where the hand is, not from where it was sent
            self.pos = pose[:3].copy()
        delta = np.asarray(self.base.act(obs), float).reshape(-1)
        max_pos = HAND_MAX_DELTA_POS if self.frame == "hand" else MAX_DELTA_POS
        self.pos, self.rpy = apply_delta(self.pos, self.rpy, delta, max_pos, MAX_DELTA_ROT)
        self.pos = np.clip(self.pos, WORKSPACE_LOW, WORKSPACE_HIGH)
        return np.array([*self.pos, *self.rpy, delta[6]], np.float32)

    def __getattr__(self, name: str) -> Any:  # episode_info, last_prompted_image, ... of the wrapped policy
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)
