"""Books: a VLABench-like category made procedurally (a box body with a printed cover), for the newer tasks only.

A book is a thin box standing upright; its two covers carry the same design: a base colour, a title printed in a
contrasting label, and a thin band near the foot; the spines are a darker shade. Designs are (colour, title) pairs.
Test designs come in hard-negative pairs (same colour with another title, same title in another colour), as in the
object library; train designs use other pairs. The title is the book's ``pattern`` (lower case) and ``word``, so
generic instructions can say "the red book titled MAPS" and same-title look-alikes count as hard negatives.

Books live outside :data:`envs.manipulation.objects.LIBRARY` and ``CATEGORIES`` on purpose: the first three
VLABench tasks sample from those and must keep their episodes. :func:`instances_of` and :func:`texture_of` serve
both the library categories and books.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
from PIL import Image, ImageDraw

from envs.errors import choice_error
from envs.manipulation.objects import (
    COLOURS,
    SPLITS,
    TEXTURE_SIZE,
    ObjectInstance,
    instances,
    label_font,
    make_texture,
)

TITLES: tuple[str, ...] = ("ATLAS", "POEMS", "BIRDS", "STARS", "MAPS", "TALES", "CHESS", "OCEAN")
# Test designs: four hard-negative pairs sharing a colour and four sharing a title (each design is in one of each).
_TEST_DESIGNS: tuple[tuple[str, str], ...] = (
    ("blue", "BIRDS"), ("blue", "STARS"), ("red", "BIRDS"), ("red", "MAPS"),
    ("green", "STARS"), ("green", "TALES"), ("yellow", "MAPS"), ("yellow", "TALES"),
)
_TRAIN_DESIGNS: tuple[tuple[str, str], ...] = (
    ("red", "ATLAS"), ("red", "POEMS"), ("blue", "CHESS"), ("blue", "OCEAN"), ("green", "ATLAS"),
    ("orange", "POEMS"), ("orange", "BIRDS"), ("purple", "STARS"), ("white", "MAPS"), ("black", "TALES"),
)
WIDTH = (0.042, 0.052)  # half of the cover's width (the instance "radius"), metres
HEIGHT = (0.12, 0.15)
THICKNESS = (0.009, 0.015)  # half of the thickness; the gripper closes across it


def _make_book(index: int) -> ObjectInstance:
    split = "train" if index < len(_TRAIN_DESIGNS) else "test"
    colour, title = (_TRAIN_DESIGNS[index] if split == "train" else _TEST_DESIGNS[index - len(_TRAIN_DESIGNS)])
    rng = np.random.default_rng(int(hashlib.sha256(f"book/{index}".encode()).hexdigest()[:8], 16))
    half_w, height, half_t = (float(rng.uniform(*WIDTH)), float(rng.uniform(*HEIGHT)), float(rng.uniform(*THICKNESS)))
    return ObjectInstance(f"book_{index:02d}", "book", colour, title.lower(), split, half_w, height,
                          {"depth": half_t / half_w}, title)


BOOKS: dict[str, ObjectInstance] = {b.instance_id: b for b in
                                    (_make_book(i) for i in range(len(_TRAIN_DESIGNS) + len(_TEST_DESIGNS)))}


def instances_of(category: str, split: str) -> list[ObjectInstance]:
    """Instances of a library category or of ``"book"`` in ``split`` (books have no extra designs:
    ``train_extended`` is ``train``)."""
    if category != "book":
        return instances(category, split)
    if split not in SPLITS:
        raise choice_error("split", split, SPLITS)
    want = "train" if split == "train_extended" else split
    return [b for b in BOOKS.values() if b.split == want]


def _shade(rgb: np.ndarray, k: float) -> tuple[int, int, int]:
    return tuple(int(c) for c in np.clip(rgb * k, 0, 255))


def book_texture(inst: ObjectInstance) -> np.ndarray:
    """The book's texture (uint8 H×W×3) laid out for the library's box mesh: u runs around the four sides
    (+y cover, -x spine, -y cover, +x spine), v from top to bottom."""
    h, w = TEXTURE_SIZE
    half_w, half_t = inst.radius, inst.radius * inst.shape.get("depth", 0.25)
    perim = np.cumsum([0.0, 2 * half_w, 2 * half_t, 2 * half_w, 2 * half_t])
    cols = np.round(perim / perim[-1] * w).astype(int)
    base = np.array(COLOURS[inst.colour], float)
    light = inst.colour in ("white", "yellow", "orange")
    ink = (25, 25, 25) if light else (245, 245, 240)
    img = Image.new("RGB", (w, h), _shade(base, 1.0))
    draw = ImageDraw.Draw(img)
    for face in range(4):
        x0, x1 = int(cols[face]), int(cols[face + 1])
        if face % 2 == 1:  # spine: darker, with two thin rules
            draw.rectangle([x0, 0, x1 - 1, h - 1], fill=_shade(base, 0.6))
            for y in (int(h * 0.15), int(h * 0.85)):
                draw.rectangle([x0, y - 2, x1 - 1, y + 2], fill=ink)
            continue
        fw = x1 - x0
        # Title label in the upper half; the font is sized so the title fills the label's width.
        draw.rectangle([x0 + 5, int(h * 0.12), x1 - 6, int(h * 0.52)], fill=ink)
        size = 40
        font = label_font(size)
        while size > 8 and draw.textlength(inst.word, font=font) > fw - 16:
            size -= 2
            font = label_font(size)
        draw.text(((x0 + x1) / 2, h * 0.32), inst.word, fill=_shade(base, 1.0), font=font, anchor="mm")
        draw.rectangle([x0 + 5, int(h * 0.74), x1 - 6, int(h * 0.80)], fill=ink)  # a band near the foot
    return np.asarray(img, np.uint8).copy()


def texture_of(inst: ObjectInstance) -> np.ndarray:
    """The texture of a library instance or a book."""
    return book_texture(inst) if inst.category == "book" else make_texture(inst)


def x_extent(inst: ObjectInstance, yaw: float) -> float:
    """Half of the object's extent along world x when turned by ``yaw`` (mug handles included)."""
    if inst.category in ("box", "book"):
        half_y = inst.radius * inst.shape.get("depth", 1.0)
        return inst.radius * abs(math.cos(yaw)) + half_y * abs(math.sin(yaw))
    return inst.radius + (0.028 if inst.category == "mug" else 0.0)
