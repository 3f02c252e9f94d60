"""``PersonalizedVLABenchEnv``: MuJoCo, four cameras, absolute end-effector actions, selection tasks on "my" object.

``reset(seed=s)`` fixes the whole episode (category, personal object, distractors, layout, room look, camera
jitter, instruction template); the 50 episodes of a track are the seeds ``launch.eval --seed 0 --episodes 50``
derives. Observation: ``images`` {left, right, front, wrist} (uint8 H×W×3), ``image`` = the front view (so
single-view policies run unchanged), ``ee_state`` ([x, y, z, yaw, gripper opening, gripper command] in the robot
base frame, the SIMPLER layout), ``ee_pose`` ([x, y, z, roll, pitch, yaw] of the TCP in the world), ``joints``
(7 arm + 2 fingers) and ``instruction``; with ``privileged=true`` also ``depth`` and ``segmentation`` per camera.
Action (``action_mode=absolute``, VLABench's): the TCP target [x, y, z, roll, pitch, yaw] in the world and a
gripper command (> 0 closes), solved by IK; ``action_mode=delta``: SIMPLER's 7-D delta in the robot base frame.
"""

from __future__ import annotations

import hashlib
import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.config import Options, require
from envs.errors import choice_error
from envs.manipulation.objects import ObjectInstance, instance_mesh_path
from envs.manipulation.personal import PersonalObject, render_references
from envs.manipulation.scene import MAX_DELTA_POS, MAX_DELTA_ROT, texture_file
from envs.manipulation.vlabench.appearance import novel_instance, novel_texture, room_look, training_look
from envs.manipulation.vlabench.books import instances_of, texture_of, x_extent
from envs.manipulation.vlabench.frames import to_base
from envs.manipulation.vlabench.scene import (
    BASE_POS,
    BASE_YAW,
    BUTTON_TOP,
    CAMERAS,
    SHELF_THICKNESS,
    TABLE_Z,
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
    Fixture,
    Look,
    ObjectSpec,
    VLABenchScene,
    apply_delta,
    backend_check,
    button_name,
    matrix_to_euler,
)
from envs.manipulation.vlabench.tasks import TASKS, TRACKS, SelectionTask, subject
from envs.registration import merged_options

INSTRUCTION_CHARSET = string.ascii_letters + string.digits + " '-,."
LIFT = 0.08  # metres above the start height, while grasped
MOVED = 0.05  # metres a distractor may be pushed before it counts as the wrong object
INTENTION_RADIUS = 0.10  # VLABench's intention score: the TCP came this close to the target
BOX_HALF, PLATE_RADIUS = 0.085, 0.085
SPAWN_LOW, SPAWN_HIGH = np.array([-0.28, -0.08]), np.array([0.28, 0.26])
# The shelf: inner half-width (x) and half-depth (y), board height above the table, panel height above the board;
# its centre is drawn from SHELF_X, SHELF_Y. Objects stand in one row along x with at least SHELF_GAP between them.
SHELF_HALF, SHELF_DEPTH, SHELF_BOARD, SHELF_RIM = 0.32, 0.085, (0.08, 0.12), 0.025
SHELF_X, SHELF_Y, SHELF_GAP = (-0.04, 0.04), (0.12, 0.18), 0.025
SHELF_CLEAR = 0.05  # lifted this far above the shelf's panels (or carried out of its footprint) = taken out
# The button task: objects in a row (half-width, centre y range), each button BUTTON_GAP in front of its object.
BUTTON_ROW_HALF, BUTTON_ROW_Y, BUTTON_HALF, BUTTON_GAP = 0.30, (0.14, 0.22), 0.024, 0.035
BUTTON_PRESSED = 0.006  # metres of cap travel that count as a press (of BUTTON_TRAVEL)


