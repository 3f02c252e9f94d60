"""A modular base for ``personalized_maniskill``: perceive the object the instruction names in one RGB-D view, then
run the scripted expert's pick phases on it. Not a VLA.

On the first step the camera's depth (with its pose: a calibrated RGB-D camera, no segmentation) is lifted to a
table-top point cloud (:mod:`perception.tabletop_cloud`) whose footprints are the objects. Which one the
instruction means is read from the image, as the Personalized-VLABench modular base does
(:func:`perception.instruction_mask.instruction_mask`):

- the instruction names a palette colour ("pick up the blue mug", VAP's rewrite): the largest region of the image
  painted in that colour;
- otherwise ("pick up the mug", the generic instruction): the category detector's best candidate, which among
  look-alikes is any of them.

The region's pixels are lifted and matched to the nearest footprint, whose centre and height become the
:class:`~policies.manipulation.maniskill_expert.PersonalizedPickExpert`'s target; the hand comes from
``obs["ee_state"]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from perception.category import drop_personal
from perception.instruction_mask import instruction_mask
from perception.prompting import DEFAULT_COLOURS
from perception.tabletop_cloud import (
    GridConfig,
    nearest_object,
    round_body_centre,
    table_height,
    tabletop_objects,
    world_points,
)
from policies.manipulation.maniskill_expert import PersonalizedPickExpert

Pose = tuple[np.ndarray, np.ndarray, float]
# the table in front of the Panda where objects stand (the robot's own base, behind x = -0.5, stays out)
GRID = GridConfig(low=(-0.25, -0.28), high=(0.22, 0.28))
TALLEST = 0.17  # metres: no library object is taller (bottles reach 0.16); a taller footprint holds the arm
HAND_HALF = 0.07  # metres around the tool centre point (xy) that the open Panda hand covers


class ModularPickBase(PersonalizedPickExpert):
    """Perceive once (one RGB-D view), then the expert's pick phases on the perceived target (module docstring).

    ``depth_fn()`` reads the camera's depth (metres along the view axis); ``camera_pose`` is its (position,
    camera→world rotation with the camera looking along −z, y up, vertical fov in degrees); ``detector_fn()``
    builds the category detector used when the instruction names no colour (on first use).
    """

    def __init__(self, depth_fn: Callable[[], np.ndarray], camera_pose: Pose,
                 detector_fn: Callable[[], Any] | None = None,
                 colours: Mapping[str, tuple[int, int, int]] = DEFAULT_COLOURS) -> None:
        self.env = None  # never read: every fact comes from the camera and ee_state
        self.gain = 1.0
        self.depth_fn, self.camera_pose = depth_fn, camera_pose
        self.detector_fn, self.detector = detector_fn, None
        self.colours = dict(colours)
        self.reset("", {})

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """New episode: the instruction is read now, the scene at the first step."""
        super().reset(instruction, info)
        self.instruction = drop_personal(instruction)
        words = re.findall(r"[a-z]+", self.instruction.lower())
        self.category = str(info.get("category") or (words[-1] if words else ""))
        at = words.index(self.category) if self.category in words else 0
        self.colour = next((w for w in words[max(0, at - 2):at] if w in self.colours), None)
        self._target: dict[str, Any] | None = None
        self.choice = ""

    def tcp(self, obs: Any) -> tuple[np.ndarray, float]:
        """The hand's position and yaw from proprioception."""
        ee = np.asarray(obs["ee_state"], float)
        return ee[:3].copy(), float(ee[3])

    def target(self, obs: Any) -> dict[str, Any]:
        """The perceived target (first step), reused for the rest of the episode."""
        if self._target is None:
            self._target = self._perceive(obs)
        return self._target

    def _detector(self) -> Any:
        """The category detector, built on first use (a prompted instruction never needs it)."""
        if self.detector is None:
            self.detector = self.detector_fn()
        return self.detector

    def _perceive(self, obs: Any) -> dict[str, Any]:
        depth = np.asarray(self.depth_fn(), float)
        pts = world_points(depth, self.camera_pose)
        # the hand (its pose is proprioception) is no object: drop what is around and above the fingertips
        tcp = self.tcp(obs)[0]
        pts = pts[~((np.abs(pts[:, :2] - tcp[:2]).max(axis=1) < HAND_HALF) & (pts[:, 2] > tcp[2] - 0.01))]
        table_z = table_height(pts)
        objects = tabletop_objects([pts], table_z, GRID)
        image = np.asarray(obs["image"])
        mask, self.choice = instruction_mask(
            image, self.category, colour=self.colours[self.colour] if self.colour else None, min_colour_pixels=10,
            detector=self._detector if self.detector_fn is not None else None, depth=depth)
        obj, top = None, None
        if mask is not None:
            seen = world_points(depth, self.camera_pose, mask)
            seen = seen[seen[:, 2] > table_z + GridConfig.min_height]
            if len(seen):
                obj = nearest_object(objects, np.median(seen[:, :2], axis=0))
                # the object's own pixels give its height when the footprint's highest cell is the arm above it
                top = float(np.percentile(seen[:, 2], 98) - table_z)
        if obj is None and objects:  # nothing read from the image: the footprint nearest the table's centre
            obj, self.choice = min(objects, key=lambda o: float(np.linalg.norm(o.centre))), "fallback"
        if obj is None:
            return {"position": np.array([0.0, 0.0, table_z]), "height": 0.05, "yaw": None,
                    "category": self.category}
        centre = round_body_centre(obj) if self.category == "mug" else obj.centre
        # a box's main axis is its long side: the hand turns onto it and closes across the short one
        return {"position": np.array([centre[0], centre[1], table_z]),
                "height": float(obj.height) if obj.height <= TALLEST or top is None else top,
                "yaw": float(obj.axis_yaw) if self.category == "box" else None, "category": self.category}

    def episode_info(self) -> dict[str, Any]:
        """How the target was chosen."""
        return {"modular_choice": self.choice, "modular_colour": self.colour or ""}
