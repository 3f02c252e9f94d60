"""Hard look-alikes of a personal object: library distractors for a library object, and for a user's own object
(``personal_texture``) the same print changed in one way, or another photograph on the same body.

A library object gets its hard negatives from the design table (same colour with another pattern, or the reverse:
:func:`library_lookalikes`).
A user's photo has neither a colour name nor a pattern name, so its look-alikes are made from the photo itself, each
on the very same mesh (radius, height, shape) as the user's object:

* ``recoloured`` — the photo with its hue turned by 60-300° (a pale photo is also saturated a little, or turning
  its hue would leave it almost unchanged);
* ``recropped`` — another crop of the photo: a window of 45-70 % of each side, stretched back over the body;
* ``mirrored`` — the print mirrored left-right or turned upside down;
* ``other_photo`` — a different photograph (one that ships inside an installed package) on the same shape.

Every draw comes from the caller's generator, so one episode seed gives the same look-alikes. A candidate that is
too close to the user's print (or to an earlier look-alike), however the body is turned, is redrawn — see
:func:`texture_distance` and ``MIN_DISTANCE``.
"""

from __future__ import annotations

import importlib.resources
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from envs.manipulation.objects import TEXTURE_SIZE, ObjectInstance, load_user_texture

LOOKALIKE_KINDS: tuple[str, ...] = ("recoloured", "recropped", "mirrored", "other_photo")
# Mean absolute difference (0-1 scale) below which two prints count as the same object. A hue turn of a colourful
# photo, another crop or a mirrored print is far above it; a mirror of a near-symmetric photo may not be.
MIN_DISTANCE = 0.04
_ROLLS = 16  # the body can stand at any yaw: compare prints under this many turns of the u axis
_ATTEMPTS = 6  # redraws of one kind before the next kind is tried


def stock_photo_paths() -> list[Path]:
    """Photographs that ship inside installed packages: matplotlib's sample data (always installed) and
    scikit-learn's two sample images (when the ``aux`` extra is installed), in that order."""
    import matplotlib

    sample = Path(matplotlib.get_data_path()) / "sample_data"
    paths = [sample / name for name in ("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png")]
    try:
        images = importlib.resources.files("sklearn.datasets") / "images"
        paths += [Path(str(images / name)) for name in ("china.jpg", "flower.jpg")]
    except ModuleNotFoundError:  # scikit-learn is optional: matplotlib's photos still give "other_photo" look-alikes
        pass
    return [p for p in paths if p.is_file()]


@lru_cache(maxsize=8)
def _stock_texture(path: str) -> np.ndarray:
    tex = load_user_texture(path)
    tex.setflags(write=False)  # shared by every episode of the process
    return tex


def texture_distance(a: np.ndarray, b: np.ndarray) -> float:
    """How different two prints look on a body at any yaw: the smallest mean absolute difference (0-1) over
    ``_ROLLS`` turns of ``b`` around the body (columns wrap around the object)."""
    a16, b16 = a.astype(np.int16), b.astype(np.int16)
    step = a.shape[1] // _ROLLS
    return min(float(np.abs(a16 - np.roll(b16, k * step, axis=1)).mean()) / 255.0 for k in range(_ROLLS))


def recolour(texture: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The print with its hue turned by 60-300°; a pale print (mean saturation < 0.25) is saturated to ~0.35 first."""
    hsv = np.asarray(Image.fromarray(texture).convert("HSV"), np.float32)
    hsv[..., 0] = (hsv[..., 0] + rng.uniform(60.0, 300.0) * 256.0 / 360.0) % 256.0
    mean_s = float(hsv[..., 1].mean()) / 255.0
    if mean_s < 0.25:  # a grey-ish photo: turning its hue alone would change almost nothing
        hsv[..., 1] = np.clip(hsv[..., 1] + (0.35 - mean_s) * 255.0, 0, 255)
    return np.asarray(Image.fromarray(hsv.astype(np.uint8), "HSV").convert("RGB"), np.uint8).copy()


def recrop(texture: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Another crop of the print (45-70 % of each side, anywhere in it), stretched back to the texture size."""
    h, w = texture.shape[:2]
    ch, cw = int(h * rng.uniform(0.45, 0.7)), int(w * rng.uniform(0.45, 0.7))
    y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    crop = Image.fromarray(texture[y0:y0 + ch, x0:x0 + cw]).resize((TEXTURE_SIZE[1], TEXTURE_SIZE[0]),
                                                                    Image.BILINEAR)
    return np.asarray(crop, np.uint8).copy()


def mirror(texture: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The print mirrored left-right, or turned upside down (half the draws each)."""
    return np.ascontiguousarray(texture[:, ::-1] if rng.random() < 0.5 else texture[::-1, ::-1])


def other_photo(texture: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    """A different stock photograph (seeded choice among those that differ from ``texture``); None if none does."""
    photos = [_stock_texture(str(p)) for p in stock_photo_paths()]
    photos = [t for t in photos if texture_distance(texture, t) >= MIN_DISTANCE]
    return None if not photos else photos[int(rng.integers(len(photos)))].copy()


def library_lookalikes(target: ObjectInstance, others: list[ObjectInstance], count: int, rng: np.random.Generator,
                       ) -> list[ObjectInstance]:
    """Up to ``count`` same-category distractors for a library ``target``, drawn from ``others`` (its category's other
    instances): at least one hard negative (same colour with another pattern, or the same pattern in another colour)
    when ``others`` holds one, the rest a seeded sample of the remaining instances."""
    count = min(count, len(others))
    chosen: list[ObjectInstance] = []
    hard = [i for i in others if i.colour == target.colour or i.pattern == target.pattern]
    if count > 0 and hard:
        chosen.append(hard[int(rng.integers(len(hard)))])
    rest = [i for i in others if i not in chosen]
    order = rng.permutation(len(rest))
    return chosen + [rest[j] for j in order[: count - len(chosen)]]


_MAKERS = {"recoloured": recolour, "recropped": recrop, "mirrored": mirror, "other_photo": other_photo}


def user_lookalikes(user: ObjectInstance, texture: np.ndarray, count: int, rng: np.random.Generator,
                    ) -> list[tuple[ObjectInstance, np.ndarray]]:
    """``count`` look-alikes of a user object (its instance and print) as ``(instance, texture)`` pairs.

    Kinds are taken in a seeded order of ``LOOKALIKE_KINDS`` (each once before any repeats), every look-alike on
    the user's own mesh. A draw closer than ``MIN_DISTANCE`` to the user's print or an earlier look-alike is redrawn
    (up to ``_ATTEMPTS`` times, then that kind is skipped), so fewer than ``count`` come back only when no kind can
    make a different print (a blank image).
    """
    order = [LOOKALIKE_KINDS[int(i)] for i in rng.permutation(len(LOOKALIKE_KINDS))]
    out: list[tuple[ObjectInstance, np.ndarray]] = []
    seen = [texture]
    for slot in range(count * len(LOOKALIKE_KINDS)):
        if len(out) >= count:
            break
        kind = order[slot % len(order)]
        for _ in range(_ATTEMPTS):
            made = _MAKERS[kind](texture, rng)
            if made is not None and all(texture_distance(s, made) >= MIN_DISTANCE for s in seen):
                inst = ObjectInstance(f"{user.instance_id}-{kind}{len(out)}", user.category, "custom", "custom",
                                      "user_lookalike", user.radius, user.height, dict(user.shape), "")
                out.append((inst, made))
                seen.append(made)
                break
    return out