@dataclass(frozen=True)
class VLABenchOptions(Options):
    """Personalized-VLABench env options (``--env-option key=value``)."""

    title = "Personalized-VLABench env options"

    track: Literal["personal", "in_distribution", "unseen_texture", "cross_instance"] = field(
        default="personal", metadata={"help": "episode distribution (see envs.manipulation.vlabench.tasks.TRACKS)"})
    image_size: int = field(default=224, metadata={"help": "side of every camera image, 32-512"})
    cameras: tuple[str, ...] = field(default=CAMERAS, metadata={"help": "rendered views, a subset of "
                                                                        + ",".join(CAMERAS)})
    action_mode: Literal["absolute", "delta"] = field(
        default="absolute", metadata={"help": "absolute TCP target (VLABench) or SIMPLER's base-frame deltas"})
    privileged: bool = field(default=False, metadata={"help": "add depth and segmentation of every view"})
    num_distractors: int | None = field(default=None, metadata={"help": "same-category look-alikes, 2-4 "
                                                                        "(default: from the seed)"})
    num_clutter: int = field(default=1, metadata={"help": "objects of another category, 0-2"})
    max_steps: int = field(default=80, metadata={"help": "control steps (10 Hz) before truncation, 1-200"})
    references: bool = field(default=True, metadata={"help": "render info['reference_images'] (personal tracks)"})
    reference_count: int = field(default=4, metadata={"help": "reference images, 3-5"})
    randomise_look: bool = field(default=False, metadata={
        "help": "plain/gradient table and floor colours and random light (training demonstrations; never the "
                "unseen_texture track's textures)"})
    render_mode: str | None = "rgb_array"

    def check(self) -> None:
        require(32 <= self.image_size <= 512, f"image_size must be in [32, 512], got {self.image_size}")
        for cam in self.cameras:
            if cam not in CAMERAS:
                raise choice_error("camera", cam, CAMERAS)
        require(len(self.cameras) > 0 and len(set(self.cameras)) == len(self.cameras),
                f"cameras must name each view at most once, got {','.join(self.cameras) or '(none)'}")
        require(self.num_distractors is None or 2 <= self.num_distractors <= 4,
                f"num_distractors must be in [2, 4], got {self.num_distractors}")
        require(0 <= self.num_clutter <= 2, f"num_clutter must be in [0, 2], got {self.num_clutter}")
        require(1 <= self.max_steps <= 200, f"max_steps must be in [1, 200], got {self.max_steps}")
        require(3 <= self.reference_count <= 5, f"reference_count must be in [3, 5], got {self.reference_count}")
        if self.render_mode not in (None, "rgb_array"):
            raise choice_error("render_mode", self.render_mode, ("rgb_array",))


@dataclass
class Placed:
    """One free object of the episode."""

    name: str  # MuJoCo body name
    role: str  # "target", "distractor" or "clutter"
    instance: ObjectInstance
    start: np.ndarray = field(default_factory=lambda: np.zeros(3))
    body: int = -1


