"""The procedural object library: categories, instances (colour, pattern, shape, scale), textures and meshes.

Every instance is generated deterministically from its category and index, so the library, its train/test split
and the meshes/textures on disk are identical on every machine. Meshes are surfaces of revolution (or boxes) with
texture coordinates (u around the body, v up the side), built as ``trimesh`` meshes and written once to a cache
folder; textures are small RGB arrays painted with numpy/PIL.
"""

from __future__ import annotations

import hashlib
import os
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import trimesh
from PIL import Image, ImageDraw, ImageFont

from envs.atomic_io import write_text_atomic
from envs.errors import ConfigError, choice_error
from envs.paths import mesh_cache

# A small, well-separated colour vocabulary (names used in instructions → RGB 0..255). Exported for the generic
# VLA and for VAP's prompter, which recolours the personal object to one of these and names it.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 30, 30),
    "green": (40, 160, 50),
    "blue": (35, 70, 200),
    "yellow": (235, 205, 30),
    "orange": (240, 120, 20),
    "purple": (130, 45, 170),
    "white": (235, 235, 230),
    "black": (30, 30, 32),
}
# Patterns are coarse on purpose: an object is ~25-40 px wide at 224x224, so fine detail would be invisible.
PATTERNS: tuple[str, ...] = ("plain", "striped", "dotted", "checked", "banded", "lettered")
# Adjectives used in instructions ("the blue striped mug", "the red mug with letters").
PATTERN_WORDS: dict[str, str] = {
    "plain": "plain", "striped": "striped", "dotted": "dotted", "checked": "checked", "banded": "banded",
    "lettered": "lettered",
}
CATEGORIES: tuple[str, ...] = ("mug", "cup", "bowl", "bottle", "can", "box")
INSTANCES_PER_CATEGORY = 18  # indices 0-9 train, 10-17 test
TEXTURE_SIZE = (128, 256)  # (height, width) of every texture; u (width) wraps around the object
# A user texture is downsampled to TEXTURE_SIZE anyway; a larger image is refused from its header, before decoding,
# so a huge or decompression-bomb file cannot exhaust memory.
MAX_TEXTURE_SIDE = 8192
MAX_TEXTURE_PIXELS = 4096 * 4096
_LETTER_WORDS = ("ANNA", "MAX", "LEO", "MIA", "SAM", "ZOE", "BEN", "EVA")


@dataclass(frozen=True)
class ObjectInstance:
    """One object of the library: what it looks like, how big it is and which split it belongs to."""

    instance_id: str  # e.g. "mug_07"
    category: str
    colour: str  # key of COLOURS (the base colour named in instructions)
    pattern: str  # one of PATTERNS
    split: str  # "train" or "test"
    radius: float  # metres (half the width for boxes)
    height: float  # metres
    shape: dict[str, float] = field(default_factory=dict, compare=False, hash=False)  # category-specific extras
    word: str = ""  # printed text for the "lettered" pattern

    @property
    def attributes(self) -> dict[str, str]:
        """Visible attributes that generic instructions may name."""
        return {"colour": self.colour, "pattern": self.pattern, "category": self.category}

    @property
    def mass(self) -> float:
        """A light, graspable mass in kg (heavier for bigger objects, always well within the gripper's force)."""
        return float(0.06 + 0.6 * self.height)


def _contrast(colour: str) -> tuple[int, int, int]:
    """Pattern ink: white on dark bases, near-black on light ones."""
    return (25, 25, 25) if colour in ("white", "yellow", "orange") else (245, 245, 240)


