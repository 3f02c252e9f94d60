"""How much of each object is painted in the colour an instruction names: a vote on *which* object it means.

The object library paints every object in one of eight base colours (``envs.manipulation.objects.COLOURS``) with a
pattern in a contrasting ink. Each pixel is labelled with the nearest library colour in CIELAB, lightness
down-weighted (``LIGHTNESS_WEIGHT``) so that a shaded side keeps its hue; an object's vote is the share of its pixels
labelled with the named colour. Unlike a single region of one hue (:func:`perception.instruction_mask.colour_region`,
which knows six saturated colours), it covers white and black and scores every candidate, so it can be fused with
other evidence instead of deciding alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cv2
import numpy as np

from envs.manipulation.objects import COLOURS

LIGHTNESS_WEIGHT = 0.3  # squared-distance weight of L* against a* and b*


def colour_labels(image: np.ndarray, palette: Mapping[str, tuple[int, int, int]] = COLOURS) -> np.ndarray:
    """H×W index (into ``palette``'s order) of the nearest palette colour of every pixel of an RGB uint8 image."""
    names = list(palette)
    ref = cv2.cvtColor(np.uint8([[palette[n] for n in names]]), cv2.COLOR_RGB2LAB)[0].astype(np.float32)
    lab = cv2.cvtColor(np.ascontiguousarray(image, np.uint8), cv2.COLOR_RGB2LAB).astype(np.float32)
    weight = np.array([LIGHTNESS_WEIGHT, 1.0, 1.0], np.float32)
    dist = (((lab[..., None, :] - ref[None, None]) ** 2) * weight).sum(-1)
    return np.argmin(dist, axis=-1)


def colour_shares(image: np.ndarray, owners: np.ndarray, count: int, colour: str,
                  palette: Mapping[str, tuple[int, int, int]] = COLOURS) -> np.ndarray:
    """Share (0-1) of each object's pixels labelled ``colour``; ``owners`` (H×W, −1 = none) gives each pixel's object
    among ``count``. An object without pixels scores 0; an unknown colour scores every object 0."""
    if colour not in palette:
        return np.zeros(count)
    hit = colour_labels(image, palette) == list(palette).index(colour)
    return shares(hit, owners, count)


def shares(hit: np.ndarray, owners: np.ndarray, count: int) -> np.ndarray:
    """Per object, the share of its pixels (``owners`` == k) where ``hit`` holds."""
    own = owners.reshape(-1)
    mine = own >= 0
    total = np.bincount(own[mine], minlength=count)[:count].astype(float)
    yes = np.bincount(own[mine], weights=hit.reshape(-1)[mine].astype(float), minlength=count)[:count]
    return np.divide(yes, total, out=np.zeros(count), where=total > 0)


def named_colour(instruction: str, palette: Sequence[str] = tuple(COLOURS)) -> str | None:
    """The first library colour word of ``instruction`` ("pick up the white dotted can" → "white"), else None."""
    words = [w.strip(".,!?;:").lower() for w in instruction.split()]
    return next((w for w in words if w in palette), None)
