"""Procedural appearance for the VLABench tracks: random room looks and object designs outside the library.

``room_look`` draws table/floor textures and light for the ``unseen_texture`` track; ``training_look`` draws plain
or gradient table/floor colours and light for randomised demonstrations (never a wood, tile or noise texture, so
``unseen_texture`` stays unseen); ``novel_texture`` paints a
two-colour design (diagonal stripes, halves, rings or a zigzag) that is neither a train, an extra nor a test design of
:mod:`envs.manipulation.objects`, for the ``cross_instance`` track.
"""

from __future__ import annotations

import numpy as np

from envs.manipulation.objects import COLOURS, TEXTURE_SIZE, ObjectInstance
from envs.manipulation.scene import texture_file
from envs.manipulation.vlabench.books import instances_of
from envs.manipulation.vlabench.scene import Look

NOVEL_STYLES = ("diagonal", "halves", "rings", "zigzag")


def _wood(rng: np.random.Generator, size: int = 128) -> np.ndarray:
    base = rng.uniform(60, 200, 3)
    yy, xx = np.mgrid[0:size, 0:size]
    grain = np.sin(xx / size * rng.uniform(10, 40) + 3 * np.sin(yy / size * rng.uniform(2, 6)))
    tex = base[None, None, :] * (0.85 + 0.15 * grain[..., None])
    return np.clip(tex, 0, 255).astype(np.uint8)


def _tiles(rng: np.random.Generator, size: int = 128) -> np.ndarray:
    a, b = rng.uniform(40, 220, 3), rng.uniform(40, 220, 3)
    cells = int(rng.integers(2, 6))
    yy, xx = np.mgrid[0:size, 0:size]
    mask = ((xx * cells // size) + (yy * cells // size)) % 2 == 0
    return np.where(mask[..., None], a, b).astype(np.uint8)


def _noise(rng: np.random.Generator, size: int = 128) -> np.ndarray:
    coarse = rng.uniform(50, 210, (8, 8, 3))
    tex = np.kron(coarse, np.ones((size // 8, size // 8, 1)))
    return np.clip(tex + rng.normal(0, 8, tex.shape), 0, 255).astype(np.uint8)


def room_look(rng: np.random.Generator) -> Look:
    """A random table / floor texture and light (direction, strength, ambient)."""
    makers = (_wood, _tiles, _noise)
    table = makers[int(rng.integers(len(makers)))](rng)
    floor = makers[int(rng.integers(len(makers)))](rng)
    light = (float(rng.uniform(-0.6, 0.6)), float(rng.uniform(-0.6, 0.6)), -1.0)
    return Look(table_texture=texture_file(table), floor_texture=texture_file(floor), light_dir=light,
                light_diffuse=float(rng.uniform(0.45, 0.9)), ambient=float(rng.uniform(0.2, 0.5)))


def _gradient(rng: np.random.Generator, size: int = 128) -> np.ndarray:
    a, b = rng.uniform(40, 220, 3), rng.uniform(40, 220, 3)
    angle = rng.uniform(0, np.pi)
    yy, xx = np.mgrid[0:size, 0:size] / (size - 1)
    t = np.clip(np.cos(angle) * xx + np.sin(angle) * yy, 0, 1)[..., None]
    return ((1 - t) * a + t * b).astype(np.uint8)


def training_look(rng: np.random.Generator) -> Look:
    """A randomised look for demonstrations: plain or two-colour gradient table / floor, and random light.

    Disjoint from :func:`room_look`'s texture families (wood, tiles, noise); the light ranges are the same.
    """
    def surface() -> dict:
        if rng.random() < 0.5:
            return {"rgba": (*(float(c) for c in rng.uniform(0.15, 0.85, 3)), 1.0)}
        return {"texture": texture_file(_gradient(rng))}

    table, floor = surface(), surface()
    light = (float(rng.uniform(-0.6, 0.6)), float(rng.uniform(-0.6, 0.6)), -1.0)
    base = Look()
    return Look(table_rgba=table.get("rgba", base.table_rgba), floor_rgba=floor.get("rgba", base.floor_rgba),
                table_texture=table.get("texture"), floor_texture=floor.get("texture"), light_dir=light,
                light_diffuse=float(rng.uniform(0.45, 0.9)), ambient=float(rng.uniform(0.2, 0.5)))


def novel_texture(rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """A two-colour design outside the library's vocabulary, and a short name of it ("red/blue zigzag")."""
    names = list(COLOURS)
    i, j = rng.choice(len(names), 2, replace=False)
    a, b = np.array(COLOURS[names[i]], np.uint8), np.array(COLOURS[names[j]], np.uint8)
    style = NOVEL_STYLES[int(rng.integers(len(NOVEL_STYLES)))]
    h, w = TEXTURE_SIZE
    yy, xx = np.mgrid[0:h, 0:w]
    if style == "diagonal":
        mask = ((xx + yy) // (w // 10)) % 2 == 0
    elif style == "halves":
        mask = yy < h // 2
    elif style == "rings":
        mask = (yy // (h // 10)) % 3 == 0
    else:
        mask = ((xx // (w // 12)) % 2 == 0) ^ (((yy + 3 * np.abs((xx % (w // 6)) - w // 12)) // (h // 6)) % 2 == 0)
    tex = np.where(mask[..., None], a, b).astype(np.uint8)
    return tex, f"{names[i]}/{names[j]} {style}"


def novel_instance(category: str, rng: np.random.Generator, tag: str) -> ObjectInstance:
    """A body of ``category`` (a test-split shape, books included) that will wear a :func:`novel_texture` design."""
    pool = instances_of(category, "test")
    shape = pool[int(rng.integers(len(pool)))]
    return ObjectInstance(f"novel_{category}_{tag}", category, "custom", "custom", "novel", shape.radius,
                          shape.height, dict(shape.shape), "")
