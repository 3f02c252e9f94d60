"""A modular base for Personalized-VLABench: perceive the scene once in 3-D, then run the scripted expert's phases.

Not an end-to-end VLA: the expert's phase machine (:class:`~policies.manipulation.vlabench_expert.VLABenchExpert`) is
driven by *perceived* state instead of the simulator's. On the first step the left, right and front RGB-D views (depth
and camera poses: a calibrated rig) are fused into a table-top point cloud (:mod:`perception.tabletop_cloud`); its
largest footprint is the box or plate, the others are objects with a box centre, height and main axis. Which object the
instruction means is read from the front image, the view VAP prompts:

- the instruction names a palette colour ("pick up the red mug", VAP's rewrite): the largest region of the front
  image painted in that colour;
- otherwise ("pick up the mug", the generic instruction): the category detector's best candidate whose height fits
  the category (:mod:`perception.object_height`), which among look-alikes is any of them.

The chosen region's pixels are lifted with the front depth and matched to the nearest footprint, whose box centre
(a mug: its round body, not the handle), height and axis become the expert's target; the hand pose comes from
``obs["ee_pose"]`` (proprioception). So VAP's grounding reaches this base through the prompt alone, as with a VLA.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from envs.errors import ConfigError
from perception.category import drop_personal
from perception.instruction_mask import colour_region, instruction_mask  # noqa: F401 (colour_region: kept importable here)
from perception.prompting import DEFAULT_COLOURS
from perception.tabletop_cloud import (
    GridConfig,
    TabletopObject,
    footprint,
    nearest_object,
    rectangle_yaw,
    round_body_centre,
    table_height,
    tabletop_objects,
    world_points,
)
from policies.base import policy_seed_rng
from policies.manipulation.vlabench_expert import VLABenchExpert

GOALS = ("pick", "in_box", "on_plate")  # the table-top tasks; the shelf and button tasks need other perception
VIEWS = ("left", "right", "front")
FIXTURE_SIZE = 0.14  # metres: a footprint this large is the box or plate (objects are at most ~10 cm across)
OBJECT_SIZE = 0.11  # an object footprint larger than this is two objects merged: narrow it around the choice
NARROW_RADIUS = 0.045
ROUND_BODIES = ("mug",)  # a handle widens the footprint: centre on the round body instead
FACETED = ("box",)  # flat faces to close on: a square footprint is turned to its sides, not left at yaw 0
SQUARE_RATIO = 1.12  # a footprint whose sides differ less than this has no usable principal axis

_GOAL_PHRASE = re.compile(r"\b(in|into|on|onto) the (box|plate)\b", re.IGNORECASE)


class ModularVLABenchBase(VLABenchExpert):
    """Perceive once (fused RGB-D views), then the expert's phases on the perceived target (module docstring).

    ``cameras_fn() -> {"depth": {view: H×W}, "pose": {view: (position, rotation, fovy)}}`` reads the calibrated
    views; ``goal`` is the task's ("pick", "in_box", "on_plate"); ``detector_fn()`` builds the category detector
    used when the instruction names no colour (built on first use: a prompted instruction never needs it);
    ``height_check`` drops that detector's candidates of an impossible height.
    """

    def __init__(self, cameras_fn: Callable[[], Mapping[str, Any]], goal: str,
                 detector_fn: Callable[[], Any] | None = None, height_check: Any = None,
                 colours: Mapping[str, tuple[int, int, int]] = DEFAULT_COLOURS, seed: int = 0) -> None:
        if goal not in GOALS:
            raise ConfigError(f"the modular base runs the table-top goals {', '.join(GOALS)}, not {goal!r}")
        self.env = None  # never read: every fact comes from ``state``
        self.noise_std, self.funnel = 0.0, False
        self.rng = policy_seed_rng(seed)
        self.cameras_fn, self.goal = cameras_fn, goal
        self.detector_fn, self.detector = detector_fn, None
        self.height_check = height_check
        self.colours = dict(colours)
        self.reset("", {})

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """New episode: the instruction is read now, the scene at the first step."""
        super().reset(instruction, info)
        self.instruction = drop_personal(instruction)
        self.category = str(info.get("category") or self._category(self.instruction))
        self.colour = self._colour(self.instruction, self.category)
        self.scene: dict[str, Any] | None = None
        self.choice = ""  # how the target was chosen (diagnostic)

    def _category(self, instruction: str) -> str:
        words = re.findall(r"[a-z]+", _GOAL_PHRASE.sub(" ", instruction.lower()))
        return words[-1] if words else ""

    def _colour(self, instruction: str, category: str) -> str | None:
        """The palette colour word just before the category ("the red mug" → "red"), if any."""
        words = re.findall(r"[a-z]+", _GOAL_PHRASE.sub(" ", instruction.lower()))
        if category not in words:
            return None
        at = words.index(category)
        return next((w for w in words[max(0, at - 2):at] if w in self.colours), None)

    # -- perception ---------------------------------------------------------------------------------------------
    def perceive(self, obs: Mapping[str, Any], choose: bool = True) -> dict[str, Any]:
        """The first step's scene: table height, the fixture (box or plate) and the objects standing on the table,
        fused from the three views; with ``choose`` also the instruction's target (else ``target`` is None); and
        the views' ``sensors`` (depth and poses) it was fused from."""
        sensors = self.cameras_fn()
        pts = {v: world_points(sensors["depth"][v], sensors["pose"][v]) for v in VIEWS}
        table_z = table_height(pts["front"])
        objects = tabletop_objects(pts.values(), table_z)
        fixtures = [o for o in objects if o.size >= FIXTURE_SIZE]
        fixture = fixtures[0] if fixtures else None
        items = [o for o in objects if o is not fixture]
        if not choose:
            return {"table_z": table_z, "target": None, "fixture": fixture, "objects": items, "sensors": sensors}
        seed_xy = self._target_seed(obs, sensors, table_z)
        target = self.object_near(items, seed_xy) if seed_xy is not None else None
        if target is None and items:  # nothing read from the image: the footprint nearest the table's centre
            target, self.choice = min(items, key=lambda o: float(np.linalg.norm(o.centre))), "fallback"
        return {"table_z": table_z, "target": target, "fixture": fixture, "objects": items, "sensors": sensors}

    def _detector(self) -> Any:
        """The category detector, built on first use (a prompted instruction never needs it)."""
        if self.detector is None:
            self.detector = self.detector_fn()
        return self.detector

    def _target_seed(self, obs: Mapping[str, Any], sensors: Mapping[str, Any], table_z: float) -> np.ndarray | None:
        """The xy the instruction points at: the named colour's region, else the detector's best candidate."""
        image = np.asarray(obs["image"])
        depth, pose = sensors["depth"]["front"], sensors["pose"]["front"]
        mask, self.choice = instruction_mask(
            image, self.category, colour=self.colours[self.colour] if self.colour else None, min_colour_pixels=20,
            detector=self._detector if self.detector_fn is not None else None, depth=depth,
            height_check=self.height_check, fovy_deg=pose[2])
        if mask is None:
            return None
        pts = world_points(depth, pose, mask)
        pts = pts[pts[:, 2] > table_z + GridConfig.min_height]
        return np.median(pts[:, :2], axis=0) if len(pts) else None

    def object_near(self, items: list[TabletopObject], xy: np.ndarray) -> TabletopObject | None:
        """The footprint nearest the world ``xy``, narrowed around it when it merged with a neighbour."""
        obj = nearest_object(items, xy)
        if obj is not None and obj.size > OBJECT_SIZE:  # merged with a neighbour: keep the cells around the choice
            near = obj.cells[np.linalg.norm(obj.cells - xy, axis=1) <= NARROW_RADIUS]
            if len(near) >= GridConfig.min_cells:
                obj = footprint(near, obj.height)
        return obj

    def centre(self, obj: TabletopObject) -> np.ndarray:
        """Where to grasp ``obj`` (world xy): its footprint's box centre, a mug's round body without the handle."""
        return round_body_centre(obj) if self.category in ROUND_BODIES else obj.centre

    # -- the phase machine's state --------------------------------------------------------------------------
    def state(self, obs: Any) -> dict[str, Any]:
        """The expert's state dict, built from the first step's perception and the hand's pose."""
        if self.scene is None:
            self.scene = self.perceive(obs)
        sc = self.scene
        t: TabletopObject | None = sc["target"]
        tcp = np.asarray(obs["ee_pose"], float)[:3]
        if t is None:  # nothing on the table: hold still
            xyz, height, yaw = tcp.copy(), 0.0, 0.0
            xyz[2] = sc["table_z"]
        else:
            centre = self.centre(t)
            xyz, height = np.array([centre[0], centre[1], sc["table_z"]]), t.height
            # The fingers close across the main axis: across a box's narrower faces, clear of a mug's handle. A
            # square footprint has no main axis: a box closes across the faces of its smallest enclosing rectangle
            # (a finger on a turned box's top never reaches the grasp height), anything else (round) at yaw 0.
            square = max(t.extent) < SQUARE_RATIO * min(t.extent) and self.category not in ROUND_BODIES
            if not square:
                yaw = t.axis_yaw
            else:
                yaw = rectangle_yaw(t.cells) if self.category in FACETED else 0.0
        target = {"position": xyz, "start": xyz.copy(), "height": height, "grasp_yaw": yaw,
                  "category": self.category}
        fixture = None
        if self.goal != "pick":
            fx = sc["fixture"]
            xy = fx.centre if fx is not None else np.array([0.0, 0.15])
            fixture = {"kind": "box" if self.goal == "in_box" else "plate", "xy": np.asarray(xy, float)}
        heights = [o.height for o in sc["objects"]] or [height]
        return {"goal": self.goal, "target": target, "tcp": tcp, "fixture": fixture,
                "objects": [{"height": h} for h in heights]}

    def grasp_yaw(self, target: dict[str, Any]) -> float:  # type: ignore[override]
        """The perceived main axis (set in :meth:`state`)."""
        return float(target["grasp_yaw"])

    def episode_info(self) -> dict[str, Any]:
        """The expert's last phase and how the target was chosen."""
        return {**super().episode_info(), "modular_choice": self.choice,
                "modular_colour": self.colour or ""}
