"""A privileged scripted expert for Personalized-VLABench: a top-down grasp of the target, then lift or place.

It reads ground truth through ``env.unwrapped.privileged_state()`` (an oracle: the ceiling and a demonstrator,
never an evaluated method) and emits VLABench's absolute TCP targets [x, y, z, roll, pitch, yaw, gripper]; each
waypoint is approached in steps of at most ``STEP`` metres so the hand never sweeps through the scene.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from envs.manipulation.vlabench.scene import TABLE_Z
from policies.base import policy_seed_rng

STEP = 0.05  # metres per control step toward the current waypoint
HOVER = 0.10  # approach height above the grasp point
TABLE_CLEARANCE = 0.012  # lowest TCP height above the table (the fingertips reach a little below the TCP)
SHELF_MARGIN = 0.08  # how far the held object's bottom is lifted above the shelf's panels
PRESS_DEPTH = 0.012  # TCP target below a resting button's top (the cap travels 10 mm)
YAW_STEP = 0.3  # radians per control step when the hand turns for the button task
PRESS_YAW = math.pi / 2  # the hand across the row of buttons
# Funnel mode (labelling states a learned policy reached): below the hover height, descend straight to the grasp
# point from within this share of the height left (at least DESCEND_RADIUS) instead of going back up; lower over
# the box or plate from within LOWER_RADIUS of its centre instead of centring at the carry height first.
FUNNEL_SLOPE = 0.3
DESCEND_RADIUS = 0.012
LOWER_RADIUS = 0.03


def _half_turn(angle: float) -> float:
    return (angle + math.pi / 2) % math.pi - math.pi / 2


class VLABenchExpert:
    """Phase machine: approach → descend → close → lift → (carry → lower → release → retreat | withdraw); for a
    button: approach (turn in place first) → press → release."""

    def __init__(self, env: Any, seed: int = 0, noise_std: float = 0.0, funnel: bool = False) -> None:
        self.env = env.unwrapped
        self.noise_std = float(noise_std)
        # A phase machine only describes states it drove itself: funnel mode accepts the states another policy
        # reaches on the way down or over the fixture (DAgger labels) rather than backing up to a waypoint.
        self.funnel = bool(funnel)
        self.rng = policy_seed_rng(seed)
        self.reset("", {})

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Start over (phase ``approach``)."""
        if "policy_seed" in info:
            self.rng = policy_seed_rng(int(info["policy_seed"]))
        self.phase, self.counter, self.yaw, self.offset, self.turned, self.paused = "approach", 0, 0.0, 0.0, False, 0

    @staticmethod
    def grasp_yaw(target: dict[str, Any]) -> float:
        """TCP yaw whose fingers close across the object: on a box's faces, perpendicular to a mug's handle."""
        yaw = float(target["yaw"])
        if target["category"] == "box":  # the narrower pair of faces when the box is deep; else either pair
            across = yaw + math.pi / 2 if target["depth"] >= 1.0 else yaw
            return _half_turn(across)
        if target["category"] in ("mug", "book"):  # along the body's y axis: clear of the handle, across the book
            return _half_turn(yaw)
        return 0.0

    def state(self, obs: Any) -> dict[str, Any]:
        """What the phase machine reads: the simulator's ground truth (a perceiving controller overrides this)."""
        return self.env.privileged_state()

    def act(self, obs: Any) -> np.ndarray:
        """The next absolute TCP target."""
        ps = self.state(obs)
        if ps["goal"] == "press_button":
            return self._press(ps)
        t = ps["target"]
        tcp = np.asarray(ps["tcp"])
        tpos = np.asarray(t["position"])
        base_z = float(tpos[2])
        grasp_z = max(base_z + max(0.018, t["height"] - 0.035), base_z + TABLE_CLEARANCE)
        closed = False
        goal = tcp.copy()
        if self.phase == "approach":
            self.yaw = self.grasp_yaw(t)
            goal = np.array([tpos[0], tpos[1], grasp_z + HOVER])
            if np.linalg.norm(tcp[:2] - goal[:2]) < 0.004 and abs(tcp[2] - goal[2]) < 0.01:
                self.phase = "descend"
            elif self.funnel and tcp[2] < goal[2] - 0.01 and np.linalg.norm(tcp[:2] - goal[:2]) <= max(
                    DESCEND_RADIUS, FUNNEL_SLOPE * (tcp[2] - grasp_z)):
                self.phase = "descend"
        if self.phase == "descend":
            goal = np.array([tpos[0], tpos[1], grasp_z])
            if abs(tcp[2] - goal[2]) < 0.008 and np.linalg.norm(tcp[:2] - goal[:2]) < 0.012:
                self.phase, self.counter = "close", 0
            elif ps["goal"] == "from_shelf" and np.linalg.norm(tcp[:2] - goal[:2]) > 0.004 and self.paused < 4:
                # Far out over the shelf the hand lags behind the descent by up to a centimetre, enough for a
                # finger to land on a wide object's rim: hold the height until it is centred again (a few steps at
                # most: at the edge of the reach a few millimetres of error remain for good).
                goal[2], self.paused = tcp[2], self.paused + 1
        if self.phase == "close":
            closed, goal = True, np.array([tpos[0], tpos[1], grasp_z])
            self.counter += 1
            if self.counter >= 4:
                self.phase, self.offset = "lift", float(tcp[2] - base_z)
        if self.phase == "lift" and ps["goal"] == "from_shelf":
            # Up until the object's bottom clears the shelf's panels, then out toward the robot.
            closed, fx = True, ps["fixture"]
            top = TABLE_Z + fx["board"] + fx["rim"]
            lift_z = top + SHELF_MARGIN + self.offset
            goal = np.array([tcp[0], tcp[1], lift_z])
            if tcp[2] > lift_z - 0.015:
                self.phase = "withdraw"
        elif self.phase == "lift":
            closed = True
            tallest = max(o["height"] for o in ps["objects"])
            lift_z = float(t["start"][2]) + self.offset + (0.14 if ps["goal"] == "pick" else max(0.12, tallest + 0.06))
            goal = np.array([tcp[0], tcp[1], lift_z])
            if ps["goal"] != "pick" and tcp[2] > lift_z - 0.015:
                self.phase, self.carry_z = "carry", lift_z
        if self.phase in ("carry", "lower"):
            closed = True
            spot = np.asarray(ps["fixture"]["xy"])
            floor = 0.008 if ps["fixture"]["kind"] == "plate" else 0.007
            if self.phase == "carry":
                goal = np.array([spot[0], spot[1], self.carry_z])
                if np.linalg.norm(tcp[:2] - spot) < (LOWER_RADIUS if self.funnel else 0.012):
                    self.phase = "lower"
            if self.phase == "lower":
                goal = np.array([spot[0], spot[1], TABLE_Z + floor + self.offset + 0.01])
                if abs(tcp[2] - goal[2]) < 0.01:
                    self.phase, self.counter = "release", 0
        if self.phase == "withdraw":
            closed, fx = True, ps["fixture"]
            goal = np.array([tcp[0], float(fx["xy"][1]) - fx["depth"] - 0.12, tcp[2]])
        if self.phase == "release":
            self.counter += 1
            goal = tcp + np.array([0.0, 0.0, 0.0 if self.counter < 4 else 0.05])
        delta = goal - tcp
        dist = float(np.linalg.norm(delta))
        step = STEP / 2 if self.phase == "descend" and ps["goal"] == "from_shelf" else STEP  # and go down slowly
        if dist > step:
            goal = tcp + delta * (step / dist)
        if self.noise_std > 0:
            goal = goal + self.rng.normal(0.0, self.noise_std, 3)
        return np.array([*goal, math.pi, 0.0, self.yaw, 1.0 if closed else -1.0], np.float32)

    def _press(self, ps: dict[str, Any]) -> np.ndarray:
        """Button task: closed fingers, hand turned across the row (its long side along x, clear of the objects
        behind the buttons), above my button at a height clear of every object, straight down, then up again."""
        tcp = np.asarray(ps["tcp"])
        button = ps["buttons"][0]
        xy = np.asarray(button["xy"])
        # Turn the hand a little per step: one big yaw change makes the joint-rate-limited IK swing the arm about.
        now = float(ps["command_rpy"][2])
        self.yaw = now + float(np.clip(PRESS_YAW - now, -YAW_STEP, YAW_STEP))
        safe_z = max(button["top"] + HOVER, TABLE_Z + max(o["height"] for o in ps["objects"]) + 0.06)
        if self.phase == "approach" and not self.turned:  # in place: turning while moving dips the arm
            goal = np.asarray(ps["command_pos"], float)
            self.turned = abs(self.yaw - PRESS_YAW) < 1e-6 and abs(float(ps["tcp_rpy"][2]) - PRESS_YAW) < 0.15
        elif self.phase == "approach":
            goal = np.array([xy[0], xy[1], safe_z])
            if np.linalg.norm(tcp[:2] - xy) < 0.004 and abs(tcp[2] - safe_z) < 0.01:
                self.phase = "press"
        if self.phase == "press":
            goal = np.array([xy[0], xy[1], button["top"] - PRESS_DEPTH])
            if button["pressed"]:
                self.phase, self.counter = "release", 0
        if self.phase == "release":
            self.counter += 1
            goal = np.array([xy[0], xy[1], safe_z])
        delta = goal - tcp
        dist = float(np.linalg.norm(delta))
        step = STEP if self.phase != "press" else STEP / 2  # slower on the way down: no slam into the cap
        if dist > step:
            goal = tcp + delta * (step / dist)
        if self.noise_std > 0:
            goal = goal + self.rng.normal(0.0, self.noise_std, 3)
        return np.array([*goal, math.pi, 0.0, self.yaw, 1.0], np.float32)

    def episode_info(self) -> dict[str, Any]:
        """The phase the expert ended in (diagnostic)."""
        return {"expert_phase": self.phase}
