"""``PersonalizedSimplerEnv``: SIMPLER-style tabletop tasks on *my* object among look-alikes (and generic twins).

One gymnasium env covers all eight tasks (four personalized, four generic); ``reset(seed=s)`` fixes the whole
episode (category, personal object, distractors, clutter, layout). See ``docs/personalized_simpler.md`` for the
observation / action / info API.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.config import Options, option
from envs.errors import ConfigError, choice_error
from envs.manipulation.lookalikes import library_lookalikes, user_lookalikes
from envs.manipulation.objects import (
    CATEGORIES,
    COLOURS,
    LIBRARY,
    SPLITS,
    ObjectInstance,
    category_mesh,
    instance_mesh_path,
    instances,
    load_user_image,
    make_texture,
    write_obj,
)
from envs.manipulation.personal import ROBOT_ELEVATION, PersonalObject, ReferenceSet, render_references
from envs.manipulation.scene import MAX_DELTA_POS, MAX_DELTA_ROT, TabletopScene
from envs.manipulation.tasks import GENERIC_TASKS, PERSONALIZED_TASKS, TaskSpec, describe, instruction
from envs.registration import merged_options

ALL_TASKS: dict[str, TaskSpec] = {**PERSONALIZED_TASKS, **GENERIC_TASKS}
INSTRUCTION_CHARSET = string.ascii_letters + string.digits + " '-,."
LIFT_SUCCESS = 0.05  # metres above the start height, while held
NEAR_SUCCESS = 0.10  # metres (xy) between the moved object and the anchor
MOVED = 0.05  # metres (xy) displacement that counts as "moved"
PLATE_RADIUS, BASKET_HALF = 0.075, 0.085
APPLE_RADIUS = 0.034
USER_DISTRACTORS = ("lookalikes", "library")


@dataclass(frozen=True)
class SimplerConfig(Options):
    """Env options (``make_env(task, options)``); unknown keys are a ConfigError."""

    title = "personalized_simpler env"

    image_size: int = option(224, "camera image side, pixels")
    split: str | None = option(None, "personalized: test (default); generic: train (default), test, train_extended")
    privileged: bool = option(False, "add depth (metres) and segmentation (body ids) to obs")
    num_distractors: int | None = option(None, "same-category look-alikes; default: 2-4 from the seed")
    num_clutter: int = option(1, "objects of other categories")
    personal_texture: str | None = option(None, "a user image wrapped on a ``personal_category`` mesh")
    personal_category: str | None = option(None, "fixes the category of every episode")
    personal_references: tuple[str, ...] | None = option(
        None, "with personal_texture: the user's own photos of the object (comma-separated image files), given as "
        "info['reference_images'] instead of renders")
    reference_views: int = option(16, "with personal_texture: extra reference renders of the user's object from "
                                  "the robot cameras' elevation, appended to info['reference_images'] (0: none)")
    user_distractors: str = option("lookalikes", "with personal_texture: 'lookalikes' (the photo recoloured, "
                                   "recropped, mirrored, another photo; same body) or 'library' (library objects)")
    personal_object: str | None = option(None, "fixes the personal/target library instance (e.g. 'mug_12')")
    max_steps: int = option(50, "control steps before truncation")
    references: bool | None = option(None, "render info['reference_images']; default: personalized tasks only")
    reference_count: int = option(4, "reference images of the personal object (3-5)")
    instruction_style: str = option("mixed", "generic tasks: 'mixed', 'colour' or 'colour_pattern'")
    render_mode: str | None = option("rgb_array", "gymnasium render mode")

    def check(self) -> None:
        """Ranges and names (types are checked by :meth:`Options.from_options`)."""
        cfg = self
        if not 32 <= int(cfg.image_size) <= 1024:
            raise ConfigError(f"image_size must be in [32, 1024], got {cfg.image_size}")
        if not 1 <= int(cfg.max_steps) <= 80:
            raise ConfigError(f"max_steps must be in [1, 80], got {cfg.max_steps}")
        if cfg.split not in (None, *SPLITS):
            raise choice_error("split", cfg.split, SPLITS)
        if cfg.personal_category is not None and cfg.personal_category not in CATEGORIES:
            raise choice_error("personal_category", cfg.personal_category, CATEGORIES)
        if cfg.personal_texture is not None and cfg.personal_category is None:
            raise ConfigError("personal_texture needs personal_category; valid: " + ", ".join(CATEGORIES))
        if cfg.personal_references is not None and cfg.personal_texture is None:
            raise ConfigError("personal_references needs personal_texture (the photos show the user's object)")
        if cfg.personal_references is not None and not cfg.personal_references:
            raise ConfigError("personal_references is empty; give one or more image files, comma-separated")
        if cfg.personal_object is not None and cfg.personal_object not in LIBRARY:
            raise choice_error("personal_object", cfg.personal_object, sorted(LIBRARY))
        if cfg.num_distractors is not None and not 0 <= int(cfg.num_distractors) <= 4:
            raise ConfigError(f"num_distractors must be in [0, 4], got {cfg.num_distractors}")
        if not 0 <= int(cfg.num_clutter) <= 3:
            raise ConfigError(f"num_clutter must be in [0, 3], got {cfg.num_clutter}")
        if cfg.instruction_style not in ("mixed", "colour", "colour_pattern"):
            raise choice_error("instruction_style", cfg.instruction_style, ("mixed", "colour", "colour_pattern"))
        if cfg.user_distractors not in USER_DISTRACTORS:
            raise choice_error("user_distractors", cfg.user_distractors, USER_DISTRACTORS)
        if not 0 <= int(cfg.reference_views) <= 16:
            raise ConfigError(f"reference_views must be in [0, 16], got {cfg.reference_views}")
        if not 3 <= int(cfg.reference_count) <= 5:
            raise ConfigError(f"reference_count must be in [3, 5], got {cfg.reference_count}")
        if cfg.render_mode not in (None, "rgb_array"):
            raise choice_error("render_mode", cfg.render_mode, ("rgb_array",))


@dataclass
class _Placed:
    """One object of the episode, as spawned."""

    body: int
    role: str  # "target", "distractor", "clutter", "anchor", "receptacle"
    instance_id: str
    category: str
    radius: float
    height: float
    yaw: float
    start: np.ndarray


class PersonalizedSimplerEnv(gym.Env):
    """A tabletop task on one target object among same-category distractors (see module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, task: str, options: Mapping[str, Any] | None = None) -> None:
        if task not in ALL_TASKS:
            raise choice_error("task", task, sorted(ALL_TASKS))
        self.task = ALL_TASKS[task]
        self.config = SimplerConfig.from_options(options)
        self.render_mode = self.config.render_mode
        cfg = self.config
        self._user_object = (PersonalObject.from_texture(cfg.personal_texture, cfg.personal_category)
                             if cfg.personal_texture else None)
        # Read (and checked) now, so a missing or unreadable photo is an error before any episode runs.
        self._user_photos = ([load_user_image(f, "personal_references", int(cfg.image_size))
                              for f in cfg.personal_references] if cfg.personal_references else None)
        if self._user_object is not None and not self.task.personalized:
            raise ConfigError(f"personal_texture only applies to personalized tasks, not {task!r}")
        fixed_cat = LIBRARY[cfg.personal_object].category if cfg.personal_object else None
        if fixed_cat is not None and cfg.personal_category not in (None, fixed_cat):
            raise ConfigError(f"personal_object {cfg.personal_object!r} is not a {cfg.personal_category}")
        self.split = cfg.split or ("test" if self.task.personalized else "train")
        n = int(cfg.image_size)
        obs = {
            "image": spaces.Box(0, 255, (n, n, 3), np.uint8),
            "instruction": spaces.Text(max_length=128, min_length=1, charset=INSTRUCTION_CHARSET),
            "ee_state": spaces.Box(-10.0, 10.0, (6,), np.float32),
        }
        if cfg.privileged:
            obs["depth"] = spaces.Box(0.0, 10.0, (n, n), np.float32)
            obs["segmentation"] = spaces.Box(-1, 2**24, (n, n), np.int32)
        self.observation_space = spaces.Dict(obs)
        hi = np.array([MAX_DELTA_POS] * 3 + [MAX_DELTA_ROT] * 3 + [1.0], np.float32)
        self.action_space = spaces.Box(-hi, hi, dtype=np.float32)
        self.scene = TabletopScene(self.task.embodiment, n)
        self._references: dict[str, ReferenceSet] = {}
        self._objects: list[_Placed] = []
        self._target: _Placed | None = None
        self._anchor: _Placed | None = None
        self._receptacle_kind = ""
        self._instruction = ""
        self._last_image: np.ndarray | None = None
        self._steps = 0
        self._flags: dict[str, bool] = {}
        self.personal_body_id = -1
        self.target_instance: ObjectInstance | None = None

    # ------------------------------------------------------------------ episode construction
    def _choose_objects(self, rng: np.random.Generator) -> tuple[ObjectInstance, np.ndarray, list[ObjectInstance],
                                                                  list[ObjectInstance], str, dict[str, np.ndarray]]:
        """Target, its texture, distractors, clutter, instruction style and the textures of made-up distractors
        (a user object's look-alikes; library objects use their own)."""
        cfg = self.config
        if self._user_object is not None:
            category = self._user_object.instance.category
        elif cfg.personal_object is not None:
            category = LIBRARY[cfg.personal_object].category
        else:
            category = cfg.personal_category or str(rng.choice(CATEGORIES))
        pool = instances(category, self.split)
        if self._user_object is not None:
            target, texture = self._user_object.instance, self._user_object.texture
        else:
            target = LIBRARY[cfg.personal_object] if cfg.personal_object else pool[int(rng.integers(len(pool)))]
            texture = make_texture(target)
        others = [i for i in pool if i.instance_id != target.instance_id]
        style = "personal"
        if not self.task.personalized:
            style = cfg.instruction_style if cfg.instruction_style != "mixed" else \
                ("colour" if rng.random() < 0.5 else "colour_pattern")
            if style == "colour":  # the colour alone must single the target out
                others = [i for i in others if i.colour != target.colour]
            else:
                others = [i for i in others if (i.colour, i.pattern) != (target.colour, target.pattern)]
        k = int(rng.integers(2, 5)) if cfg.num_distractors is None else int(cfg.num_distractors)
        made: dict[str, np.ndarray] = {}
        distractors: list[ObjectInstance] = []
        if self._user_object is not None and cfg.user_distractors == "lookalikes":
            # A user's photo has no colour or pattern name to pair on: its hard negatives are made from the photo
            # (envs/manipulation/lookalikes.py), each on the user's own body.
            pairs = user_lookalikes(target, texture, k, rng)
            made = {inst.instance_id: tex for inst, tex in pairs}
            distractors = [inst for inst, _ in pairs]
        else:
            distractors = library_lookalikes(target, others, k, rng)
        other_cats = [c for c in CATEGORIES if c != category]
        clutter = []
        for _ in range(int(cfg.num_clutter)):
            cands = instances(other_cats[int(rng.integers(len(other_cats)))], self.split)
            clutter.append(cands[int(rng.integers(len(cands)))])
        return target, texture, distractors, clutter, style, made

    def _layout(self, rng: np.random.Generator, radii: list[float], fixed: float | None) -> list[np.ndarray] | None:
        """Non-overlapping xy positions (first = target; ``fixed`` = footprint of an anchor/receptacle placed first)."""
        e = self.scene.embodiment
        lo, hi = np.array(e.spawn_low), np.array(e.spawn_high)
        placed: list[tuple[np.ndarray, float]] = []
        out: list[np.ndarray] = []
        if fixed is not None:  # the anchor / receptacle goes first, a little inside the spawn area
            placed.append((rng.uniform(lo + fixed * 0.6, hi - fixed * 0.6), fixed))
        for idx, r in enumerate(radii):
            for _ in range(300):
                xy = rng.uniform(lo, hi)
                ok = all(np.linalg.norm(xy - q) >= r + rq + 0.035 for q, rq in placed)
                if ok and idx == 0 and fixed is not None:  # the target starts well away from the goal
                    ok = np.linalg.norm(xy - placed[0][0]) >= fixed + 0.10
                if ok:
                    placed.append((xy, r))
                    out.append(xy)
                    break
            else:
                return None
        return ([placed[0][0]] if fixed is not None else []) + out

    def _footprint(self, inst: ObjectInstance) -> float:
        return inst.radius + (0.028 if inst.category == "mug" else 0.0) + (0.012 if inst.category == "box" else 0.0)

    def _spawn(self, inst: ObjectInstance, texture: np.ndarray, xy: np.ndarray, yaw: float, role: str) -> _Placed:
        depth = inst.shape.get("depth", 1.0)
        collision = ("box", (inst.radius, inst.radius * depth)) if inst.category == "box" else \
            ("cylinder", (inst.radius,))
        body = self.scene.add_body(instance_mesh_path(inst), texture, None, collision, inst.mass,
                                   (float(xy[0]), float(xy[1]), 0.0), yaw, inst.height)
        return _Placed(body, role, inst.instance_id, inst.category, inst.radius, inst.height, yaw,
                       np.array([xy[0], xy[1], 0.0]))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Build a new episode; the same ``seed`` gives the same objects, layout, images and outcome."""
        super().reset(seed=seed)
        rng = self.np_random
        sc = self.scene
        sc.build()
        target, texture, distractors, clutter, style, made = self._choose_objects(rng)
        fixed = None
        if self.task.kind == "move_near":
            fixed = APPLE_RADIUS
        elif self.task.kind == "put_on":
            self._receptacle_kind = "plate" if rng.random() < 0.5 else "basket"
            fixed = PLATE_RADIUS if self._receptacle_kind == "plate" else BASKET_HALF * 1.2
        objs = [target] + distractors + clutter
        positions = None
        while positions is None:  # drop clutter, then distractors (keeping ≥ 1), until the layout fits
            positions = self._layout(rng, [self._footprint(i) for i in objs], fixed)
            if positions is None:
                objs = objs[:-1]
                if len(objs) < 2:
                    raise RuntimeError("cannot lay out the episode")  # cannot happen with the library's sizes
        self._objects = []
        self._anchor = None
        if fixed is not None:
            xy = positions.pop(0)
            if self.task.kind == "move_near":
                path = write_obj(category_mesh("apple", APPLE_RADIUS, 0.0, {}), f"v2/apple/{APPLE_RADIUS}")
                body = sc.add_body(path, None, (0.78, 0.08, 0.06, 1.0), ("sphere", (APPLE_RADIUS,)), 0.0,
                                   (float(xy[0]), float(xy[1]), 0.0), 0.0, 2 * APPLE_RADIUS)
                self._anchor = _Placed(body, "anchor", "apple", "apple", APPLE_RADIUS, 2 * APPLE_RADIUS, 0.0,
                                       np.array([xy[0], xy[1], 0.0]))
            elif self._receptacle_kind == "plate":
                path = write_obj(category_mesh("plate", PLATE_RADIUS + 0.012, 0.018, {}), "v2/plate")
                body = sc.add_body(path, None, (0.93, 0.93, 0.90, 1.0), ("cylinder", (PLATE_RADIUS + 0.012,)), 0.0,
                                   (float(xy[0]), float(xy[1]), 0.0), 0.0, 0.008)
                self._anchor = _Placed(body, "receptacle", "plate", "plate", PLATE_RADIUS, 0.008, 0.0,
                                       np.array([xy[0], xy[1], 0.0]))
            else:
                body = sc.add_basket((float(xy[0]), float(xy[1]), 0.0), BASKET_HALF)
                self._anchor = _Placed(body, "receptacle", "basket", "basket", BASKET_HALF, 0.035, 0.0,
                                       np.array([xy[0], xy[1], 0.0]))
        for k, (inst, xy) in enumerate(zip(objs, positions, strict=True)):
            yaw = float(rng.uniform(-math.pi, math.pi))
            tex = texture if k == 0 else made.get(inst.instance_id)
            if tex is None:
                tex = make_texture(inst)
            role = "target" if k == 0 else ("distractor" if inst.category == target.category else "clutter")
            self._objects.append(self._spawn(inst, tex, xy, yaw, role))
        sc.settle()
        for o in self._objects:
            o.start = sc.pose(o.body)[0]
        self._target = self._objects[0]
        self.personal_body_id = self._target.body
        self.target_instance = target
        if self.task.personalized:
            subject = f"my {target.category}"
        else:
            subject = "the " + describe(target, with_pattern=(style == "colour_pattern"))
        self._instruction = instruction(self.task.kind, subject, self._receptacle_kind or "plate")
        self._steps = 0
        self._flags = {"success": False, "correct_object": False, "wrong_object": False, "target_touched": False}
        info: dict[str, Any] = {
            "task": self.task.name,
            "category": target.category,
            "personal_object": target.instance_id,
            "instruction": self._instruction,
            "reference_images": self._reference_images(target, texture),
            "distractors": [i.instance_id for i in objs[1:] if i.category == target.category],
        }
        if not self.task.personalized:
            info["target_attributes"] = {"colour": target.colour, "pattern": target.pattern,
                                         "category": target.category}
            info["instruction_style"] = style
        if self._receptacle_kind:
            info["receptacle"] = self._receptacle_kind
        return self._observation(), info

    def _reference_images(self, target: ObjectInstance, texture: np.ndarray) -> list[np.ndarray]:
        want = self.config.references if self.config.references is not None else self.task.personalized
        if not want:
            return []
        cfg = self.config
        key = f"{target.instance_id}/{cfg.image_size}/{cfg.reference_count}"
        user = self._user_object
        if key not in self._references:
            if self._user_photos is not None:  # the user's own photos of the object replace the phone-like renders
                images = list(self._user_photos)
            else:
                obj = user if user is not None else PersonalObject(target, texture)
                images = render_references(obj, int(cfg.image_size), cfg.reference_count).images
            if user is not None and cfg.reference_views:
                # A photo print's look-alikes (its mirror, another crop of it) differ only in where the print's
                # colours sit, which the matcher can compare only from a similar viewpoint: add renders from the
                # tabletop cameras' elevation, all around the object, after the phone-like ones.
                images += render_references(user, int(cfg.image_size), int(cfg.reference_views), ROBOT_ELEVATION,
                                            salt="robot-views").images
            self._references[key] = ReferenceSet(target.instance_id, images, [])
        return [im.copy() for im in self._references[key].images]

    # ------------------------------------------------------------------ stepping
    def step(self, action):
        """Apply a 7-D action for one 10 Hz control step; terminate on success, truncate at ``max_steps``."""
        if self._target is None:
            raise RuntimeError("call reset() before step()")
        self.scene.apply_action(np.asarray(action, np.float32))
        self._steps += 1
        self._update_metrics()
        terminated = self._flags["success"]
        truncated = (not terminated) and self._steps >= int(self.config.max_steps)
        reward = 1.0 if terminated else 0.0
        info = {**self._flags, "steps": self._steps, "task": self.task.name}
        return self._observation(), reward, terminated, truncated, info

    def _update_metrics(self) -> None:
        sc, t, f = self.scene, self._target, self._flags
        pos, orn = sc.pose(t.body)
        held = sc.grasped(t.body)
        disp = float(np.linalg.norm(pos[:2] - t.start[:2]))
        if held or disp > MOVED or pos[2] - t.start[2] > 0.02:
            f["target_touched"] = True
        for o in self._objects[1:]:
            if f["wrong_object"]:
                break
            opos, _ = sc.pose(o.body)
            if (np.linalg.norm(opos[:2] - o.start[:2]) > MOVED or opos[2] - o.start[2] > 0.03
                    or sc.grasped(o.body)):
                f["wrong_object"] = True
        upright = self._upright(orn)
        kind = self.task.kind
        if kind == "pick":
            ok = held and pos[2] - t.start[2] >= LIFT_SUCCESS
        elif kind == "move_near":
            a = self._anchor.start
            ok = (not sc.touching(t.body) and upright and disp >= MOVED and pos[2] - t.start[2] < 0.01
                  and float(np.linalg.norm(pos[:2] - a[:2])) <= NEAR_SUCCESS)
        else:
            a = self._anchor.start
            d = pos[:2] - a[:2]
            if self._receptacle_kind == "plate":
                inside = float(np.linalg.norm(d)) <= PLATE_RADIUS and 0.004 < pos[2] < 0.03
            else:
                inside = bool(np.all(np.abs(d) <= BASKET_HALF - 0.01)) and 0.002 < pos[2] < 0.03
            ok = inside and upright and not sc.touching(t.body)
        f["success"] = bool(ok)
        f["correct_object"] = bool(f["target_touched"] and not f["wrong_object"])

    @staticmethod
    def _upright(orn: np.ndarray) -> bool:
        x, y, z, w = orn
        up_z = 1.0 - 2.0 * (x * x + y * y)  # z component of the body's z axis
        return bool(up_z > 0.85)

    def _observation(self) -> dict[str, Any]:
        rgb, depth, seg = self.scene.render(segmentation=self.config.privileged)
        self._last_image = rgb
        obs: dict[str, Any] = {"image": rgb, "instruction": self._instruction, "ee_state": self.scene.ee_state()}
        if self.config.privileged:
            obs["depth"] = np.clip(depth, 0.0, 10.0)
            obs["segmentation"] = seg
        return obs

    def render(self):
        """The last main-camera frame (``rgb_array``)."""
        return None if self._last_image is None else self._last_image.copy()

    def close(self) -> None:
        """Release the physics client."""
        self.scene.close()

    # ------------------------------------------------------------------ privileged access (oracles, experts)
    def privileged_state(self) -> dict[str, Any]:
        """Simulator ground truth for oracles, scripted experts and metrics — never for evaluated policies.

        Keys: ``task_kind``, ``target_body_id``, ``target`` / ``objects`` (dicts with body, role, instance_id,
        category, position, yaw, radius, height, grasped), ``goal_position`` (anchor/receptacle xyz or None),
        ``receptacle``, ``ee_position``, ``ee_yaw``, ``gripper_opening``, ``gripper_closed``, ``ee_target``,
        ``body_roles`` (segmentation id → role), ``flags`` (current metrics).
        """
        sc = self.scene
        objs = []
        for o in self._objects:
            pos, orn = sc.pose(o.body)
            yaw = float(np.arctan2(2 * (orn[3] * orn[2] + orn[0] * orn[1]), 1 - 2 * (orn[1] ** 2 + orn[2] ** 2)))
            objs.append({"body": o.body, "role": o.role, "instance_id": o.instance_id, "category": o.category,
                         "position": pos, "start": o.start.copy(), "yaw": yaw, "radius": o.radius,
                         "height": o.height, "grasped": sc.grasped(o.body)})
        ee, ee_yaw = sc.ee_pose()
        roles = {o.body: o.role for o in self._objects}
        if self._anchor is not None:
            roles[self._anchor.body] = self._anchor.role
        roles[sc.robot] = "robot"
        roles[sc.table] = "table"
        return {
            "task_kind": self.task.kind,
            "target_body_id": self.personal_body_id,
            "target": objs[0] if objs else None,
            "objects": objs,
            "goal_position": None if self._anchor is None else self._anchor.start.copy(),
            "goal_height": 0.0 if self._anchor is None else self._anchor.height,
            "receptacle": self._receptacle_kind,
            "ee_position": ee,
            "ee_yaw": ee_yaw,
            "ee_target": sc.target_pos.copy(),
            "gripper_opening": sc.gripper_opening(),
            "gripper_closed": sc.gripper_closed,
            "body_roles": roles,
            "flags": dict(self._flags),
        }


def make_env(task: str, options: Mapping[str, Any] | None = None) -> PersonalizedSimplerEnv:
    """Build one task's env (``task`` in ``ALL_TASKS``; options as in :class:`SimplerConfig`)."""
    return PersonalizedSimplerEnv(task, options)


def make_gym_env(task: str, options: Mapping[str, Any] | None = None, **kwargs: Any) -> PersonalizedSimplerEnv:
    """``gym.make`` entry point: options as keywords or ``options={...}`` (:class:`SimplerConfig`)."""
    return PersonalizedSimplerEnv(task, merged_options(options, kwargs))


__all__ = ["ALL_TASKS", "COLOURS", "PersonalizedSimplerEnv", "SimplerConfig", "make_env", "make_gym_env"]
