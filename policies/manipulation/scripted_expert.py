"""A privileged scripted expert for Personalized-SIMPLER: top-down grasp of the target, then lift / move / place.

It reads ground truth through ``env.unwrapped.privileged_state()`` (so it is an oracle: the ceiling and the
demonstrator for behaviour cloning, never an evaluated method). Optional DART-style noise perturbs the *executed*
action while ``last_clean_action`` keeps the clean label for demonstrations.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from envs.config import Options, require
from envs.errors import ConfigError, choice_error
from policies.base import policy_seed_rng

MAX_POS, MAX_ROT = 0.03, 0.15  # the env's per-step clip (see envs.manipulation.scene)
SURFACE = {"plate": 0.008, "basket": 0.006, "": 0.0}
Descent = Literal["gated", "funnel", "coarse"]
DESCENTS: tuple[str, ...] = typing.get_args(Descent)
HOVER = 0.09  # approach height above the grasp point
LOST_STEPS = 2  # consecutive steps without both fingers on the object before a grasp counts as lost
HOLD_PHASES = ("lift", "carry", "lower")  # the phases in which the expert holds the object (a loss is noticed)


def _wrap_half_turn(angle: float) -> float:
    """Map an angle to [-π/2, π/2): the parallel gripper is symmetric under a half turn."""
    return (angle + math.pi / 2) % math.pi - math.pi / 2


@dataclass(frozen=True)
class ExpertOptions(Options):
    """``--policy-option`` keys of the scripted expert (the defaults of :class:`ScriptedExpert` too)."""

    title = "scripted expert"
    expert_noise: float = field(default=0.0, metadata={"help": "std of Gaussian noise on executed actions"})
    expert_descent: Descent = field(default="gated", metadata={"help": "approach before a grasp"})

    def check(self) -> None:
        require(0 <= self.expert_noise <= 1, f"expert_noise must be in [0, 1], got {self.expert_noise}")


class ScriptedExpert:
    """Phase machine: approach above the target → descend → close → lift → (carry → lower → release).

    With ``max_regrasps`` > 0, a grasp lost while lifting, carrying or lowering (the object slipped or was
    dropped) sends the expert back: open, rise straight up (no sweep through the object), approach again.
    """

    def __init__(self, env: Any, noise_std: float = ExpertOptions.expert_noise, seed: int = 0,
                 descent: str = ExpertOptions.expert_descent,
                 max_regrasps: int = 0) -> None:
        if descent not in DESCENTS:
            raise choice_error("expert descent", descent, DESCENTS)
        self.env = env.unwrapped
        self.noise_std = float(noise_std)
        # "gated": hover at HOVER until xy < 8 mm and the yaw is aligned, then descend. "funnel": the approach
        # height shrinks with the xy error (full height at ≥ 4.8 cm, grasp height at 8 mm), so how far to go down
        # is a smooth function of the offset a camera sees — easier to imitate than a hidden gate. "coarse": the
        # gate opens at 2.5 cm / 0.3 rad (a few pixels at the policy's input size) and xy and yaw keep being
        # corrected on the way down; it closes only once they are within 1 cm / 0.1 rad at grasp height.
        self.descent = descent
        if max_regrasps < 0:
            raise ConfigError(f"expert re-grasps must be >= 0, got {max_regrasps}")
        self.max_regrasps = int(max_regrasps)
        self.rng = policy_seed_rng(seed)
        self.last_clean_action = np.zeros(7, np.float32)
        self.reset("", {})

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Start a new episode (phase machine back to ``approach``)."""
        if "policy_seed" in info:
            self.rng = policy_seed_rng(int(info["policy_seed"]))
        self.phase = "approach"
        self.counter = 0
        self.grasp_offset = 0.0
        self.goal_yaw = 0.0
        self.lost_steps = 0
        self.regrasps = 0

    def _grasp_yaw(self, target: dict[str, Any]) -> float:
        yaw = float(target["yaw"])
        if target["category"] == "box":  # close on a pair of faces: the face normal nearest to yaw 0
            return (yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4
        if target["category"] == "mug":  # close perpendicular to the handle (handle along the body's x axis)
            return _wrap_half_turn(yaw)
        return 0.0

    def act(self, obs: Any) -> np.ndarray:
        """One 7-D action from the privileged state."""
        ps = self.env.privileged_state()
        t = ps["target"]
        ee, cmd = np.asarray(ps["ee_position"]), np.asarray(ps["ee_target"])
        tpos = np.asarray(t["position"])
        kind = ps["task_kind"]
        grasp_h = max(0.018, t["height"] - 0.03)  # grasp point above the object's base
        others = [o["height"] for o in ps["objects"][1:]] + [0.05]
        clear = max(others) + 0.03  # carry the object's base over everything else
        gripper = -1.0
        goal = cmd.copy()
        if self.phase in HOLD_PHASES:
            self.lost_steps = 0 if t["grasped"] else self.lost_steps + 1
            if self.lost_steps >= LOST_STEPS and self.regrasps < self.max_regrasps:
                self.phase, self.regrasps, self.lost_steps = "retreat", self.regrasps + 1, 0
        if self.phase == "retreat":  # gripper open; straight up to the approach height, then approach again
            goal = np.array([cmd[0], cmd[1], tpos[2] + grasp_h + HOVER])
            if abs(ee[2] - goal[2]) < 0.02:
                self.phase = "approach"
        if self.phase == "approach":
            self.goal_yaw = self._grasp_yaw(t)
            hover = HOVER
            if self.descent == "funnel":
                hover *= float(np.clip((np.linalg.norm(ee[:2] - tpos[:2]) - 0.008) / 0.04, 0.0, 1.0))
            goal = np.array([tpos[0], tpos[1], tpos[2] + grasp_h + hover])
            gate_xy, gate_yaw = (0.025, 0.3) if self.descent == "coarse" else (0.008, 0.06)
            if np.linalg.norm(ee[:2] - goal[:2]) < gate_xy and abs(ee[2] - goal[2]) < 0.03 and \
                    abs(_wrap_half_turn(ps["ee_yaw"] - self.goal_yaw)) < gate_yaw:
                self.phase = "descend"
        if self.phase == "descend":
            goal = np.array([tpos[0], tpos[1], tpos[2] + grasp_h])
            aligned = self.descent != "coarse" or (
                np.linalg.norm(ee[:2] - goal[:2]) < 0.01 and abs(_wrap_half_turn(ps["ee_yaw"] - self.goal_yaw)) < 0.1)
            if abs(ee[2] - goal[2]) < 0.008 and aligned:
                self.phase, self.counter = "close", 0
        if self.phase == "close":
            gripper = 1.0
            self.counter += 1
            if self.counter >= 3:
                self.phase = "lift"
                self.grasp_offset = float(ee[2] - tpos[2])
        if self.phase == "lift":
            gripper = 1.0
            lift_to = self.grasp_offset + (0.12 if kind == "pick" else clear)
            goal = np.array([cmd[0], cmd[1], lift_to])
            if kind != "pick" and ee[2] > lift_to - 0.015:
                self.phase = "carry"
        if self.phase in ("carry", "lower"):
            gripper = 1.0
            g = np.asarray(ps["goal_position"])
            if kind == "move_near":  # stop beside the anchor, on the side the object came from
                away = np.asarray(t["start"])[:2] - g[:2]
                away = away / max(np.linalg.norm(away), 1e-6)
                spot = g[:2] + away * (0.034 + t["radius"] + 0.012)
            else:
                spot = g[:2]
            surface = SURFACE.get(ps["receptacle"], 0.0)
            if self.phase == "carry":
                goal = np.array([spot[0], spot[1], self.grasp_offset + clear])
                if np.linalg.norm(ee[:2] - spot) < 0.01:
                    self.phase = "lower"
            if self.phase == "lower":
                goal = np.array([spot[0], spot[1], self.grasp_offset + surface + 0.006])
                if abs(ee[2] - goal[2]) < 0.008:
                    self.phase, self.counter = "release", 0
        if self.phase == "release":
            self.counter += 1
            gripper = -1.0
            goal = cmd + np.array([0.0, 0.0, 0.0 if self.counter < 3 else 0.02])
        action = np.zeros(7, np.float32)
        action[:3] = np.clip(goal - cmd, -MAX_POS, MAX_POS)
        action[5] = np.clip(_wrap_half_turn(self.goal_yaw - ps["ee_yaw"]), -MAX_ROT, MAX_ROT)
        action[6] = gripper
        self.last_clean_action = action.copy()
        if self.noise_std > 0:  # DART: perturb what is executed, keep the clean label
            action[:3] = np.clip(action[:3] + self.rng.normal(0.0, self.noise_std, 3), -MAX_POS, MAX_POS)
        return action

    def episode_info(self) -> dict[str, Any]:
        """The phase the expert ended in (diagnostic); with re-grasping on, how many it made."""
        info: dict[str, Any] = {"expert_phase": self.phase}
        if self.max_regrasps:
            info["expert_regrasps"] = self.regrasps
        return info
