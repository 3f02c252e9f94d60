"""The image region an instruction points at: the named colour's region, else the category detector's best candidate.

A VAP-prompted instruction names the colour the object was painted in ("pick up the blue mug"); the generic one
names only the category ("pick up the mug"), and then the detector's best candidate — among look-alikes, any of
them — stands for the object. The modular manipulation bases (ManiSkill3, VLABench) read their target this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

HUE_TOLERANCE = 8  # OpenCV hue units (2° each) around the named colour's hue


def colour_region(image: np.ndarray, rgb: tuple[int, int, int]) -> np.ndarray:
    """The largest connected region painted in ``rgb``'s hue (saturated, not dark), as a boolean mask."""
    hsv = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2HSV).astype(np.int32)
    target = cv2.cvtColor(np.uint8([[rgb]]), cv2.COLOR_RGB2HSV)[0, 0].astype(np.int32)
    dh = np.abs(hsv[..., 0] - target[0])
    dh = np.minimum(dh, 180 - dh)
    hit = (dh <= HUE_TOLERANCE) & (hsv[..., 1] >= 0.6 * target[1]) & (hsv[..., 2] >= 40)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(hit.astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros(hit.shape, bool)
    return labels == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))


def instruction_mask(image: np.ndarray, category: str, *, colour: tuple[int, int, int] | None,
                     min_colour_pixels: int, detector: Callable[[], Any] | None = None,
                     depth: np.ndarray | None = None, height_check: Any = None,
                     fovy_deg: float | None = None) -> tuple[np.ndarray | None, str]:
    """The mask of the object the instruction means and how it was found (``"colour"``, ``"detector"`` or ``""``).

    ``colour`` is the RGB of the palette colour the instruction names (None: it names none); its region counts only
    from ``min_colour_pixels`` pixels on (a smaller one is a stray highlight). Otherwise ``detector()`` returns the
    category detector — called only then, so a prompted instruction never builds it — and its best-scoring
    candidate is the object; ``height_check`` (:class:`perception.object_height.HeightCheck`-like, with the
    detector's table plane and the camera's vertical fov ``fovy_deg``) first drops candidates of an impossible
    height. ``(None, "")`` when neither finds anything.
    """
    if colour is not None:
        region = colour_region(image, colour)
        if region.sum() >= min_colour_pixels:
            return region, "colour"
    if detector is None:
        return None, ""
    found = detector()
    if hasattr(found, "prepare"):
        found.prepare(category)
    cands = found.detect(image, category, depth=depth)
    if height_check is not None:
        cands = height_check.filter(cands, depth, category, plane=getattr(found, "plane", None), fovy_deg=fovy_deg)
    if not cands:
        return None, ""
    return max(cands, key=lambda c: c.score).mask, "detector"
