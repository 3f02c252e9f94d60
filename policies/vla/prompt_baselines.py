"""Learned-prompt baselines for personalization: describe *my* object to the frozen generic VLA.

* ``HardPrompt`` names the dominant colour of the reference images ("pick up my mug" → "pick up the blue mug").
* ``SoftPrompt`` maps the reference images straight into the instruction-embedding space with a ridge regression
  fitted on train-split object images and their generic instructions (no robot data of the personal object), and
  conditions the head on that vector in place of the encoded instruction.

Both keep the frozen policy's image untouched, which is exactly what separates them from VAP's visual prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.manipulation.objects import COLOURS
from policies.vla.generic import GenericVLA, drop_possessive

_COLOUR_NAMES = tuple(COLOURS)
CHROMATIC_SHARE = 0.2
_COLOUR_RGB = np.array([COLOURS[c] for c in _COLOUR_NAMES], np.float32)


def foreground_pixels(image: np.ndarray, threshold: float = 40.0) -> np.ndarray:
    """Pixels (K×3) that differ from the image border's median colour (the neutral surface behind the object)."""
    img = np.asarray(image, np.float32)
    border = np.concatenate([img[0], img[-1], img[:, 0], img[:, -1]])
    bg = np.median(border, axis=0)
    fg = np.linalg.norm(img - bg, axis=-1) > threshold
    return img[fg]


def dominant_colour(images: Sequence[np.ndarray]) -> str | None:
    """The colour-vocabulary name most foreground pixels of the reference images are nearest to (None: no object)."""
    pixels = [foreground_pixels(im) for im in images]
    pixels = [p for p in pixels if len(p)]
    if not pixels:
        return None
    px = np.concatenate(pixels)
    # Shading darkens every colour: compare chromaticity-normalised colours plus a brightness term.
    def norm(c: np.ndarray) -> np.ndarray:
        s = c.sum(-1, keepdims=True) + 1e-3
        return np.concatenate([c / s, s / 765.0 * 0.5], axis=-1)

    d = np.linalg.norm(norm(px)[:, None, :] - norm(_COLOUR_RGB)[None, :, :], axis=-1)
    votes = np.bincount(d.argmin(1), minlength=len(_COLOUR_NAMES)).astype(float)
    # Pattern ink is white or near-black: a chromatic colour covering a fair share of the object is the base.
    chromatic = [i for i, n in enumerate(_COLOUR_NAMES) if n not in ("white", "black")]
    best = max(chromatic, key=lambda i: votes[i])
    if votes[best] >= CHROMATIC_SHARE * votes.sum():
        return _COLOUR_NAMES[best]
    return _COLOUR_NAMES[int(votes.argmax())]


def hard_prompt_instruction(instruction: str, category: str, colour: str | None) -> str:
    """"pick up my mug" → "pick up the blue mug" (just "the mug" when no colour was found)."""
    generic = drop_possessive(instruction)
    if colour is None:
        return generic
    return re.sub(rf"\bthe {re.escape(category)}\b", f"the {colour} {category}", generic, count=1)


class HardPrompt:
    """A base policy told the personal object's dominant colour in its instruction: the frozen generic VLA, or any
    base that reads colour words (Personalized-VLABench's modular base)."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.colour: str | None = None
        self.instruction = ""

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        category = str(info.get("category", ""))
        self.colour = dominant_colour(info.get("reference_images") or [])
        self.instruction = hard_prompt_instruction(instruction, category, self.colour) if category else \
            drop_possessive(instruction)
        self.base.reset(self.instruction, info)

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        return self.base.act(obs)

    def episode_info(self) -> dict[str, Any]:
        """The description the baseline produced (after the base's own diagnostics, if it reports any)."""
        extra = getattr(self.base, "episode_info", None)
        return {**(extra() if callable(extra) else {}), "prompt_instruction": self.instruction,
                "prompt_colour": self.colour}


@dataclass
class SoftPromptMap:
    """Ridge regression from mean pooled MobileNetV2 features of an object's images to an instruction embedding."""

    weight: np.ndarray  # (1280 + 1) × 384, last row = bias
    kinds: tuple[str, ...]

    def predict(self, pooled: np.ndarray) -> np.ndarray:
        """Unit-norm instruction-space vector for an object's (mean) pooled features."""
        x = np.append(np.asarray(pooled, np.float64).reshape(-1), 1.0)
        y = x @ self.weight
        return (y / (np.linalg.norm(y) + 1e-9)).astype(np.float32)


def fit_soft_prompt(features: np.ndarray, targets: np.ndarray, ridge: float = 1.0,
                    kinds: tuple[str, ...] = ()) -> SoftPromptMap:
    """Closed-form ridge fit of ``targets`` (N×384) from ``features`` (N×1280); the bias is not penalised."""
    x = np.concatenate([features, np.ones((len(features), 1))], axis=1).astype(np.float64)
    reg = ridge * np.eye(x.shape[1])
    reg[-1, -1] = 0.0
    w = np.linalg.solve(x.T @ x + reg, x.T @ targets.astype(np.float64))
    return SoftPromptMap(w, kinds)


class SoftPrompt:
    """The frozen generic VLA conditioned on a concept vector predicted from the reference images."""

    def __init__(self, base: GenericVLA, maps: dict[str, SoftPromptMap], kind: str, pooled_fn: Any) -> None:
        self.base = base
        self.map = maps[kind]
        self.pooled_fn = pooled_fn  # images → (N, 1280) pooled features
        self.similar_to = ""

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        self.base.reset(drop_possessive(instruction), info)  # clears the ensembler; the text is replaced next
        refs = info.get("reference_images") or []
        if len(refs):
            self.base.set_text_embedding(self.map.predict(np.asarray(self.pooled_fn(np.stack(refs))).mean(0)))

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        return self.base.act(obs)


def fit_soft_prompt_from_library(text_encoder: Any, kinds: Sequence[str] = ("pick", "move_near", "put_on"),
                                 ridge: float = 1.0, render_size: int = 160,
                                 on_progress: Any = None) -> dict[str, SoftPromptMap]:
    """Fit one map per task kind on every train-split library object (reference-style renders, no robot data).

    Target for an object is the embedding of the generic instruction that names it ("pick up the red striped
    mug"), so the predicted vector lives where the head's FiLM layers expect an instruction. ``on_progress(n)``
    is called after each object's references are encoded.
    """
    from envs.manipulation.objects import LIBRARY
    from envs.manipulation.personal import PersonalObject, render_references
    from envs.manipulation.tasks import describe, instruction
    from perception.mobilenet_v2 import pooled_features

    train = [inst for inst in LIBRARY.values() if inst.split == "train"]
    feats = []
    for inst in train:
        refs = render_references(PersonalObject.from_library(inst.instance_id), render_size, 4).images
        feats.append(pooled_features(np.stack(refs)).mean(0))
        if on_progress is not None:
            on_progress(1)
    x = np.stack(feats)
    maps = {}
    for kind in kinds:
        texts = [instruction(kind, "the " + describe(inst, with_pattern=True)) for inst in train]
        maps[kind] = fit_soft_prompt(x, text_encoder.encode(texts), ridge=ridge, kinds=(kind,))
    return maps
