"""The robot base frame of Personalized-VLABench: where the arm stands and how world vectors turn into its frame.

Kept apart from ``scene`` (which loads MuJoCo) so that demonstration labels, probes and policies can convert
positions without a simulator. ``obs["ee_state"]`` and the object-memory heads use this frame: x forward = world +y.
"""

from __future__ import annotations

import math

import numpy as np

BASE_POS = np.array([0.0, -0.4, 0.78])
BASE_YAW = math.pi / 2  # the robot faces +y


def to_base(vec_world: np.ndarray) -> np.ndarray:
    """A world displacement (xy or xyz) in the base frame: xy turned by −``BASE_YAW``, z unchanged (float64)."""
    v = np.array(vec_world, float)
    c, s = math.cos(-BASE_YAW), math.sin(-BASE_YAW)
    v[0], v[1] = c * v[0] - s * v[1], s * v[0] + c * v[1]
    return v


def from_base(vec_base: np.ndarray) -> np.ndarray:
    """The inverse of :func:`to_base`: a base-frame displacement in the world frame (float64)."""
    v = np.array(vec_base, float)
    c, s = math.cos(BASE_YAW), math.sin(BASE_YAW)
    v[0], v[1] = c * v[0] - s * v[1], s * v[0] + c * v[1]
    return v
