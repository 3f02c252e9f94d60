"""A privileged scripted expert for the ManiSkill3 tabletop tasks (the suite's ceiling, never an evaluated method).

It reads actor and gripper poses from the env (``env.unwrapped.actor_pose`` / ``tcp_pose``) and emits actions in
the SIMPLER convention. Pick-and-place tasks: hover above the object → descend with the gripper's yaw on one of
the cube's faces → close → carry to the goal (or above the other cube) → release. Push and pull: lower the closed
gripper behind (push) or beyond (pull) the cube and slide it along x onto the target.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

MAX_POS, MAX_ROT = 0.1, 0.1  # the ManiSkill env's per-step action bounds (metres, radians)
HOVER = 0.08  # approach height above the grasp point
CLOSE_STEPS = 4  # control steps the gripper gets to close before lifting
LIFT = 0.08  # straight up after the grasp, clear of the table and the other cube


def _yaw_error(target: float, current: float) -> float:
    """Smallest rotation bringing ``current`` onto one of the cube's four face directions (in [-π/4, π/4))."""
    return (target - current + math.pi / 4) % (math.pi / 2) - math.pi / 4


class ManiSkillExpert:
    """Phase machine over the privileged state of one ``ManiSkillEnv``."""

    def __init__(self, env: Any, gain: float = 1.0) -> None:
        self.env = env.unwrapped
        self.gain = float(gain)
        self.reset("", {})

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Start a new episode."""
        self.phase, self.timer = "approach", 0
        self.lift_to = np.zeros(3)

    def _move(self, target: np.ndarray, grip: float, yaw_target: float | None = None) -> np.ndarray:
        pos, yaw = self.env.tcp_pose()
        d = np.clip(self.gain * (np.asarray(target) - pos), -MAX_POS, MAX_POS)
        dyaw = 0.0 if yaw_target is None else float(np.clip(_yaw_error(yaw_target, yaw), -MAX_ROT, MAX_ROT))
        return np.array([*d, 0.0, 0.0, dyaw, grip], np.float32)

    def _near(self, target: np.ndarray, tol: float) -> bool:
        return bool(np.linalg.norm(self.env.tcp_pose()[0] - np.asarray(target)) < tol)

    def act(self, obs: Any) -> np.ndarray:
        """The next action for the env's task."""
        task = self.env.task
        if task in ("PushCube-v1", "PullCube-v1"):
            return self._slide(+1.0 if task == "PushCube-v1" else -1.0)
        obj = "cube" if task == "PickCube-v1" else "cubeA"
        return self._pick_place(obj)

    def _pick_place(self, obj: str) -> np.ndarray:
        p, yaw = self.env.actor_pose(obj)
        if self.env.task == "PickCube-v1":
            goal = self.env.actor_pose("goal_site")[0]
        else:  # on top of the other cube, released a few millimetres above contact
            goal = self.env.actor_pose("cubeB")[0] + np.array([0.0, 0.0, 0.045])
        if self.phase == "approach":
            above = p + np.array([0, 0, HOVER])
            if self._near(above, 0.01) and abs(_yaw_error(yaw, self.env.tcp_pose()[1])) < 0.05:
                self.phase = "descend"
            return self._move(above, -1.0, yaw)
        if self.phase == "descend":
            if self._near(p, 0.006):
                self.phase, self.timer = "close", 0
            return self._move(p, -1.0, yaw)
        if self.phase == "close":
            self.timer += 1
            if self.timer >= CLOSE_STEPS:
                self.phase, self.lift_to = "lift", np.array([*p[:2], p[2] + LIFT])
            return self._move(p, 1.0)
        if self.phase == "lift":
            if self._near(self.lift_to, 0.015):
                self.phase = "carry"
            return self._move(self.lift_to, 1.0)
        if self.env.task == "PickCube-v1":  # carry to the goal and hold still there (success needs a still robot)
            return self._move(goal, 1.0)
        if self.phase == "carry":  # above the other cube first, then straight down onto it
            above = goal + np.array([0.0, 0.0, 0.04])
            if self._near(above, 0.008):
                self.phase = "place"
            return self._move(above, 1.0, self.env.actor_pose("cubeB")[1])
        if self.phase == "place":
            if self._near(goal, 0.005):
                self.phase, self.timer = "release", 0
            return self._move(goal, 1.0)
        # release (stacking): open and stay still so the cube settles
        self.timer += 1
        if self.timer > 3:
            return self._move(self.env.tcp_pose()[0] + np.array([0, 0, 0.02]), -1.0)
        return np.array([0, 0, 0, 0, 0, 0, -1.0], np.float32)

    def _slide(self, direction: float) -> np.ndarray:
        p, _ = self.env.actor_pose("obj")
        goal = self.env.actor_pose("goal_region")[0]
        half = 0.02
        behind = p + np.array([-direction * (half + 0.025), 0.0, 0.0])
        if self.phase == "approach":
            target = np.array([behind[0], behind[1], p[2] + HOVER])
            if self._near(target, 0.01):
                self.phase = "descend"
            return self._move(target, 1.0, 0.0)
        if self.phase == "descend":
            target = np.array([behind[0], behind[1], p[2]])
            if self._near(target, 0.008):
                self.phase = "slide"
            return self._move(target, 1.0, 0.0)
        # slide: keep the fingers just behind the cube's centre line and drive it along x to the target
        target = np.array([goal[0] - direction * (half + 0.02), p[1], p[2]])
        return self._move(target, 1.0, 0.0)


