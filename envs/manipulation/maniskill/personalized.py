"""``personalized_maniskill``: pick up *my* object among same-category look-alikes, in ManiSkill3 (SAPIEN 3, CPU).

The Personalized-SIMPLER selection setting moved onto ManiSkill3's Panda and table: an episode's category, personal
object, look-alikes (:func:`envs.manipulation.lookalikes.library_lookalikes`: at least one same-colour or
same-pattern hard negative) and clutter come from Embodia's object library exactly as in the PyBullet suite, and are
built with ManiSkill's actor builders from the library's meshes and textures (``personal_task.py``). The personal
object's reference images are rendered by SAPIEN (``references.py``). The instruction is the personalized suites'
("pick up my mug"); actions, ``ee_state`` and the gripper convention are the ``maniskill`` suite's
(:class:`~envs.manipulation.maniskill.env.ManiSkillEnv`). The final ``info`` carries ``success`` (my object grasped
and lifted 5 cm), ``correct_object`` (my object handled and no other moved) and ``wrong_object``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from envs.config import Options, option
from envs.errors import ConfigError, choice_error
from envs.manipulation.env import MOVED
from envs.manipulation.lookalikes import library_lookalikes
from envs.manipulation.maniskill import driver
from envs.manipulation.maniskill.env import ManiSkillEnv, _numpy, adapter_spaces, yaw_of
from envs.manipulation.objects import CATEGORIES, LIBRARY, SPLITS, ObjectInstance, instances, make_texture
from envs.manipulation.tasks import TaskSpec, instruction
from envs.registration import merged_options

TASKS: dict[str, TaskSpec] = {
    "pick_my": TaskSpec("pick_my", "panda", "pick", True,
                        "ManiSkill3 Panda: pick up my <object> among look-alikes (grasped, lifted 5 cm)"),
}
SPAWN_LOW, SPAWN_HIGH = (-0.12, -0.17), (0.08, 0.17)  # table xy (metres) the objects stand in, in the camera's view
GAP = 0.035  # metres between two objects' footprints (as the PyBullet suite)
TOUCH_LIFT = 0.02  # metres: my object raised this much counts as handled
WRONG_LIFT = 0.03  # metres: another object raised this much is a wrong-object episode


@dataclass(frozen=True)
class PersonalizedManiSkillOptions(Options):
    """``--env-option`` keys of ``personalized_maniskill`` (also ``gym.make`` keyword options)."""

    title = "personalized_maniskill env"
    image_size: int = option(224, "side of the square camera image (pixels)", min=32, max=512)
    max_steps: int = option(80, "control steps (20 Hz) before truncation", min=1, max=1000)
    num_distractors: int | None = option(None, "same-category look-alikes; default: 2-4 from the seed")
    num_clutter: int = option(1, "objects of other categories", min=0, max=2)
    personal_category: str | None = option(None, "fixes the category of every episode")
    personal_object: str | None = option(None, "fixes the personal library instance (e.g. 'mug_12')")
    split: str = option("test", "library split the objects come from")
    reference_count: int = option(4, "reference images of the personal object", min=3, max=5)

    def check(self) -> None:
        """Names and ranges beyond the fields' own."""
        if self.num_distractors is not None and not 0 <= self.num_distractors <= 4:
            raise ConfigError(f"num_distractors must be in [0, 4], got {self.num_distractors}")
        if self.personal_category is not None and self.personal_category not in CATEGORIES:
            raise choice_error("personal_category", self.personal_category, CATEGORIES)
        if self.personal_object is not None and self.personal_object not in LIBRARY:
            raise choice_error("personal_object", self.personal_object, sorted(LIBRARY))
        if self.split not in SPLITS:
            raise choice_error("split", self.split, SPLITS)


def footprint(inst: ObjectInstance) -> float:
    """Radius (metres) an object needs on the table: a mug's handle and a box's corners stick out."""
    return inst.radius + (0.028 if inst.category == "mug" else 0.0) + (0.012 if inst.category == "box" else 0.0)


def layout(rng: np.random.Generator, radii: list[float]) -> list[np.ndarray] | None:
    """Non-overlapping xy positions in the spawn area for footprints ``radii`` (None when they do not fit)."""
    lo, hi = np.array(SPAWN_LOW), np.array(SPAWN_HIGH)
    placed: list[tuple[np.ndarray, float]] = []
    for r in radii:
        for _ in range(300):
            xy = rng.uniform(lo + r * 0.5, hi - r * 0.5)
            if all(np.linalg.norm(xy - q) >= r + rq + GAP for q, rq in placed):
                placed.append((xy, r))
                break
        else:
            return None
    return [xy for xy, _ in placed]


