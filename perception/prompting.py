"""Visual prompts: highlight the grounded object in the image and rewrite the instruction to match.

Styles: ``overlay`` (tint), ``outline`` (contour), ``dim`` (darken everything else), ``crop`` (zoom on the object,
resized back to the frame), ``recolour`` (repaint the object's pixels in a colour the base policy already follows,
shading preserved, and name that colour: "pick up my mug" → "pick up the red mug").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np

from envs.errors import ConfigError, choice_error
from perception.candidate import box_of_mask

STYLES = ("recolour", "overlay", "outline", "dim", "crop")
# Colours a colour-grounded generic policy is typically trained on (names → RGB); override per base policy.
DEFAULT_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 30, 30), "green": (40, 160, 50), "blue": (35, 70, 200), "yellow": (235, 205, 30),
    "orange": (240, 120, 20), "purple": (130, 45, 170),
}


def rewrite_instruction(instruction: str, category: str, attribute: str | None = None) -> str:
    """Replace "my <category>" by "the [<attribute>] <category>"; other text is kept."""
    phrase = f"the {attribute} {category}" if attribute else f"the {category}"
    pattern = rf"\bmy\s+{re.escape(category)}\b"
    if re.search(pattern, instruction, flags=re.IGNORECASE):
        return re.sub(pattern, phrase, instruction, count=1, flags=re.IGNORECASE)
    return re.sub(r"\bmy\b", "the", instruction, flags=re.IGNORECASE)


def _percentile(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (linear interpolation) via a partial sort: a fraction of the cost per step."""
    pos = q / 100.0 * (len(values) - 1)
    lo, hi = int(np.floor(pos)), int(np.ceil(pos))
    part = np.partition(values, [lo, hi])
    return float(part[lo] + (part[hi] - part[lo]) * (pos - lo))


def _hue_of(rgb: Sequence[int]) -> float:
    return float(cv2.cvtColor(np.uint8([[rgb]]), cv2.COLOR_RGB2HSV)[0, 0, 0])


def choose_colour(image: np.ndarray, others: Sequence[np.ndarray], colours: Mapping[str, tuple[int, int, int]],
                  margin: float | None = None) -> str:
    """The palette colour to paint: with ``margin`` (degrees of hue), the first in palette order whose hue is at
    least that far from every distractor's dominant hue; otherwise (or when none is) the farthest (ties: order)."""
    hsv = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2HSV)
    hues = []
    for m in others:
        px = hsv[m]
        sat = px[px[:, 1] > 60]  # only saturated pixels carry a hue
        if len(sat):
            hues.append(float(np.median(sat[:, 0])))
    best, best_d = next(iter(colours)), -1.0
    for name, rgb in colours.items():
        h = _hue_of(rgb)
        d = min((min(abs(h - o), 180 - abs(h - o)) for o in hues), default=90.0)  # OpenCV hue: 2° per unit
        if margin is not None and 2.0 * d >= margin:
            return name
        if d > best_d + 1e-6:
            best, best_d = name, d
    return best