def grasp_height(height: float) -> float:
    """Where the fingers close on an upright object of ``height``: 3.5 cm below its top (so the hand stays clear of
    a tall one), never below its middle."""
    return max(height - 0.035, height / 2)


class PersonalizedPickExpert(ManiSkillExpert):
    """Picks *my* object of ``personalized_maniskill`` (privileged: it reads which object is mine).

    Hover above it → turn the fingers across a box's narrow side (round bodies: keep the yaw) → descend to
    :func:`grasp_height` → close → lift 10 cm and hold.
    """

    def target(self, obs: Any) -> dict[str, Any]:
        """My object: ``position`` (xy on the table), ``height``, ``yaw`` and ``category`` (here: the simulator's)."""
        return self.env.privileged_state()["target"]

    def tcp(self, obs: Any) -> tuple[np.ndarray, float]:
        """The hand's position and yaw (here: the simulator's)."""
        return self.env.tcp_pose()

    def _near(self, target: np.ndarray, tol: float) -> bool:
        return bool(np.linalg.norm(self._hand[0] - np.asarray(target)) < tol)

    def _move(self, target: np.ndarray, grip: float, yaw_target: float | None = None) -> np.ndarray:
        d = np.clip(self.gain * (np.asarray(target) - self._hand[0]), -MAX_POS, MAX_POS)
        return np.array([*d, 0.0, 0.0, 0.0, grip], np.float32)

    def act(self, obs: Any) -> np.ndarray:
        """The next action."""
        self._hand = self.tcp(obs)
        target = self.target(obs)
        p = np.array([*target["position"][:2], grasp_height(target["height"])])
        pos, yaw = self._hand
        if target["category"] == "box" and target.get("yaw") is not None:  # fingers close along the hand's y
            yaw_goal = yaw + (target["yaw"] - yaw + math.pi / 2) % math.pi - math.pi / 2
        else:
            yaw_goal = None
        if self.phase == "approach":
            above = p + np.array([0, 0, HOVER + 0.02])
            turned = yaw_goal is None or abs(yaw_goal - yaw) < 0.05
            if self._near(above, 0.01) and turned:
                self.phase = "descend"
            return self._move_yaw(above, -1.0, yaw_goal)
        if self.phase == "descend":
            if self._near(p, 0.006):
                self.phase, self.timer = "close", 0
            return self._move_yaw(p, -1.0, yaw_goal)
        if self.phase == "close":
            self.timer += 1
            if self.timer >= CLOSE_STEPS:
                self.phase, self.lift_to = "lift", p + np.array([0.0, 0.0, 0.10])
            return self._move(p, 1.0)
        return self._move(self.lift_to, 1.0)

    def _move_yaw(self, target: np.ndarray, grip: float, yaw_goal: float | None) -> np.ndarray:
        action = self._move(target, grip)
        if yaw_goal is not None:
            action[5] = float(np.clip(yaw_goal - self._hand[1], -MAX_ROT, MAX_ROT))
        return action
