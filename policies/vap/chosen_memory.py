"""The base's object memory placed at the object VAP chose: the chosen mask lifted to the table with depth.

An object-memory base (the built-in generic VLA, ``HeadConfig.memory``: policies/vla/generic.py) localises the
described object on an episode's first frame — from the prompted image, its attribute detectors reading the prompt's
colour word, and its base localiser — and then acts relative to that remembered table position for the whole
episode. VAP has already decided which pixels are the object, but the head decides again: a look-alike whose print
holds the prompt's colour, or a coarse heatmap peak between two objects, makes it remember another object or a
point centimetres off, and it then reaches there. :class:`ChosenObjectMemory` closes that gap without touching the
head: on the first frame the memory's target slot becomes the centre of VAP's chosen mask back-projected with the
frame's depth (a calibrated RGB-D camera, the depth VAP's detector already reads), moved ``back`` metres further
from the camera (a camera sees an object's near side: the mask's centre lies in front of the body's axis). The
head's other slot (plate, basket, apple) stays its own estimate. The head keeps choosing every action; only what
it remembers about the object VAP grounded is given to it, as ``vla_memory=depth|perceived`` does for the
VLABench line (policies/vla/perceived_memory.py).

It acts as the head's ``memory_refiner`` (``reset(instruction, info)``, ``place(obs, own) -> M×2``, NaN rows keep
the head's own) and is told the chosen mask by VAP (:meth:`see`) before the base's first action.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception.tabletop_cloud import world_points


@dataclass(frozen=True)
class CameraPose:
    """A pinhole camera looking along its -z with y up (OpenGL): world ``position``, camera-to-world
    ``rotation`` (3×3) and vertical field of view in degrees (square pixels, the principal point at the centre)."""

    position: np.ndarray
    rotation: np.ndarray
    fovy_deg: float

    @classmethod
    def from_view(cls, view: np.ndarray, fovy_deg: float) -> CameraPose:
        """From an OpenGL 4×4 view (world-to-camera) matrix."""
        rot = np.asarray(view, float)[:3, :3].T
        return cls(-rot @ np.asarray(view, float)[:3, 3], rot, float(fovy_deg))


def lift_mask(mask: np.ndarray, depth: np.ndarray, camera: CameraPose, back: float = 0.0) -> np.ndarray | None:
    """Table xy (metres, world) of a mask's object: the mean of its pixels back-projected with ``depth`` (the
    distance along the view axis, metres), moved ``back`` metres horizontally away from the camera; None when the
    mask has no pixel of finite depth."""
    points = world_points(depth, (camera.position, camera.rotation, camera.fovy_deg), mask)
    if not len(points):
        return None
    xy = points[:, :2].mean(axis=0)
    away = xy - camera.position[:2]
    norm = float(np.linalg.norm(away))
    return xy + (away / norm) * back if norm > 0 else xy


class ChosenObjectMemory:
    """An object-memory head's refiner that remembers VAP's chosen object where its mask and depth put it."""

    def __init__(self, camera: CameraPose, back: float = 0.0, user_objects_only: bool = False) -> None:
        self.camera, self.back = camera, float(back)
        # Remember the choice only for a user object's reference set (VAP tells which): the head keeps its own
        # memory on the built-in designs, whose evaluation table this then leaves unchanged.
        self.user_objects_only = user_objects_only
        self.target: np.ndarray | None = None  # table xy of the chosen object in this episode (None: the head's own)

    def forget(self) -> None:
        """A new episode: nothing chosen yet (VAP calls it on reset; a fallback leaves the head's own memory)."""
        self.target = None

    def see(self, mask: np.ndarray, depth: np.ndarray | None, user_object: bool = True) -> None:
        """VAP's first-step choice: remember its mask's table position (without depth, or on a built-in design
        with ``user_objects_only``, the head keeps its own)."""
        if depth is None or (self.user_objects_only and not user_object):
            self.target = None
            return
        self.target = lift_mask(mask, depth, self.camera, self.back)

    def reset(self, instruction: str, info: Mapping[str, Any]) -> None:
        """The head's reset hook. The chosen object is told by VAP (:meth:`see`), not by the instruction, and VAP
        resets the base only after it has grounded, so nothing is cleared here."""

    def place(self, obs: Mapping[str, Any], own: np.ndarray) -> np.ndarray:
        """The remembered positions (M×2) given the head's own ``own``: the chosen object in the target slot,
        NaN (the head's own) elsewhere and when nothing was chosen."""
        out = np.full(np.shape(own), np.nan, np.float32)
        if self.target is not None:
            out[0] = self.target
        return out
