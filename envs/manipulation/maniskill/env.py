"""ManiSkill3 tabletop tasks behind Embodia's manipulation interface (SAPIEN 3, CPU physics and rendering).

The adapter squeezes ManiSkill's batch dimension (one env), renders the task's own ``base_camera`` into
``obs["image"]``, adds ``ee_state`` (``[x, y, z, yaw, gripper_opening, gripper_closed_command]``, as the PyBullet
suite) and an ``instruction``, and takes the SIMPLER action convention: ``[dx, dy, dz, droll, dpitch, dyaw,
gripper]`` in metres and radians (axes of the robot's base, which is aligned with the world here), gripper > 0
closes. It maps that onto ManiSkill's ``pd_ee_delta_pose`` controller (±0.1 m and ±0.1 rad per step).

Only the built-in tasks whose assets ship inside the ``mani-skill`` wheel are offered (primitive shapes); the
SIMPLER Bridge ports and scene datasets need downloads that are not possible offline.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.config import Options, option
from envs.errors import ConfigError, choice_error
from envs.manipulation.maniskill import driver
from envs.registration import merged_options

# ManiSkill id -> instruction (the built-in tabletop tasks that need no download; same order as TASK_IDS)
TASKS: dict[str, str] = {
    "PickCube-v1": "pick up the red cube and move it to the green goal",
    "StackCube-v1": "stack the red cube on the green cube",
    "PushCube-v1": "push the blue cube onto the red and white target",
    "PullCube-v1": "pull the cube onto the red and white target",
}
POS_BOUND = 0.1  # metres per step: pd_ee_delta_pose's pos_lower/upper for the Panda
ROT_BOUND = 0.1  # radians per step
INSTRUCTION_CHARSET = "abcdefghijklmnopqrstuvwxyz ',-"


@dataclass(frozen=True)
class ManiSkillOptions(Options):
    """``--env-option`` keys of the ``maniskill`` suite (also ``gym.make`` keyword options)."""

    title = "maniskill env"
    image_size: int = option(128, "side of the square base-camera image (pixels)", min=16, max=512)
    max_steps: int = option(100, "control steps (20 Hz) before truncation", min=1, max=10_000)


def _numpy(x: Any) -> np.ndarray:
    """ManiSkill returns batched torch tensors: the first (only) env's values as numpy."""
    arr = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    return arr[0] if arr.ndim and arr.shape[0] == 1 else arr


def yaw_of(quat_wxyz: np.ndarray) -> float:
    """Heading of a pose's x axis in the world's xy plane (radians)."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    return math.atan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z))


def _rotation(quat_wxyz: np.ndarray) -> np.ndarray:
    """3×3 rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def adapter_spaces(image_size: int) -> tuple[spaces.Dict, spaces.Box]:
    """The observation and action spaces every ManiSkill3 adapter exposes: Embodia's observation dict at
    ``image_size``² and SIMPLER's 7-D end-effector delta (position, rotation, gripper)."""
    n = int(image_size)
    observation = spaces.Dict({
        "image": spaces.Box(0, 255, (n, n, 3), np.uint8),
        "instruction": spaces.Text(max_length=128, min_length=1, charset=INSTRUCTION_CHARSET),
        "ee_state": spaces.Box(-10.0, 10.0, (6,), np.float32),
    })
    hi = np.array([POS_BOUND] * 3 + [ROT_BOUND] * 3 + [1.0], np.float32)
    return observation, spaces.Box(-hi, hi, dtype=np.float32)


