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
  image (VAP's prompt), else the category detector's best candidate of a possible height, lifted with depth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from envs.manipulation.vlabench.frames import BASE_POS, from_base, to_base
from policies.vla.configuration import MEMORY_SOURCES, VLAMemoryOptions  # noqa: F401  (MEMORY_SOURCES: API)

SNAP_RADIUS = 0.08  # metres: an own estimate farther than this from every footprint is kept (nothing to snap to)


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

    def place(self, obs: Mapping[str, Any], own: np.ndarray) -> np.ndarray:
        """The remembered positions (M×2, state frame) for the head's own estimate ``own`` (M×2): the target slot
        (row 0) and the box or plate (row 1) placed by depth; NaN rows keep the head's own."""
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
        if target is not None:
            out[0] = world_to_state(base.centre(target))
        if len(out) > 1 and scene["fixture"] is not None:
            out[1] = world_to_state(scene["fixture"].centre)
        self.last = {"choice": base.choice if self.source == "perceived" else ("snap" if target is not None
                                                                              else "own")}
        return out