@dataclass
class VisualPrompter:
    """Applies one highlight style; ``prompt`` returns (prompted image, rewritten instruction)."""

    style: str = "recolour"
    colours: Mapping[str, tuple[int, int, int]] = field(default_factory=lambda: dict(DEFAULT_COLOURS))
    fixed_colour: str | None = None  # always use this palette colour instead of choosing per episode
    # Palette order as the base's preference: the first colour at least this many degrees of hue from every
    # distractor is used (None: the farthest colour). A base follows some colour words better than others.
    hue_margin: float | None = None
    highlight_rgb: tuple[int, int, int] = (255, 40, 40)
    dim_factor: float = 0.35
    crop_margin: float = 0.6

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise choice_error("highlight style", self.style, STYLES)
        if self.fixed_colour is not None and self.fixed_colour not in self.colours:
            raise choice_error("prompt colour", self.fixed_colour, list(self.colours))
        if not self.colours:
            raise ConfigError("prompter colour palette is empty")
        if self.hue_margin is not None and not 0.0 <= self.hue_margin <= 180.0:
            raise ConfigError(f"hue margin must be between 0 and 180 degrees, got {self.hue_margin}")

    def pick_attribute(self, image: np.ndarray, others: Sequence[np.ndarray]) -> str | None:
        """The colour word to name (recolour style only): fixed, or the one farthest from the distractors."""
        if self.style != "recolour":
            return None
        return self.fixed_colour or choose_colour(image, others, self.colours, self.hue_margin)

    def apply(self, image: np.ndarray, mask: np.ndarray, attribute: str | None = None) -> np.ndarray:
        """The highlighted image (same shape and dtype as ``image``)."""
        img = np.asarray(image)
        if not mask.any():
            return img.copy()
        if self.style == "recolour":
            return self._recolour(img, mask, self.colours[attribute or next(iter(self.colours))])
        if self.style == "overlay":
            out = img.astype(np.float32)
            out[mask] = 0.5 * out[mask] + 0.5 * np.asarray(self.highlight_rgb, np.float32)
            return out.astype(np.uint8)
        if self.style == "outline":
            out = img.copy()
            contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
            cv2.drawContours(out, contours, -1, tuple(int(c) for c in self.highlight_rgb), 1)
            return out
        if self.style == "dim":
            out = img.astype(np.float32)
            out[~mask] *= self.dim_factor
            return out.astype(np.uint8)
        # crop: zoom on the object with context, back to the frame size
        h, w = img.shape[:2]
        x0, y0, x1, y1 = box_of_mask(mask)
        side = max(x1 - x0, y1 - y0) * (1 + 2 * self.crop_margin)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        side = min(max(side, 8), min(h, w))
        ax0 = int(np.clip(cx - side / 2, 0, w - side))
        ay0 = int(np.clip(cy - side / 2, 0, h - side))
        patch = img[ay0:ay0 + int(side), ax0:ax0 + int(side)]
        return cv2.resize(patch, (w, h), interpolation=cv2.INTER_LINEAR)

    @staticmethod
    def _recolour(img: np.ndarray, mask: np.ndarray, rgb: tuple[int, int, int]) -> np.ndarray:
        """Set hue and saturation of the masked pixels to the target colour; keep their brightness (shading)."""
        x0, y0, x1, y1 = box_of_mask(mask)  # work on the object's box only: a few hundred pixels, not the frame
        out = img.copy()
        out[y0:y1, x0:x1] = VisualPrompter._recolour_full(img[y0:y1, x0:x1], mask[y0:y1, x0:x1], rgb)
        return out

    @staticmethod
    def _recolour_full(img: np.ndarray, mask: np.ndarray, rgb: tuple[int, int, int]) -> np.ndarray:
        hsv = cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_RGB2HSV)
        target = cv2.cvtColor(np.uint8([[rgb]]), cv2.COLOR_RGB2HSV)[0, 0]
        value = hsv[..., 2][mask].astype(np.float32)
        # Brightness relative to the object's brightest pixels, rescaled to the target colour's value.
        v = value / max(_percentile(value, 95.0), 1.0)
        px = np.empty((len(value), 3), np.uint8)
        px[:, 0] = target[0]
        px[:, 1] = target[1]
        px[:, 2] = np.clip(v * float(target[2]), 0, 255)
        hsv[mask] = px
        out = img.copy()  # HSV round trips are lossy: write back only the object's pixels
        out[mask] = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[mask]
        return out

    def prompt(self, image: np.ndarray, mask: np.ndarray, instruction: str, category: str,
               others: Sequence[np.ndarray] = (), attribute: str | None = None) -> tuple[np.ndarray, str]:
        """Highlight ``mask`` and rewrite the instruction; ``attribute`` fixes the colour (else it is chosen)."""
        attribute = attribute if attribute is not None else self.pick_attribute(image, others)
        return self.apply(image, mask, attribute), rewrite_instruction(instruction, category, attribute)