class ManiSkillEnv(gym.Env):
    """One ManiSkill3 tabletop task as an Embodia manipulation env (``reset(seed=s)`` fixes the episode)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, task: str = "PickCube-v1", options: Mapping[str, Any] | None = None,
                 render_mode: str | None = "rgb_array", **kwargs: Any) -> None:
        if task not in TASKS:
            raise choice_error("maniskill task", task, sorted(TASKS))
        self.config = ManiSkillOptions.from_options(merged_options(options, kwargs))
        driver.activate()
        try:
            import mani_skill.envs  # noqa: F401  (registers the ManiSkill ids)
        except ImportError as exc:
            raise ConfigError(f"the maniskill suite needs the mani-skill package ({exc.name} is missing): "
                              "run `make setup`") from exc
        # ManiSkill warns on every scene rebuild (missing initial poses, no CUDA render device): not actionable here
        logging.getLogger("mani_skill").setLevel(logging.ERROR)
        self.task, self.render_mode = task, render_mode
        n = self.config.image_size
        self._env = gym.make(task, obs_mode="rgb", control_mode="pd_ee_delta_pose", num_envs=1,
                             sim_backend="physx_cpu", render_backend="sapien_cpu", render_mode="rgb_array",
                             sensor_configs={"width": n, "height": n}, max_episode_steps=self.config.max_steps)
        self.unwrapped_ms = self._env.unwrapped
        self.observation_space, self.action_space = adapter_spaces(n)
        self._closed = False
        self._used = False  # the scene has run an episode since it was built
        self._last_image: np.ndarray | None = None

    # ------------------------------------------------------------------ state
    def tcp_pose(self) -> tuple[np.ndarray, float]:
        """The gripper's tool-centre point: world position (metres) and yaw (radians)."""
        pose = self.unwrapped_ms.agent.tcp.pose
        return _numpy(pose.p).astype(float), yaw_of(_numpy(pose.q))

    def gripper_opening(self) -> float:
        """Distance between the fingers (metres): the sum of the two finger joints."""
        return float(_numpy(self.unwrapped_ms.agent.robot.get_qpos())[-2:].sum())

    def actor_pose(self, name: str) -> tuple[np.ndarray, float]:
        """World position and yaw of one of the task's actors (``cube``, ``cubeA``, ``obj``, ``goal_site``...)."""
        pose = getattr(self.unwrapped_ms, name).pose
        return _numpy(pose.p).astype(float), yaw_of(_numpy(pose.q))

    def _observe(self, raw: dict[str, Any]) -> dict[str, Any]:
        image = _numpy(raw["sensor_data"]["base_camera"]["rgb"]).astype(np.uint8)
        self._last_image = image
        pos, yaw = self.tcp_pose()
        ee = np.array([*pos, yaw, self.gripper_opening(), float(self._closed)], np.float32)
        return {"image": image, "instruction": TASKS[self.task], "ee_state": ee}

    @staticmethod
    def _info(raw: dict[str, Any]) -> dict[str, Any]:
        return {k: bool(_numpy(v)) if np.size(_numpy(v)) == 1 else _numpy(v) for k, v in raw.items()
                if k in ("success", "is_grasped", "is_obj_placed", "is_cubeA_on_cubeB", "fail")}

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        # ManiSkill's own unseeded resets do not follow the last seed: an unseeded reset draws from ours instead
        ms_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        # PhysX keeps contact state across resets of one scene (a reused scene drifts by ~0.4 mm from a fresh one
        # after a grasp): rebuilding it (~1 s) makes an episode the same whichever episodes ran before it
        raw, info = self._env.reset(seed=ms_seed, options={"reconfigure": self._used})
        self._used = True
        self._closed = False
        return self._observe(raw), self._info(info)

    def step(self, action):
        a = np.asarray(action, np.float32).reshape(-1)
        if a.shape != (7,):
            raise ValueError(f"action must have 7 entries [dx, dy, dz, droll, dpitch, dyaw, gripper], got {a.shape}")
        self._closed = bool(a[6] > 0.0)
        # ManiSkill turns the gripper about its own axes; the convention's rotation is about the base's (world) axes
        rot_body = _rotation(_numpy(self.unwrapped_ms.agent.tcp.pose.q)).T @ a[3:6]
        ms = np.concatenate([np.clip(a[:3] / POS_BOUND, -1, 1), np.clip(rot_body / ROT_BOUND, -1, 1),
                             [-1.0 if self._closed else 1.0]]).astype(np.float32)  # ManiSkill: -1 closes
        raw, reward, terminated, truncated, info = self._env.step(ms[None])
        out = self._info(info)
        done = bool(out.get("success", False))
        return (self._observe(raw), float(_numpy(reward)), done or bool(_numpy(terminated)), bool(_numpy(truncated))
                and not done, out)

    def render(self):
        return self._last_image

    def close(self) -> None:
        self._env.close()
