"""Where an object-memory head's remembered objects come from: its own first-frame estimate, or depth.

An object-memory head (``HeadConfig.memory``) localises the described object (and the box or plate) on an episode's
first frame and acts relative to those remembered table positions. Trained with ``--memory-source true`` its action
MLP conditions on the true start positions plus a few millimetres of noise, so at evaluation the precision of the
memory decides where the hand goes; the head's own estimate is 1.5-2.5 cm off on Personalized-VLABench. The
modular base's perception (:class:`~policies.manipulation.vlabench_modular.ModularVLABenchBase`: left, right and front
depth fused into a table-top point cloud) places footprints a median 0.04 cm from the true xy (mugs ~1 cm). This module
feeds that perception into the head's memory, keeping the policy a VLA: views + instruction + proprioception in, actions
out; the target position stays an input the head learned to condition on.

Memory sources (``MEMORY_SOURCES``):

- ``own``: the head's own estimate (the default, unchanged);
- ``depth``: the head still chooses *which* object (its own estimate), the fused cloud says *where*: each remembered
  object moves to the centre of the nearest perceived footprint (within ``SNAP_RADIUS``), the box or plate to the
  fixture's footprint;
- ``perceived``: the modular base's choice replaces the head's: the region of the instruction's colour in the front
  image (VAP's prompt), else the category detector's best candidate of a possible height, lifted with depth;
- ``fused``: every perceived footprint gets a vote from each cue and the best one is remembered: the head's own
  object heatmap (its probability mass over the footprint's pixels in the front view), the share of those pixels
  painted in the instruction's colour (:mod:`perception.colour_vote`, all eight library colours), and its measured
  height, which must fit the named category (``HEIGHT_MARGIN``). On generic-track dev episodes (launch.eval seed 1,
  150 first frames) the soft-argmax of the head's heatmap, snapped by ``depth``, is nearest the described object in
  98, the colour share alone picks it in 125 and the fusion in 137 (docs/results/vlabench.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import cv2
import numpy as np

from envs.manipulation.vlabench.frames import BASE_POS, from_base, to_base
from policies.vla.configuration import MEMORY_SOURCES, VLAMemoryOptions  # noqa: F401  (MEMORY_SOURCES: API)

SNAP_RADIUS = 0.08  # metres: an own estimate farther than this from every footprint is kept (nothing to snap to)
# ``fused``: score = log(heatmap mass + HEAT_FLOOR) + COLOUR_WEIGHT × colour share, over the footprints whose height
# fits the category within HEIGHT_MARGIN (the fused cloud measures heights to a few millimetres). Chosen on dev
# episodes (launch.eval seed 1): weights 5 / 10 / 20 and margins 0.5 / 1 / 2 cm gave 133-138 of 150.
HEAT_FLOOR = 1e-3
COLOUR_WEIGHT = 10.0
HEIGHT_MARGIN = 0.01
OWNER_DILATION = 9  # pixels (at 224²): the heatmap peaks at an object's base, just below its pixels


def check_memory_source(source: str) -> str:
    """``source`` if it is one of ``MEMORY_SOURCES``, else a ``ConfigError`` naming the valid ones (parsed as the
    ``vla_memory`` option is: :class:`policies.vla.configuration.VLAMemoryOptions`)."""
    return VLAMemoryOptions.from_options({"vla_memory": source}).vla_memory


def world_to_state(xy: np.ndarray) -> np.ndarray:
    """World table xy → the robot base frame of ``obs["ee_state"]`` (the frame the head's memory is kept in)."""
    return to_base(np.asarray(xy, float)[:2] - BASE_POS[:2]).astype(np.float32)


def state_to_world(xy: np.ndarray) -> np.ndarray:
    """The inverse of :func:`world_to_state`."""
    return from_base(np.asarray(xy, float)[:2]) + BASE_POS[:2]


class PerceivedMemory:
    """Places a head's remembered objects with the modular base's fused three-view perception (module docstring).

    ``base`` is a :class:`~policies.manipulation.vlabench_modular.ModularVLABenchBase` (its cameras, detector and height
    check are reused, never copied); ``source`` is ``"depth"`` or ``"perceived"``. :meth:`place` is called once per
    episode, on the first frame, with the head's own M×2 estimate.
    """

    def __init__(self, base: Any, source: str) -> None:
        check_memory_source(source)
        if source == "own":
            raise ValueError("the own memory source needs no PerceivedMemory")
        self.base, self.source = base, source
        self.last: dict[str, Any] = {}  # diagnostics of the last placement

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """New episode: the base reads the instruction (category, colour word); the scene is perceived on demand."""
        self.base.reset(instruction, info)

    @property
    def needs_heatmap(self) -> bool:
        """Whether :meth:`place` reads the head's object heatmap (``fused``)."""
        return self.source == "fused"

    def place(self, obs: Mapping[str, Any], own: np.ndarray, heatmap: np.ndarray | None = None) -> np.ndarray:
        """The remembered positions (M×2, state frame) for the head's own estimate ``own`` (M×2): the target slot
        (row 0) and the box or plate (row 1) placed by depth; NaN rows keep the head's own. ``heatmap`` (G×G
        probabilities over the front image, the described object's) is read by ``fused``."""
        base = self.base
        if base.scene is None:
            base.scene = base.perceive(obs, choose=self.source == "perceived")
        scene = base.scene
        out = np.full(np.shape(own), np.nan, np.float32)
        target = scene["target"]
        if self.source == "depth" and scene["objects"]:
            xy = state_to_world(own[0])
            near = base.object_near(scene["objects"], xy)
            gap = float(np.min(np.linalg.norm(near.cells - xy, axis=1))) if near is not None else math.inf
            target = near if gap <= SNAP_RADIUS else None
        if self.source == "fused" and scene["objects"]:
            target = self._fused_choice(obs, scene, heatmap)
        if target is not None:
            out[0] = world_to_state(base.centre(target))
        if len(out) > 1 and scene["fixture"] is not None:
            out[1] = world_to_state(scene["fixture"].centre)
        if self.source == "perceived":
            self.last = {"choice": base.choice}
        elif self.source == "depth":
            self.last = {"choice": "snap" if target is not None else "own"}
        else:
            self.last = {"choice": "fused", **self.last}
        return out

    def _fused_choice(self, obs: Mapping[str, Any], scene: Mapping[str, Any], heatmap: np.ndarray | None) -> Any:
        """The footprint with the best vote of heatmap mass, colour share and category height (module docstring)."""
        from perception.colour_vote import colour_shares, named_colour
        from perception.object_height import category_heights
        from perception.tabletop_cloud import pixel_owners, view_points

        items = scene["objects"]
        image = np.asarray(obs["image"])
        sensors = scene["sensors"]
        owners = pixel_owners(view_points(sensors["depth"]["front"], sensors["pose"]["front"]), scene["table_z"],
                              items)
        if owners.shape != image.shape[:2]:
            raise ValueError(f"front depth {owners.shape} and image {image.shape[:2]} differ in size")
        colour = named_colour(self.base.instruction)
        colour_share = colour_shares(image, owners, len(items), colour) if colour else np.zeros(len(items))
        heat = np.zeros(len(items))
        if heatmap is not None:
            h, w = owners.shape
            probs = cv2.resize(np.asarray(heatmap, np.float32), (w, h), interpolation=cv2.INTER_NEAREST)
            probs *= float(np.sum(heatmap)) / max(float(probs.sum()), 1e-12)  # the same mass, spread over pixels
            kernel = np.ones((OWNER_DILATION, OWNER_DILATION), np.uint8)
            for k in range(len(items)):
                heat[k] = float(probs[cv2.dilate((owners == k).astype(np.uint8), kernel) > 0].sum())
        span = category_heights().get(self.base.category)
        fits = np.array([span is None or span[0] - HEIGHT_MARGIN <= o.height <= span[1] + HEIGHT_MARGIN
                         for o in items])
        if not fits.any():  # nothing of a possible height: let the other cues decide among all
            fits[:] = True
        score = np.log(heat + HEAT_FLOOR) + COLOUR_WEIGHT * colour_share
        best = int(np.argmax(np.where(fits, score, -np.inf)))
        self.last = {"colour": colour or "", "colour_share": np.round(colour_share, 3).tolist(),
                     "heat": np.round(heat, 3).tolist(), "fits": fits.tolist(), "best": best}
        return items[best]