class PersonalizedVLABenchEnv(gym.Env):
    """A selection task on the user's object among look-alikes (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, task: str, options: Mapping[str, Any] | None = None) -> None:
        if task not in TASKS:
            raise choice_error("task", task, sorted(TASKS))
        self.task: SelectionTask = TASKS[task]
        self.config: VLABenchOptions = VLABenchOptions.from_options(options)
        cfg = self.config
        self.track = TRACKS[cfg.track]
        self.render_mode = cfg.render_mode
        backend_check()
        n = cfg.image_size
        image = spaces.Box(0, 255, (n, n, 3), np.uint8)
        obs: dict[str, spaces.Space] = {
            "images": spaces.Dict({c: image for c in cfg.cameras}),
            "image": image,
            "instruction": spaces.Text(max_length=128, min_length=1, charset=INSTRUCTION_CHARSET),
            "ee_state": spaces.Box(-10.0, 10.0, (6,), np.float32),
            "ee_pose": spaces.Box(-10.0, 10.0, (6,), np.float32),
            "joints": spaces.Box(-10.0, 10.0, (9,), np.float32),
        }
        if cfg.privileged:
            obs["depth"] = spaces.Dict({c: spaces.Box(0.0, 100.0, (n, n), np.float32) for c in cfg.cameras})
            obs["segmentation"] = spaces.Dict({c: spaces.Box(-1, 2**20, (n, n), np.int32) for c in cfg.cameras})
        self.observation_space = spaces.Dict(obs)
        if cfg.action_mode == "absolute":
            lo = np.array([*WORKSPACE_LOW, -math.pi, -math.pi, -math.pi, -1.0], np.float32)
            hi = np.array([*WORKSPACE_HIGH, math.pi, math.pi, math.pi, 1.0], np.float32)
        else:
            hi = np.array([MAX_DELTA_POS] * 3 + [MAX_DELTA_ROT] * 3 + [1.0], np.float32)
            lo = -hi
        self.action_space = spaces.Box(lo, hi, dtype=np.float32)
        # The front camera always renders: it is obs["image"].
        self._render_cams = tuple(dict.fromkeys((*cfg.cameras, "front")))
        self.scene = VLABenchScene(n, self._render_cams)
        self.objects: list[Placed] = []
        self.fixture: Fixture | None = None
        self.buttons: list[Fixture] = []  # select_my_button: buttons[k] stands in front of objects[k]
        self._pressed: list[bool] = []
        self._references: dict[str, list[np.ndarray]] = {}
        self._instruction = ""
        self._steps = 0
        self._flags: dict[str, Any] = {}
        self._last_obs: dict[str, Any] | None = None

    # ------------------------------------------------------------------ episode construction
    def _choose(self, rng: np.random.Generator) -> tuple[ObjectInstance, np.ndarray, list[ObjectInstance], str]:
        cfg, track = self.config, self.track
        category = str(rng.choice(self.task.categories))  # CATEGORIES for the first three tasks: unchanged draws
        pool = instances_of(category, track.split)
        if track.novel_target:
            texture, _ = novel_texture(rng)
            tag = hashlib.sha256(texture.tobytes()).hexdigest()[:8]
            target = novel_instance(category, rng, tag)
        else:
            target = pool[int(rng.integers(len(pool)))]
            texture = texture_of(target)
        others = [i for i in pool if i.instance_id != target.instance_id]
        style = "personal"
        if not track.personalized:
            style = "colour" if rng.random() < 0.5 else "colour_pattern"
            if style == "colour":  # the colour alone must single the target out
                others = [i for i in others if i.colour != target.colour]
            else:
                others = [i for i in others if (i.colour, i.pattern) != (target.colour, target.pattern)]
        k = int(rng.integers(2, 5)) if cfg.num_distractors is None else int(cfg.num_distractors)
        k = min(k, len(others))
        hard = [i for i in others if i.colour == target.colour or i.pattern == target.pattern]
        distractors: list[ObjectInstance] = []
        if hard:  # at least one hard negative: same colour or same pattern
            distractors.append(hard[int(rng.integers(len(hard)))])
        rest = [i for i in others if i not in distractors]
        distractors += [rest[j] for j in rng.permutation(len(rest))[: k - len(distractors)]]
        other_cats = [c for c in self.task.categories if c != category]
        for _ in range(cfg.num_clutter):
            cands = instances_of(other_cats[int(rng.integers(len(other_cats)))], track.split)
            distractors.append(cands[int(rng.integers(len(cands)))])
        return target, texture, distractors, style

    @staticmethod
    def _footprint(inst: ObjectInstance) -> float:
        return inst.radius + (0.028 if inst.category == "mug" else 0.0) + (0.012 if inst.category == "box" else 0.0)

    def _layout(self, rng: np.random.Generator, radii: list[float], fixture: float | None
                ) -> tuple[np.ndarray | None, list[np.ndarray]] | None:
        placed: list[tuple[np.ndarray, float]] = []
        fx = None
        if fixture is not None:
            fx = rng.uniform(SPAWN_LOW + fixture, SPAWN_HIGH - fixture + np.array([0.0, 0.06]))
            placed.append((fx, fixture))
        out = []
        for idx, r in enumerate(radii):
            for _ in range(300):
                xy = rng.uniform(SPAWN_LOW, SPAWN_HIGH)
                ok = all(np.linalg.norm(xy - q) >= r + rq + 0.04 for q, rq in placed)
                if ok and idx == 0 and fx is not None:
                    ok = np.linalg.norm(xy - fx) >= fixture + 0.1
                if ok:
                    placed.append((xy, r))
                    out.append(xy)
                    break
            else:
                return None
        return fx, out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Build a new episode; the same ``seed`` gives the same scene, images and outcome."""
        super().reset(seed=seed)
        rng = self.np_random
        target, texture, others, style = self._choose(rng)
        self.buttons = []
        if self.task.fixture == "shelf":
            return self._reset_shelf(rng, target, texture, others, style)
        if self.task.fixture == "buttons":
            return self._reset_buttons(rng, target, texture, others, style)
        fixture_size = {"box": BOX_HALF * 1.15, "plate": PLATE_RADIUS}.get(self.task.fixture or "")
        objs = [target, *others]
        laid = None
        while laid is None:  # drop the clutter, then distractors (keeping one), until the layout fits
            laid = self._layout(rng, [self._footprint(i) for i in objs], fixture_size)
            if laid is None:
                objs = objs[:-1]
                if len(objs) < 2:
                    raise RuntimeError("cannot lay out the episode")
        fx_xy, positions = laid
        self.fixture = None if fx_xy is None else Fixture(self.task.fixture, (float(fx_xy[0]), float(fx_xy[1])),
                                                          BOX_HALF if self.task.fixture == "box" else PLATE_RADIUS)
        look = self._room_look(rng)
        specs, self.objects = [], []
        for k, (inst, xy) in enumerate(zip(objs, positions, strict=True)):
            tex = texture if k == 0 else texture_of(inst)
            role = "target" if k == 0 else ("distractor" if inst.category == target.category else "clutter")
            name = f"obj{k}"
            specs.append(self._spec(name, inst, tex, xy, float(rng.uniform(-math.pi, math.pi))))
            self.objects.append(Placed(name, role, inst))
        return self._finish_reset(rng, target, texture, style, specs, look)

    @staticmethod
    def _spec(name: str, inst: ObjectInstance, tex: np.ndarray, xy, yaw: float, base_z: float = TABLE_Z
              ) -> ObjectSpec:
        col = ("box", (inst.radius, inst.radius * inst.shape.get("depth", 1.0))) if inst.category in ("box", "book") \
            else ("cylinder", (inst.radius,))
        return ObjectSpec(name, instance_mesh_path(inst), texture_file(tex), (1.0, 1.0, 1.0, 1.0), col, inst.height,
                          inst.mass, (float(xy[0]), float(xy[1])), yaw, base_z)

    def _reset_shelf(self, rng: np.random.Generator, target: ObjectInstance, texture: np.ndarray,
                     others: list[ObjectInstance], style: str):
        """Lay the candidates out in one row on the shelf's board (dropping clutter, then distractors, until the
        row fits) and build the episode. Objects face the robot (yaw near 0 or a half turn), so the gripper closes
        across them front to back and its fingers never reach into the neighbours."""
        centre = np.array([rng.uniform(*SHELF_X), rng.uniform(*SHELF_Y)])
        board = float(rng.uniform(*SHELF_BOARD))
        self.fixture = Fixture("shelf", (float(centre[0]), float(centre[1])), SHELF_HALF,
                               {"depth": SHELF_DEPTH, "board": board, "rim": SHELF_RIM})
        objs = [target, *others]
        yaws = [float(rng.choice([0.0, math.pi]) + rng.uniform(-0.3, 0.3)) for _ in objs]
        objs, yaws, xs = _row(rng, objs, yaws, float(centre[0]), SHELF_HALF, 0.0)
        ys = centre[1] + rng.uniform(-0.01, 0.01, len(objs))
        return self._place_row(rng, target, texture, style, objs, xs, ys, yaws, TABLE_Z + board)

    def _reset_buttons(self, rng: np.random.Generator, target: ObjectInstance, texture: np.ndarray,
                       others: list[ObjectInstance], style: str):
        """The objects in one row across the table, each with a push button in front of it (toward the robot),
        far enough apart that the hand pressing one button touches neither a neighbour's button nor an object."""
        centre = np.array([rng.uniform(-0.04, 0.04), rng.uniform(*BUTTON_ROW_Y)])
        objs = [target, *others]
        yaws = [float(rng.uniform(-math.pi, math.pi)) for _ in objs]
        objs, yaws, xs = _row(rng, objs, yaws, float(centre[0]), BUTTON_ROW_HALF, BUTTON_HALF + 0.015)
        ys = centre[1] + rng.uniform(-0.015, 0.015, len(objs))
        self.fixture = None
        self.buttons = [Fixture("button", (float(xs[k]), float(ys[k] - x_extent(inst, yaws[k] + math.pi / 2)
                                                                - BUTTON_GAP - BUTTON_HALF)),
                                BUTTON_HALF, {"index": k}) for k, inst in enumerate(objs)]
        return self._place_row(rng, target, texture, style, objs, xs, ys, yaws, TABLE_Z)

    def _room_look(self, rng: np.random.Generator) -> Look:
        """The episode's room look (random on tracks that ask for it); the front camera is re-posed per episode."""
        if self.track.random_look:
            look = room_look(rng)
        elif self.config.randomise_look:
            look = training_look(rng)
        else:
            look = Look()
        jitter = rng.uniform(-0.04, 0.04, 3)
        look.front_eye = tuple(np.array(look.front_eye) + jitter)
        return look

    def _place_row(self, rng: np.random.Generator, target: ObjectInstance, texture: np.ndarray, style: str,
                   objs: list[ObjectInstance], xs, ys, yaws, base_z: float):
        """Build an episode whose objects (target first) stand at given positions and yaws on a surface at
        ``base_z``."""
        look = self._room_look(rng)
        specs, self.objects = [], []
        for k, inst in enumerate(objs):
            tex = texture if k == 0 else texture_of(inst)
            role = "target" if k == 0 else ("distractor" if inst.category == target.category else "clutter")
            specs.append(self._spec(f"obj{k}", inst, tex, (xs[k], ys[k]), yaws[k], base_z))
            self.objects.append(Placed(f"obj{k}", role, inst))
        return self._finish_reset(rng, target, texture, style, specs, look)

    def _finish_reset(self, rng: np.random.Generator, target: ObjectInstance, texture: np.ndarray, style: str,
                      specs: list[ObjectSpec], look: Look):
        self._pressed = [False] * len(self.buttons)
        self.scene.build(specs, ([] if self.fixture is None else [self.fixture]) + self.buttons, look)
        for o in self.objects:
            o.body = self.scene.body_ids[o.name]
            o.start = self.scene.object_pose(o.name)[0]
        template = self.task.templates[int(rng.integers(len(self.task.templates)))]
        self._instruction = template.format(obj=subject(target, self.track.personalized, style == "colour_pattern"))
        self._steps = 0
        self._flags = {"success": False, "correct_object": False, "wrong_object": False, "target_grasped": False,
                       "intention_score": 0.0, "progress_score": 0.0}
        info: dict[str, Any] = {
            "task": self.task.name, "track": self.track.name, "category": target.category,
            "personal_object": target.instance_id, "instruction": self._instruction,
            "distractors": [o.instance.instance_id for o in self.objects[1:] if o.role == "distractor"],
            "reference_images": self._reference_images(target, texture),
        }
        if not self.track.personalized:
            info["target_attributes"] = dict(target.attributes)
            info["instruction_style"] = style
        if self.fixture is not None:
            info["receptacle"] = self.fixture.kind
        if self.buttons:
            info["buttons"] = len(self.buttons)
        self._last_obs = self._observation()
        return self._last_obs, info

    def _reference_images(self, target: ObjectInstance, texture: np.ndarray) -> list[np.ndarray]:
        if not (self.config.references and self.track.personalized):
            return []
        key = f"{target.instance_id}/{self.config.image_size}/{self.config.reference_count}"
        if key not in self._references:
            refs = render_references(PersonalObject(target, texture), self.config.image_size,
                                     self.config.reference_count)
            self._references[key] = refs.images
        return [im.copy() for im in self._references[key]]

    # ------------------------------------------------------------------ stepping
    def step(self, action):
        """One 10 Hz control step; terminates on success, truncates at ``max_steps``."""
        if not self.objects:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(action, np.float64).reshape(-1)
        if a.shape != (7,) or not np.all(np.isfinite(a)):
            raise ValueError(f"action must be 7 finite numbers, got shape {a.shape}")
        sc = self.scene
        if self.config.action_mode == "absolute":
            pos, rpy = a[:3], a[3:6]
        else:  # SIMPLER delta in the robot base frame, applied to the commanded target
            pos, rpy = apply_delta(sc.target_pos, sc.target_rpy, a[:6], MAX_DELTA_POS, MAX_DELTA_ROT)
        sc.apply_target(pos, rpy, bool(a[6] > 0.0))
        self._steps += 1
        self._update_metrics()
        terminated = bool(self._flags["success"])
        truncated = (not terminated) and self._steps >= self.config.max_steps
        self._last_obs = self._observation()
        info = {**self._flags, "steps": self._steps, "task": self.task.name, "track": self.track.name}
        return self._last_obs, 1.0 if terminated else 0.0, terminated, truncated, info

    def _update_metrics(self) -> None:
        if self.buttons:
            self._update_button_metrics()
            return
        sc, f = self.scene, self._flags
        t = self.objects[0]
        pos, mat = sc.object_pose(t.name)
        held = sc.grasped(t.name)
        f["target_grasped"] = bool(f["target_grasped"] or held)
        tcp, _ = sc.tcp_pose()
        centre = pos + mat @ np.array([0.0, 0.0, t.instance.height / 2])
        if np.linalg.norm(tcp - centre) <= INTENTION_RADIUS:
            f["intention_score"] = 1.0
        for o in self.objects[1:]:
            if f["wrong_object"]:
                break
            opos, _ = sc.object_pose(o.name)
            if np.linalg.norm(opos[:2] - o.start[:2]) > MOVED or opos[2] - o.start[2] > 0.03 or sc.grasped(o.name):
                f["wrong_object"] = True
        upright = mat[2, 2] > 0.85
        goal = self.task.goal
        if goal == "pick":
            met = held and pos[2] - t.start[2] >= LIFT
        elif goal == "from_shelf":
            met = held and pos[2] - t.start[2] >= 0.03 and self._clear_of_shelf(pos, t.instance)
        else:
            fx = np.array(self.fixture.position)
            d = pos[:2] - fx
            if goal == "in_box":
                inside = bool(np.all(np.abs(d) <= BOX_HALF - 0.012)) and pos[2] < TABLE_Z + 0.03
            else:
                inside = float(np.linalg.norm(d)) <= PLATE_RADIUS and TABLE_Z + 0.003 < pos[2] < TABLE_Z + 0.03
            met = inside and upright and not sc.touching(t.name)
        f["success"] = bool(met)
        f["progress_score"] = (float(met) + float(f["target_grasped"])) / (len(self.task.conditions) + 1)
        touched = f["target_grasped"] or np.linalg.norm(pos[:2] - t.start[:2]) > MOVED
        f["correct_object"] = bool(touched and not f["wrong_object"])

    def _update_button_metrics(self) -> None:
        """Buttons latch once pressed; success = my object's button pressed and no other. Touching my button counts
        as reaching the target entity (progress); the intention radius is measured to my button's cap."""
        sc, f = self.scene, self._flags
        for k in range(len(self.buttons)):
            self._pressed[k] = self._pressed[k] or sc.button_depth(k) >= BUTTON_PRESSED
        mine = self.buttons[0]
        f["target_grasped"] = bool(f["target_grasped"] or sc.touching(f"{button_name(0)}_cap"))
        tcp, _ = sc.tcp_pose()
        cap_pos = np.array([*mine.position, TABLE_Z + BUTTON_TOP])
        if np.linalg.norm(tcp - cap_pos) <= INTENTION_RADIUS:
            f["intention_score"] = 1.0
        other_pressed = any(self._pressed[1:])
        moved = False
        for o in self.objects:
            opos, _ = sc.object_pose(o.name)
            if np.linalg.norm(opos[:2] - o.start[:2]) > MOVED or opos[2] - o.start[2] > 0.03 or sc.grasped(o.name):
                moved = True
        f["wrong_object"] = bool(f["wrong_object"] or other_pressed or moved)
        met = self._pressed[0] and not other_pressed
        f["success"] = bool(met)
        f["progress_score"] = (float(met) + float(f["target_grasped"])) / (len(self.task.conditions) + 1)
        f["correct_object"] = bool((self._pressed[0] or f["target_grasped"]) and not f["wrong_object"])

    def _clear_of_shelf(self, pos: np.ndarray, inst: ObjectInstance) -> bool:
        """The object's bottom is above the shelf's panels, or its footprint is outside the shelf's."""
        fx = self.fixture
        top = TABLE_Z + fx.extra["board"] + fx.extra["rim"]
        reach = inst.radius + SHELF_THICKNESS
        inside = abs(pos[0] - fx.position[0]) < fx.half + reach and abs(pos[1] - fx.position[1]) < \
            fx.extra["depth"] + reach
        return bool(pos[2] >= top + SHELF_CLEAR or not inside)

    def _observation(self) -> dict[str, Any]:
        sc, cfg = self.scene, self.config
        images = {c: sc.render(c) for c in self._render_cams}
        tcp, mat = sc.tcp_pose()
        rpy = matrix_to_euler(mat)
        base = to_base(tcp - BASE_POS)
        yaw = (rpy[2] - BASE_YAW + math.pi / 2) % math.pi - math.pi / 2  # symmetric gripper: half turns
        obs: dict[str, Any] = {
            "images": {k: images[k] for k in cfg.cameras},
            "image": images["front"],
            "instruction": self._instruction,
            "ee_state": np.array([*base, yaw, sc.gripper_opening(), float(sc.gripper_closed)],
                                 np.float32),
            "ee_pose": np.array([*tcp, *rpy], np.float32),
            "joints": sc.joints(),
        }
        if cfg.privileged:
            obs["depth"] = {k: np.clip(sc.render(k, depth=True), 0.0, 100.0) for k in cfg.cameras}
            obs["segmentation"] = {k: sc.render(k, segmentation=True) for k in cfg.cameras}
        return obs

    def render(self):
        """The last front-camera frame (``rgb_array``)."""
        return None if self._last_obs is None else self._last_obs["image"].copy()

    def close(self) -> None:
        """Free the renderer's GL context."""
        self.scene.close()

    # ------------------------------------------------------------------ privileged access (experts, oracles)
    @property
    def personal_body_id(self) -> int:
        """MuJoCo body id of the target (privileged: grounding metrics and the oracle only)."""
        return self.objects[0].body if self.objects else -1

    def camera_sensors(self, views: tuple[str, ...]) -> dict[str, Any]:
        """Depth (metres), body-id segmentation and pose (position, rotation, fovy) of ``views`` now.

        Depth and camera poses are what a calibrated RGB-D rig gives a policy; segmentation is for metrics and
        the oracle only.
        """
        sc = self.scene
        return {"depth": {v: sc.render(v, depth=True) for v in views},
                "segmentation": {v: sc.render(v, segmentation=True) for v in views},
                "pose": {v: sc.camera_matrices(v) for v in views}}

    def privileged_state(self) -> dict[str, Any]:
        """Ground truth for scripted experts, oracles and metrics — never for evaluated policies.

        Keys: ``goal``, ``target`` / ``objects`` (name, body, role, category, position, yaw, radius, height,
        depth, grasped), ``fixture`` (kind, xy, half; a shelf adds depth, board, rim) or None, ``buttons`` (per
        object: xy, top, depth, pressed; empty but in the button task), ``tcp``,
        ``tcp_rpy``, ``command`` (pos, rpy, closed), ``gripper_opening``, ``body_roles`` (body id → role), ``flags``.
        """
        sc = self.scene
        objs = []
        for o in self.objects:
            pos, mat = sc.object_pose(o.name)
            objs.append({"name": o.name, "body": o.body, "role": o.role, "category": o.instance.category,
                         "position": pos, "start": o.start.copy(), "yaw": float(math.atan2(mat[1, 0], mat[0, 0])),
                         "radius": o.instance.radius, "height": o.instance.height,
                         "depth": o.instance.shape.get("depth", 1.0), "grasped": sc.grasped(o.name)})
        tcp, mat = sc.tcp_pose()
        roles = {o.body: o.role for o in self.objects}
        roles.update({i: "robot" for name, i in sc.body_ids.items() if name.startswith("panda_")})
        if self.fixture is not None:
            roles[sc.body_ids[f"fixture_{self.fixture.kind}"]] = "fixture"
        for k in range(len(self.buttons)):
            roles[sc.body_ids[button_name(k)]] = roles[sc.body_ids[f"{button_name(k)}_cap"]] = "fixture"
        roles[0] = "table"
        return {
            "goal": self.task.goal, "body_roles": roles, "target": objs[0] if objs else None, "objects": objs,
            "fixture": None if self.fixture is None else {"kind": self.fixture.kind,
                                                          "xy": np.array(self.fixture.position),
                                                          "half": self.fixture.half, **self.fixture.extra},
            "buttons": [{"xy": np.array(b.position), "top": TABLE_Z + BUTTON_TOP, "depth": sc.button_depth(k),
                         "pressed": self._pressed[k]} for k, b in enumerate(self.buttons)],
            "tcp": tcp, "tcp_rpy": matrix_to_euler(mat), "command_pos": sc.target_pos.copy(),
            "command_rpy": sc.target_rpy.copy(), "gripper_closed": sc.gripper_closed,
            "gripper_opening": sc.gripper_opening(), "flags": dict(self._flags),
        }


