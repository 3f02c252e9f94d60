"""Procedural RGB-D tabletop frames (numpy only) for exercising perception without a simulator.

A tilted camera looks at a table plane; objects are shaded vertical cylinders (optionally with a mug handle) whose
surface carries a per-instance colour and pattern, so same-category instances differ only in appearance. Each
frame comes with metric depth, an instance segmentation (0 = table, 1.. = objects, 99 = gripper) and, for any
object, reference views rendered alone on a plain background at other scales/angles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

GRIPPER_ID = 99
PATTERNS = ("plain", "stripes", "band", "dots", "checks")


@dataclass(frozen=True)
class SyntheticObject:
    """One cylinder-like object: where it stands (pixels), its size, colours and surface pattern."""

    u: float  # image x of the base centre
    v: float  # image y of the base centre
    radius: float  # pixels
    height: float  # pixels
    colour: tuple[int, int, int]
    pattern: str = "plain"
    accent: tuple[int, int, int] = (245, 245, 245)
    handle: bool = True
    phase: float = 0.0  # rotation of the pattern around the axis (radians)


@dataclass
class SyntheticFrame:
    """A rendered frame: image, metric depth, instance segmentation (object k has id k + 1)."""

    image: np.ndarray
    depth: np.ndarray
    segmentation: np.ndarray
    objects: list[SyntheticObject] = field(default_factory=list)


def table_depth(h: int, w: int, near: float = 0.6, far: float = 1.4) -> np.ndarray:
    """Depth of a plane seen by a tilted camera: inverse depth is affine in the image row."""
    rows = np.linspace(0.0, 1.0, h)[:, None]
    inv = 1.0 / far + (1.0 / near - 1.0 / far) * rows
    return np.broadcast_to(1.0 / inv, (h, w)).astype(np.float32).copy()


def _surface(obj: SyntheticObject, theta: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Albedo (…×3 float in [0,1]) of the cylinder surface at angle theta and relative height t (0 base, 1 rim)."""
    base = np.asarray(obj.colour, np.float32) / 255.0
    accent = np.asarray(obj.accent, np.float32) / 255.0
    a = theta + obj.phase
    if obj.pattern == "plain":
        sel = np.zeros_like(t, dtype=bool)
    elif obj.pattern == "stripes":
        sel = np.sin(a * 6.0) > 0.3
    elif obj.pattern == "band":
        sel = (t > 0.4) & (t < 0.65)
    elif obj.pattern == "dots":
        sel = (np.sin(a * 8.0) * np.sin(t * 18.0)) > 0.55
    elif obj.pattern == "checks":
        sel = (np.sin(a * 5.0) * np.sin(t * 12.0)) > 0.0
    else:
        raise ValueError(f"unknown pattern {obj.pattern!r}; valid: {', '.join(PATTERNS)}")
    return np.where(sel[..., None], accent, base)


def _draw(image: np.ndarray, depth: np.ndarray, seg: np.ndarray, obj: SyntheticObject, oid: int,
          base_depth: float) -> None:
    h, w = seg.shape
    r, ht = obj.radius, obj.height
    ell = 0.35 * r  # ellipse half-height of the circular cross-section seen from above at a tilt
    y0, y1 = int(max(0, obj.v - ht - ell - 1)), int(min(h, obj.v + ell + 2))
    x0, x1 = int(max(0, obj.u - 1.8 * r - 1)), int(min(w, obj.u + 1.8 * r + 2))
    if y0 >= y1 or x0 >= x1:
        return
    yy, xx = np.mgrid[y0:y1, x0:x1].astype(np.float32)
    dx = (xx - obj.u) / r
    inside_x = np.abs(dx) <= 1.0
    # The body spans from the base ellipse up to the rim ellipse.
    yb = obj.v + ell * np.sqrt(np.clip(1 - dx**2, 0, 1))
    yt = obj.v - ht - ell * np.sqrt(np.clip(1 - dx**2, 0, 1))
    body = inside_x & (yy <= yb) & (yy >= yt)
    theta = np.arcsin(np.clip(dx, -1, 1))
    t = np.clip((obj.v - yy) / ht, 0, 1)
    albedo = _surface(obj, theta, t)
    shade = 0.35 + 0.65 * np.clip(np.cos(theta - 0.5), 0, 1)  # light from the upper right
    rgb = albedo * shade[..., None]
    # Dark interior visible through the rim (the object's opening).
    rim = inside_x & (((yy - (obj.v - ht)) / ell) ** 2 + dx**2 <= 1.0)
    rgb = np.where(rim[..., None], albedo * 0.3, rgb)
    mask = body | rim
    if obj.handle:
        hx = (xx - (obj.u + 1.15 * r)) / (0.45 * r)
        hy = (yy - (obj.v - 0.5 * ht)) / (0.3 * ht)
        ring = (hx**2 + hy**2 <= 1.0) & (hx**2 + hy**2 >= 0.35) & (xx > obj.u + 0.9 * r)
        handle = ring & ~mask
        rgb = np.where(handle[..., None], albedo * 0.8, rgb)
        mask = mask | handle
    z = base_depth - 0.02 * np.cos(theta)  # the front of the cylinder is closest
    z = z - 0.0005 * (obj.v - yy)  # points higher on the object are slightly nearer the camera than the base
    sub_img, sub_depth, sub_seg = image[y0:y1, x0:x1], depth[y0:y1, x0:x1], seg[y0:y1, x0:x1]
    sub_img[mask] = np.clip(rgb[mask] * 255.0, 0, 255).astype(np.uint8)
    sub_depth[mask] = z[mask]
    sub_seg[mask] = oid