# Per-category (colour, pattern) designs. Test designs come in hard-negative pairs (same colour, different pattern
# and same pattern, different colour); train designs use other combinations (also with same-colour pairs, so a
# generic policy must read patterns) and cover every colour and pattern word, so a generic policy never sees a test
# instance yet knows the whole vocabulary (VAP recolours the personal object to a trained colour).
_TRAIN_DESIGNS: tuple[tuple[str, str], ...] = (
    ("red", "plain"), ("red", "dotted"), ("blue", "banded"), ("blue", "checked"), ("green", "striped"),
    ("yellow", "lettered"), ("orange", "checked"), ("purple", "striped"), ("white", "dotted"), ("black", "banded"),
)
_TEST_DESIGNS: tuple[tuple[str, str], ...] = (
    ("blue", "striped"), ("blue", "dotted"), ("red", "striped"), ("red", "checked"),
    ("green", "dotted"), ("green", "lettered"), ("yellow", "checked"), ("yellow", "banded"),
)
# Shape ranges (radius, height) per category in metres; radii stay below the Panda's 8 cm opening.
_SHAPE_RANGES: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "mug": ((0.030, 0.036), (0.075, 0.095)),
    "cup": ((0.028, 0.034), (0.070, 0.090)),
    "bowl": ((0.032, 0.036), (0.035, 0.045)),
    "bottle": ((0.024, 0.029), (0.130, 0.160)),
    "can": ((0.028, 0.033), (0.095, 0.115)),
    "box": ((0.022, 0.030), (0.045, 0.070)),
}


# Every other (colour, pattern) combination: neither a train nor a test design. Extra *training* instances with
# these designs (split "train_extra", outside LIBRARY) give a policy many more colour x pattern combinations to
# learn the words from, without ever showing it a test design.
_EXTRA_DESIGNS: tuple[tuple[str, str], ...] = tuple(
    (c, p) for c in COLOURS for p in PATTERNS if (c, p) not in _TRAIN_DESIGNS and (c, p) not in _TEST_DESIGNS)
SPLITS: tuple[str, ...] = ("train", "test", "train_extended")  # train_extended = train + train_extra instances