def _row(rng: np.random.Generator, objs: list[ObjectInstance], yaws: list[float], centre_x: float, half: float,
         min_half: float) -> tuple[list[ObjectInstance], list[float], np.ndarray]:
    """Place objects in one row along x within ``centre_x`` ± ``half``, in random order with random gaps of at least
    SHELF_GAP; each takes at least ``min_half`` either side. Drops objects from the end (clutter first, then
    distractors) until the row fits; returns the kept objects, their yaws and x positions."""
    while True:
        widths = [max(x_extent(inst, yaw), min_half) for inst, yaw in zip(objs, yaws, strict=True)]
        slack = 2 * half - 2 * sum(widths) - SHELF_GAP * (len(objs) + 1)
        if slack >= 0:
            break
        objs, yaws = objs[:-1], yaws[:-1]
        if len(objs) < 2:
            raise RuntimeError("cannot lay out the row")
    order = rng.permutation(len(objs))
    gaps = SHELF_GAP + slack * rng.dirichlet(np.ones(len(objs) + 1))
    xs = np.empty(len(objs))
    x = centre_x - half
    for slot, k in enumerate(order):
        x += gaps[slot] + widths[k]
        xs[k] = x
        x += widths[k]
    return objs, yaws, xs


def make_env(task: str, options: Mapping[str, Any] | None = None) -> PersonalizedVLABenchEnv:
    """One task's env (``task`` in TASKS; options as in :class:`VLABenchOptions`)."""
    return PersonalizedVLABenchEnv(task, options)


def make_gym_env(task: str, options: Mapping[str, Any] | None = None, **kwargs: Any) -> PersonalizedVLABenchEnv:
    """``gym.make`` entry point: options as keywords or ``options={...}`` (:class:`VLABenchOptions`)."""
    return PersonalizedVLABenchEnv(task, merged_options(options, kwargs))


def episode_metrics(info: dict[str, Any], total_return: float, steps: int) -> dict[str, Any]:
    """The record's metrics: success, correct/wrong object, progress and intention scores."""
    return {
        "success": bool(info.get("success", False)),
        "correct_object": bool(info.get("correct_object", False)),
        "wrong_object": bool(info.get("wrong_object", False)),
        "progress_score": float(info.get("progress_score", 0.0)),
        "intention_score": float(info.get("intention_score", 0.0)),
        "return": float(total_return),
    }


__all__ = ["PersonalizedVLABenchEnv", "VLABenchOptions", "episode_metrics", "make_env", "make_gym_env"]