def render_scene(objects: list[SyntheticObject], size: tuple[int, int] = (128, 128),
                 table_rgb: tuple[int, int, int] = (150, 120, 90), gripper: tuple[float, float, float] | None = None,
                 rng: np.random.Generator | None = None) -> SyntheticFrame:
    """Render objects (far ones first) on the table; ``gripper`` = (u, v, half_width) draws a grey occluder."""
    h, w = size
    depth = table_depth(h, w)
    grain = np.zeros((h, w), np.float32) if rng is None else rng.normal(0.0, 4.0, (h, w)).astype(np.float32)
    rows = np.linspace(0.85, 1.1, h)[:, None, None]  # the near table edge is a little brighter
    image = np.clip(np.asarray(table_rgb, np.float32) * rows + grain[..., None], 0, 255).astype(np.uint8)
    seg = np.zeros((h, w), np.int32)
    for k in sorted(range(len(objects)), key=lambda i: objects[i].v):
        obj = objects[k]
        row = int(np.clip(round(obj.v), 0, h - 1))
        _draw(image, depth, seg, obj, k + 1, float(depth[row, 0]) - 0.01)
    if gripper is not None:
        gu, gv, half = gripper
        y1, x0, x1 = int(min(h, gv)), int(max(0, gu - half)), int(min(w, gu + half))
        image[0:y1, x0:x1] = (70, 70, 75)
        depth[0:y1, x0:x1] = 0.45
        seg[0:y1, x0:x1] = GRIPPER_ID
    return SyntheticFrame(image=image, depth=depth, segmentation=seg, objects=list(objects))


def reference_views(obj: SyntheticObject, n: int, rng: np.random.Generator, size: int = 96,
                    background: tuple[int, int, int] = (235, 235, 235)) -> list[np.ndarray]:
    """``n`` images of one object alone on a plain background, at random scale and pattern rotation."""
    views = []
    for _ in range(n):
        scale = rng.uniform(1.6, 2.4)
        view = SyntheticObject(u=size / 2 + rng.uniform(-4, 4), v=size * 0.5 + obj.height * scale * 0.5,
                               radius=obj.radius * scale, height=obj.height * scale, colour=obj.colour,
                               pattern=obj.pattern, accent=obj.accent, handle=obj.handle,
                               phase=obj.phase + rng.uniform(-0.6, 0.6))
        frame = render_scene([view], size=(size, size), table_rgb=background)
        views.append(frame.image)
    return views


def random_instances(rng: np.random.Generator, n: int, size: tuple[int, int] = (128, 128),
                     same_colour: bool = False) -> list[SyntheticObject]:
    """``n`` non-overlapping same-category instances with distinct pattern/colour combinations."""
    h, w = size
    palette = [(200, 40, 40), (40, 90, 200), (40, 160, 70), (220, 190, 40), (150, 60, 170), (230, 120, 30),
               (235, 235, 235), (60, 60, 60)]
    combos = rng.permutation([(c, p) for c in range(len(palette)) for p in range(len(PATTERNS))])
    base_colour = int(rng.integers(len(palette)))
    chosen, used = [], set()
    for c, p in combos:
        c = base_colour if same_colour else int(c)
        if (c, int(p)) in used or (not same_colour and any(c == u[0] for u in used)):
            continue
        used.add((c, int(p)))
        chosen.append((c, int(p)))
        if len(chosen) == n:
            break
    slots = np.linspace(0.2 * w, 0.8 * w, n) + rng.uniform(-3, 3, n)
    objs = []
    for (c, p), u in zip(chosen, rng.permutation(slots), strict=True):
        accent = (245, 245, 245) if palette[c] != (235, 235, 235) else (30, 30, 30)
        objs.append(SyntheticObject(u=float(u), v=float(rng.uniform(0.55 * h, 0.75 * h)),
                                    radius=float(rng.uniform(0.055, 0.07) * w),
                                    height=float(rng.uniform(0.16, 0.2) * h),
                                    colour=palette[c], pattern=PATTERNS[p], accent=accent,
                                    phase=float(rng.uniform(0, np.pi))))
    return objs