def _make_instance(category: str, index: int, extra: bool = False) -> ObjectInstance:
    if extra:
        split, designs, local, tag = "train_extra", _EXTRA_DESIGNS, index, "x"
    else:
        split = "train" if index < len(_TRAIN_DESIGNS) else "test"
        designs = _TRAIN_DESIGNS if split == "train" else _TEST_DESIGNS
        local = index if split == "train" else index - len(_TRAIN_DESIGNS)
        tag = ""
    # Rotate the design list per category so instance numbers do not mean the same design in every category.
    offset = CATEGORIES.index(category)
    colour, pattern = designs[(local + offset) % len(designs)]
    seed = int(hashlib.sha256(f"{category}/{tag}{index}".encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    (r_lo, r_hi), (h_lo, h_hi) = _SHAPE_RANGES[category]
    radius, height = float(rng.uniform(r_lo, r_hi)), float(rng.uniform(h_lo, h_hi))
    shape: dict[str, float] = {}
    if category == "cup":
        shape["taper"] = float(rng.uniform(0.70, 0.85))  # bottom radius / top radius
    elif category == "bowl":
        shape["base"] = float(rng.uniform(0.45, 0.6))
    elif category == "bottle":
        shape["neck"] = float(rng.uniform(0.35, 0.45))
        shape["shoulder"] = float(rng.uniform(0.6, 0.72))
    elif category == "mug":
        shape["handle"] = float(rng.uniform(0.45, 0.6))  # handle height / body height
    elif category == "box":
        shape["depth"] = float(rng.uniform(0.75, 1.0))  # y half-size / x half-size
    word = _LETTER_WORDS[(index + offset) % len(_LETTER_WORDS)]
    return ObjectInstance(f"{category}_{tag}{index:02d}", category, colour, pattern, split, radius, height, shape,
                          word)


def build_library() -> dict[str, ObjectInstance]:
    """All instances of all categories, keyed by instance id (deterministic)."""
    return {inst.instance_id: inst for c in CATEGORIES for inst in
            (_make_instance(c, i) for i in range(INSTANCES_PER_CATEGORY))}


LIBRARY: dict[str, ObjectInstance] = build_library()
# Training-only extras (ids like "mug_x07"): one instance per extra design and category. Kept out of LIBRARY, so
# everything defined on the library (personal objects, the soft-prompt fit, the train/test split) is unchanged.
EXTRA_TRAIN: dict[str, ObjectInstance] = {inst.instance_id: inst for c in CATEGORIES for inst in
                                          (_make_instance(c, i, extra=True) for i in range(len(_EXTRA_DESIGNS)))}


def find_instance(instance_id: str) -> ObjectInstance:
    """A library or extra training instance by id."""
    inst = LIBRARY.get(instance_id) or EXTRA_TRAIN.get(instance_id)
    if inst is None:
        raise ConfigError(f"unknown object instance {instance_id!r}")
    return inst


def instances(category: str, split: str | None = None) -> list[ObjectInstance]:
    """Instances of ``category`` (optionally of one split); raises ConfigError for an unknown category.

    ``split="train_extended"``: the train instances plus the extra training designs (never a test design).
    """
    if category not in CATEGORIES:
        raise choice_error("object category", category, CATEGORIES)
    if split not in (None, *SPLITS):
        raise choice_error("split", split, SPLITS)
    if split == "train_extended":
        return instances(category, "train") + [i for i in EXTRA_TRAIN.values() if i.category == category]
    found = [i for i in LIBRARY.values() if i.category == category and (split is None or i.split == split)]
    if not found:
        raise ConfigError(f"category {category!r} has no instances in split {split!r}")
    return found


# ---------------------------------------------------------------------------------------------------- textures

def make_texture(inst: ObjectInstance) -> np.ndarray:
    """The instance's texture as uint8 (H, W, 3); u (columns) wraps around the object, v (rows) runs top→bottom."""
    h, w = TEXTURE_SIZE
    base = np.array(COLOURS[inst.colour], np.uint8)
    ink = np.array(_contrast(inst.colour), np.uint8)
    tex = np.empty((h, w, 3), np.uint8)
    tex[:] = base
    yy, xx = np.mgrid[0:h, 0:w]
    # The top/bottom ~12 % of v maps to caps/rims; patterns live on the side band.
    if inst.pattern == "striped":  # 4 broad horizontal stripes
        mask = ((yy // (h // 8)) % 2 == 1)
    elif inst.pattern == "dotted":  # large polka dots, 6 around
        cx, cy = (xx % (w // 6)) - w // 12, (yy % (h // 3)) - h // 6
        mask = cx * cx + cy * cy < (min(w // 6, h // 3) * 0.33) ** 2
    elif inst.pattern == "checked":
        mask = ((xx // (w // 8)) + (yy // (h // 4))) % 2 == 1
    elif inst.pattern == "banded":  # one wide band in the middle, framed by thin lines
        mask = (np.abs(yy - h / 2) < h * 0.16) | (np.abs(np.abs(yy - h / 2) - h * 0.27) < h * 0.03)
    else:
        mask = np.zeros((h, w), bool)
    tex[mask] = ink
    if inst.pattern == "lettered":  # a white label with large printed text, twice around
        img = Image.fromarray(tex)
        draw = ImageDraw.Draw(img)
        font = label_font(int(h * 0.38))
        for k in range(2):
            x0 = k * w // 2
            draw.rectangle([x0 + 6, int(h * 0.25), x0 + w // 2 - 6, int(h * 0.75)], fill=tuple(int(c) for c in ink))
            draw.text((x0 + w // 4, h // 2), inst.word, fill=tuple(int(c) for c in base), font=font, anchor="mm")
        tex = np.asarray(img, np.uint8).copy()
    return tex


def label_font(size: int) -> ImageFont.ImageFont:
    """PIL's default font at ``size`` pixels (the fixed-size one on Pillow < 10.1), for text printed on textures."""
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has no sized default font
        return ImageFont.load_default()


def load_user_texture(path: str | os.PathLike) -> np.ndarray:
    """A user's texture image resized to the library's texture size; ConfigError if it cannot be read or its header
    declares more than ``MAX_TEXTURE_PIXELS`` pixels (or a side over ``MAX_TEXTURE_SIDE``)."""
    return load_user_image(path, "personal_texture", (TEXTURE_SIZE[1], TEXTURE_SIZE[0]))


def load_user_image(path: str | os.PathLike, what: str, size: tuple[int, int] | int) -> np.ndarray:
    """A user's image file as uint8 RGB: resized to ``size`` (width, height), or, for an int, so that its longer
    side is ``size`` (aspect kept). ConfigError naming ``what`` (the option it came from) if it cannot be read or
    its header declares more than ``MAX_TEXTURE_PIXELS`` pixels (or a side over ``MAX_TEXTURE_SIDE``)."""
    cap = f"the cap of {MAX_TEXTURE_PIXELS} pixels ({MAX_TEXTURE_SIDE} px a side); resize it first"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:  # reads the header only
                width, height = img.size
                if width * height > MAX_TEXTURE_PIXELS or max(width, height) > MAX_TEXTURE_SIDE:
                    raise ConfigError(f"{what} {str(path)!r} is {width}x{height}, over {cap}")
                if isinstance(size, int):
                    scale = size / max(width, height, 1)
                    size = (max(1, round(width * scale)), max(1, round(height * scale)))
                rgb = img.convert("RGB").resize(size, Image.BILINEAR)
                return np.asarray(rgb, np.uint8).copy()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ConfigError(f"{what} {str(path)!r} is over {cap}") from None
    except ConfigError:
        raise
    # Decoders report a truncated or malformed file in several ways; all mean the user's file is unreadable.
    except (OSError, ValueError, SyntaxError, EOFError, struct.error) as exc:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {type(exc).__name__}; expected a PNG or "
                          f"JPEG image") from exc


# ---------------------------------------------------------------------------------------------------- meshes

def _revolution(profile: list[tuple[float, float]], segments: int = 28, v_range: tuple[float, float] = (0.0, 1.0),
                ) -> trimesh.Trimesh:
    """A surface of revolution about z from (radius, z) points (bottom→top), with UVs (u around, v by arc length)."""
    prof = np.asarray(profile, float)
    seg = np.linalg.norm(np.diff(prof, axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(seg)]) / max(seg.sum(), 1e-9)
    v = v_range[0] + arc * (v_range[1] - v_range[0])
    angles = np.linspace(0.0, 2 * np.pi, segments + 1)  # duplicated seam column so u runs 0..1
    verts, uvs = [], []
    for (r, z), vv in zip(prof, v, strict=True):
        for k, a in enumerate(angles):
            verts.append((r * np.cos(a), r * np.sin(a), z))
            uvs.append((k / segments, vv))
    faces = []
    n = segments + 1
    for i in range(len(prof) - 1):
        for k in range(segments):
            a, b, c, d = i * n + k, i * n + k + 1, (i + 1) * n + k, (i + 1) * n + k + 1
            faces += [(a, b, d), (a, d, c)]
    return _textured(np.array(verts), np.array(faces), np.array(uvs))


def _textured(verts: np.ndarray, faces: np.ndarray, uvs: np.ndarray) -> trimesh.Trimesh:
    visual = trimesh.visual.TextureVisuals(uv=uvs)
    return trimesh.Trimesh(vertices=verts, faces=faces, visual=visual, process=False)


def _disc(radius: float, z: float, up: bool, v: float = 0.02, segments: int = 28) -> trimesh.Trimesh:
    """A flat cap; its UVs sample one texture row (the rim colour)."""
    angles = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    verts = [(0.0, 0.0, z)] + [(radius * np.cos(a), radius * np.sin(a), z) for a in angles]
    faces = [(0, 1 + k, 1 + (k + 1) % segments) if up else (0, 1 + (k + 1) % segments, 1 + k)
             for k in range(segments)]
    uvs = [(0.5, v)] + [(k / segments, v) for k in range(segments)]
    return _textured(np.array(verts), np.array(faces), np.array(uvs))


def _handle(r: float, h: float, frac: float) -> trimesh.Trimesh:
    """A mug handle: a tube along a half-ellipse on the +x side."""
    tube, ring, pts = 0.006, 8, 12
    half = h * frac / 2
    zc = h * 0.52
    verts, uvs, faces = [], [], []
    for i in range(pts + 1):
        t = -np.pi / 2 + np.pi * i / pts
        cx, cz = r * 0.9 + 0.022 * np.cos(t), zc + half * np.sin(t)
        tx, tz = -0.022 * np.sin(t), half * np.cos(t)
        nrm = np.array([tz, 0.0, -tx]) / max(np.hypot(tx, tz), 1e-9)
        for k in range(ring):
            a = 2 * np.pi * k / ring
            off = tube * (np.cos(a) * nrm + np.sin(a) * np.array([0.0, 1.0, 0.0]))
            verts.append((cx + off[0], off[1], cz + off[2]))
            uvs.append((0.5, 0.5))
    for i in range(pts):
        for k in range(ring):
            a, b = i * ring + k, i * ring + (k + 1) % ring
            c, d = a + ring, b + ring
            faces += [(a, b, d), (a, d, c)]
    return _textured(np.array(verts), np.array(faces), np.array(uvs))


def _box(hx: float, hy: float, h: float) -> trimesh.Trimesh:
    """A box standing on z=0; the four sides wrap the texture once around, top/bottom sample the top row."""
    corners = [(hx, hy), (-hx, hy), (-hx, -hy), (hx, -hy), (hx, hy)]
    perim = np.concatenate([[0.0], np.cumsum([np.hypot(corners[i + 1][0] - corners[i][0],
                                                       corners[i + 1][1] - corners[i][1]) for i in range(4)])])
    perim /= perim[-1]
    verts, uvs, faces = [], [], []
    for i in range(4):  # separate vertices per face so UV seams are sharp
        (x0, y0), (x1, y1) = corners[i], corners[i + 1]
        base = len(verts)
        verts += [(x0, y0, 0.0), (x1, y1, 0.0), (x1, y1, h), (x0, y0, h)]
        uvs += [(perim[i], 1.0), (perim[i + 1], 1.0), (perim[i + 1], 0.0), (perim[i], 0.0)]
        faces += [(base, base + 1, base + 2), (base, base + 2, base + 3)]
    side = _textured(np.array(verts), np.array(faces), np.array(uvs))
    top = _textured(np.array([(hx, hy, h), (-hx, hy, h), (-hx, -hy, h), (hx, -hy, h)]),
                    np.array([(0, 1, 2), (0, 2, 3)]), np.array([(0.1, 0.5), (0.4, 0.5), (0.4, 0.6), (0.1, 0.6)]))
    return trimesh.util.concatenate([side, top])


def category_mesh(category: str, radius: float, height: float, shape: dict[str, float]) -> trimesh.Trimesh:
    """The visual mesh of one instance, standing on z=0 and centred on the z axis (metres)."""
    r, h = radius, height
    if category == "mug":
        parts = [_revolution([(r, 0.0), (r, h)], v_range=(0.98, 0.02)),
                 _revolution([(r, h), (r * 0.88, h), (r * 0.88, h * 0.1)], v_range=(0.02, 0.02)),
                 _disc(r, 0.0, up=False, v=0.98), _disc(r * 0.88, h * 0.1, up=True, v=0.02),
                 _handle(r, h, shape.get("handle", 0.5))]
    elif category == "cup":
        rb = r * shape.get("taper", 0.78)
        parts = [_revolution([(rb, 0.0), (r, h)], v_range=(0.98, 0.02)),
                 _revolution([(r, h), (r * 0.9, h), (rb * 0.9, h * 0.08)], v_range=(0.02, 0.02)),
                 _disc(rb, 0.0, up=False, v=0.98), _disc(rb * 0.9, h * 0.08, up=True, v=0.02)]
    elif category == "bowl":
        rb = r * shape.get("base", 0.5)
        prof = [(rb, 0.0)] + [(rb + (r - rb) * np.sin(t), h * (1 - np.cos(t))) for t in np.linspace(0.2, np.pi / 2, 5)]
        inner = [(x * 0.88, max(z, h * 0.12)) for x, z in reversed(prof)]
        parts = [_revolution(prof, v_range=(0.98, 0.02)), _revolution([prof[-1]] + inner, v_range=(0.02, 0.02)),
                 _disc(rb, 0.0, up=False, v=0.98),
                 _disc(rb * 0.88, h * 0.12, up=True, v=0.5)]
    elif category == "bottle":
        neck, sh = r * shape.get("neck", 0.4), h * shape.get("shoulder", 0.66)
        prof = [(r, 0.0), (r, sh), (r * 0.75, sh + 0.12 * h), (neck, sh + 0.2 * h), (neck, h), (0.0, h)]
        parts = [_revolution(prof, v_range=(0.98, 0.0)), _disc(r, 0.0, up=False, v=0.98)]
    elif category == "can":
        prof = [(0.0, 0.0), (r * 0.95, 0.0), (r, 0.006), (r, h - 0.006), (r * 0.95, h), (0.0, h)]
        parts = [_revolution(prof, v_range=(1.0, 0.0))]
    elif category in ("box", "book"):  # a book (VLABench tasks only) is a thin box with a printed cover
        return _box(r, r * shape.get("depth", 1.0), h)
    elif category == "apple":
        rr = r
        prof = [(0.0, 0.0)] + [(rr * np.sin(t) * (1.0 + 0.08 * np.sin(t)), rr * (1 - np.cos(t)))
                              for t in np.linspace(0.15, np.pi - 0.15, 9)] + [(0.0, 2 * rr * 0.97)]
        parts = [_revolution(prof, v_range=(1.0, 0.0))]
    elif category == "plate":
        prof = [(0.0, 0.0), (r * 0.7, 0.0), (r, h), (r * 0.92, h), (r * 0.65, h * 0.45), (0.0, h * 0.45)]
        parts = [_revolution(prof, segments=36, v_range=(0.0, 1.0))]
    else:
        raise choice_error("object category", category, CATEGORIES)
    return trimesh.util.concatenate(parts)


def mesh_cache_dir() -> Path:
    """Where generated OBJ files live (:func:`envs.paths.mesh_cache`), created on first use."""
    path = mesh_cache()
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_obj(mesh: trimesh.Trimesh, key: str) -> str:
    """Write ``mesh`` (positions, normals, UVs) as an OBJ named by a hash of ``key``; return its path.

    pybullet's OBJ loader wants v/vt/vn per corner; writing it ourselves keeps the UV seam duplicates intact.
    The write is atomic (temp file + rename), so parallel workers can share the cache.
    """
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = mesh_cache_dir() / f"{digest}.obj"
    if path.exists():
        return str(path)
    uv = np.asarray(mesh.visual.uv)
    normals = mesh.vertex_normals
    lines = [f"v {x:.5f} {y:.5f} {z:.5f}" for x, y, z in mesh.vertices]
    lines += [f"vt {u:.5f} {1.0 - v:.5f}" for u, v in uv]  # our v counts image rows top→bottom; OBJ bottom→top
    lines += [f"vn {x:.4f} {y:.4f} {z:.4f}" for x, y, z in normals]
    lines += ["f " + " ".join(f"{i + 1}/{i + 1}/{i + 1}" for i in face) for face in mesh.faces]
    write_text_atomic(path, "\n".join(lines) + "\n")
    return str(path)


def instance_mesh_path(inst: ObjectInstance) -> str:
    """The cached OBJ path of an instance's visual mesh."""
    key = f"v3/{inst.category}/{inst.radius:.5f}/{inst.height:.5f}/{sorted(inst.shape.items())}"
    return write_obj(category_mesh(inst.category, inst.radius, inst.height, inst.shape), key)