class PersonalizedManiSkillEnv(ManiSkillEnv):
    """One personalized ManiSkill3 task (``reset(seed=s)`` fixes objects, layout, references and outcome)."""

    def __init__(self, task: str = "pick_my", options: Mapping[str, Any] | None = None,
                 render_mode: str | None = "rgb_array", **kwargs: Any) -> None:
        if task not in TASKS:
            raise choice_error("personalized_maniskill task", task, sorted(TASKS))
        self.config = cfg = PersonalizedManiSkillOptions.from_options(merged_options(options, kwargs))
        fixed = LIBRARY[cfg.personal_object].category if cfg.personal_object else None
        if fixed is not None and cfg.personal_category not in (None, fixed):
            raise ConfigError(f"personal_object {cfg.personal_object!r} is not a {cfg.personal_category}")
        driver.activate()
        try:
            import mani_skill.envs  # noqa: F401  (ManiSkill's own tasks and its registry)

            from envs.manipulation.maniskill import personal_task
        except ImportError as exc:
            raise ConfigError(f"personalized_maniskill needs the mani-skill package ({exc.name} is missing): "
                              "run `make setup`") from exc
        logging.getLogger("mani_skill").setLevel(logging.ERROR)
        self._task_module = personal_task
        self.task, self.task_name, self.render_mode = TASKS[task], task, render_mode
        n = cfg.image_size
        # depth and segmentation come with every frame: VAP's RGB-D grounding and the oracle read them (never obs)
        self._env = gym.make(personal_task.MS_ID, obs_mode="rgb+depth+segmentation", control_mode="pd_ee_delta_pose",
                             num_envs=1, sim_backend="physx_cpu", render_backend="sapien_cpu",
                             render_mode="rgb_array", image_size=n, max_episode_steps=cfg.max_steps)
        self.unwrapped_ms = self._env.unwrapped
        self.observation_space, self.action_space = adapter_spaces(n)
        self._closed = False
        self._used = True  # every reset rebuilds the scene: each episode holds other meshes
        self._last_image: np.ndarray | None = None
        self._last_sensors: dict[str, np.ndarray] = {}
        self._references: dict[str, list[np.ndarray]] = {}
        self._instruction = ""
        self._start: list[np.ndarray] = []
        self._flags: dict[str, bool] = {}
        self.personal_body_id = -1
        self.target_instance: ObjectInstance | None = None

    # ------------------------------------------------------------------ episode construction
    def _choose(self, rng: np.random.Generator) -> list[Any]:
        """The episode's objects (target first), as in the PyBullet suite: category, target, look-alikes, clutter."""
        cfg = self.config
        if cfg.personal_object is not None:
            category = LIBRARY[cfg.personal_object].category
        else:
            category = cfg.personal_category or str(rng.choice(CATEGORIES))
        pool = instances(category, cfg.split)
        target = LIBRARY[cfg.personal_object] if cfg.personal_object else pool[int(rng.integers(len(pool)))]
        others = [i for i in pool if i.instance_id != target.instance_id]
        k = int(rng.integers(2, 5)) if cfg.num_distractors is None else cfg.num_distractors
        distractors = library_lookalikes(target, others, k, rng)
        other_cats = [c for c in CATEGORIES if c != category]
        clutter = []
        for _ in range(cfg.num_clutter):
            cands = instances(other_cats[int(rng.integers(len(other_cats)))], cfg.split)
            clutter.append(cands[int(rng.integers(len(cands)))])
        objs = [target, *distractors, *clutter]
        positions = layout(rng, [footprint(i) for i in objs])
        while positions is None:  # drop clutter, then distractors (keeping one), until the layout fits
            objs = objs[:-1]
            if len(objs) < 2:
                raise RuntimeError("cannot lay out the episode")  # cannot happen with the library's sizes
            positions = layout(rng, [footprint(i) for i in objs])
        placed = []
        for k, (inst, xy) in enumerate(zip(objs, positions, strict=True)):
            role = "target" if k == 0 else ("distractor" if inst.category == category else "clutter")
            placed.append(self._task_module.PlacedObject(inst, make_texture(inst), (float(xy[0]), float(xy[1])),
                                                         float(rng.uniform(-math.pi, math.pi)), role))
        return placed

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Build a new episode; the same ``seed`` gives the same objects, layout, images and outcome."""
        gym.Env.reset(self, seed=seed)
        placed = self._choose(self.np_random)
        ms_seed = int(self.np_random.integers(2**31 - 1))  # the robot's start pose noise, from the same seed
        raw, _ = self._env.reset(seed=ms_seed, options={"reconfigure": True, "episode": placed})
        self._closed = False
        target = placed[0].instance
        self.target_instance = target
        self.personal_body_id = int(_numpy(self.unwrapped_ms.objects[0].per_scene_id))
        self._instruction = instruction(self.task.kind, f"my {target.category}")
        self._start = [p for p, _ in self.object_poses()]
        self._flags = {"success": False, "correct_object": False, "wrong_object": False, "target_touched": False}
        info = {
            "task": self.task_name,
            "category": target.category,
            "personal_object": target.instance_id,
            "instruction": self._instruction,
            "reference_images": self._reference_images(target, placed[0].texture),
            "distractors": [p.instance.instance_id for p in placed[1:] if p.role == "distractor"],
        }
        return self._observe(raw), info

    def _reference_images(self, target: ObjectInstance, texture: np.ndarray) -> list[np.ndarray]:
        from envs.manipulation.maniskill.references import render_references

        key = f"{target.instance_id}/{self.config.image_size}/{self.config.reference_count}"
        if key not in self._references:
            self._references[key] = render_references(target, texture, self.config.image_size,
                                                      self.config.reference_count)
        return [im.copy() for im in self._references[key]]

    # ------------------------------------------------------------------ state
    def object_poses(self) -> list[tuple[np.ndarray, float]]:
        """World position (metres) and yaw of every object of the episode, target first."""
        return [(_numpy(a.pose.p).astype(float), yaw_of(_numpy(a.pose.q))) for a in self.unwrapped_ms.objects]

    def privileged_state(self) -> dict[str, Any]:
        """Simulator ground truth for the scripted expert, oracles and metrics — never for evaluated policies.

        ``objects``: per object (target first) its ``role``, ``instance_id``, ``category``, ``position``, ``start``,
        ``yaw``, ``radius``, ``height``, ``depth`` (a box's y/x ratio) and segmentation ``id``; ``flags``: metrics.
        """
        out = []
        for (pos, yaw), start, obj, actor in zip(self.object_poses(), self._start, self.unwrapped_ms.episode_objects,
                                                 self.unwrapped_ms.objects, strict=True):
            inst = obj.instance
            out.append({"role": obj.role, "instance_id": inst.instance_id, "category": inst.category,
                        "position": pos, "start": start, "yaw": yaw, "radius": inst.radius, "height": inst.height,
                        "depth": float(inst.shape.get("depth", 1.0)), "id": int(_numpy(actor.per_scene_id))})
        return {"objects": out, "target": out[0], "flags": dict(self._flags)}

    def sensors(self) -> dict[str, np.ndarray]:
        """The last frame's depth (metres along the view axis) and segmentation (per-scene ids) — privileged."""
        return {k: v.copy() for k, v in self._last_sensors.items()}

    def other_object_ids(self) -> list[int]:
        """Segmentation ids of every object but mine (the oracle prompt's colour choice)."""
        return [int(_numpy(a.per_scene_id)) for a in self.unwrapped_ms.objects[1:]]

    def camera_pose(self) -> tuple[np.ndarray, np.ndarray, float]:
        """The camera's calibration: position, camera→world rotation (looking along −z, y up) and fovy (degrees)."""
        t = self._task_module
        eye, target = np.array(t.CAMERA_EYE, float), np.array(t.CAMERA_TARGET, float)
        forward = (target - eye) / np.linalg.norm(target - eye)
        right = np.cross(forward, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        up = np.cross(right, forward)
        return eye, np.stack([right, up, -forward], axis=1), self.camera_fovy_deg()

    def camera_fovy_deg(self) -> float:
        """Vertical field of view of the camera (degrees)."""
        return math.degrees(self._task_module.CAMERA_FOVY)

    def _observe(self, raw: dict[str, Any]) -> dict[str, Any]:
        cam = raw["sensor_data"]["base_camera"]
        image = _numpy(cam["rgb"]).astype(np.uint8)
        self._last_image = image
        self._last_sensors = {"depth": _numpy(cam["depth"])[..., 0].astype(np.float32) / 1000.0,
                              "segmentation": _numpy(cam["segmentation"])[..., 0].astype(np.int32)}
        pos, yaw = self.tcp_pose()
        ee = np.array([*pos, yaw, self.gripper_opening(), float(self._closed)], np.float32)
        return {"image": image, "instruction": self._instruction, "ee_state": ee}

    def _info(self, raw: dict[str, Any]) -> dict[str, Any]:
        """This step's metrics, from ManiSkill's ``success`` / ``is_grasped`` and the objects' displacements."""
        f = self._flags
        agent = self.unwrapped_ms.agent
        poses = self.object_poses()
        pos = poses[0][0]
        lifted = pos[2] - self._start[0][2]
        if bool(_numpy(raw["is_grasped"])) or np.linalg.norm(pos[:2] - self._start[0][:2]) > MOVED \
                or lifted > TOUCH_LIFT:
            f["target_touched"] = True
        for (p, _), start, actor in zip(poses[1:], self._start[1:], self.unwrapped_ms.objects[1:], strict=True):
            if f["wrong_object"]:
                break
            if np.linalg.norm(p[:2] - start[:2]) > MOVED or p[2] - start[2] > WRONG_LIFT \
                    or bool(_numpy(agent.is_grasping(actor))):
                f["wrong_object"] = True
        f["success"] = bool(_numpy(raw["success"]))
        f["correct_object"] = bool(f["target_touched"] and not f["wrong_object"])
        return {**f, "is_grasped": bool(_numpy(raw["is_grasped"])), "task": self.task_name}


def make_env(task: str, options: Mapping[str, Any] | None = None) -> PersonalizedManiSkillEnv:
    """Build one task's env (``task`` in ``TASKS``; options as in :class:`PersonalizedManiSkillOptions`)."""
    return PersonalizedManiSkillEnv(task, options)


def make_gym_env(task: str, options: Mapping[str, Any] | None = None, **kwargs: Any) -> PersonalizedManiSkillEnv:
    """``gym.make`` entry point: options as keywords or ``options={...}``."""
    return PersonalizedManiSkillEnv(task, merged_options(options, kwargs))
