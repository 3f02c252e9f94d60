"""Table-top objects from calibrated RGB-D views: a fused point cloud, the table height, and objects on a top-down grid.

Each view's depth is lifted to world points with its camera pose (position, camera→world rotation, vertical field
of view; the camera looks along its −z with y up, as MuJoCo's cameras do). The table is the most common height
among the points; everything standing on it, seen from any view, is marked on a top-down occupancy grid with the
highest point per cell, and 8-connected regions of the grid are the objects (their footprint, height and main
axis). Fusing the views fills in the sides a single camera does not see, so a footprint's box centre is close to
the object's true centre (a mug's handle widens it by about a centimetre).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from scipy.spatial import ConvexHull, QhullError

from envs.config import Options

Pose = tuple[np.ndarray, np.ndarray, float]  # (position, rotation camera→world, vertical fov in degrees)


def world_points(depth: np.ndarray, pose: Pose, mask: np.ndarray | None = None) -> np.ndarray:
    """World xyz (N×3) of the pixels of ``depth`` (metres along the view axis) inside ``mask`` (all when None)."""
    position, rotation, fovy = pose
    depth = np.asarray(depth, np.float64)
    h, w = depth.shape
    rows, cols = np.nonzero(mask) if mask is not None else np.indices((h, w)).reshape(2, -1)
    d = depth[rows, cols]
    ok = np.isfinite(d) & (d > 1e-6)
    rows, cols, d = rows[ok], cols[ok], d[ok]
    f = (h / 2) / math.tan(math.radians(fovy) / 2)
    cam = np.stack([(cols + 0.5 - w / 2) / f * d, -(rows + 0.5 - h / 2) / f * d, -d], axis=1)
    return cam @ np.asarray(rotation, np.float64).T + np.asarray(position, np.float64)


def view_points(depth: np.ndarray, pose: Pose) -> np.ndarray:
    """World xyz of every pixel of one view (H×W×3, NaN where the depth is invalid), for :func:`pixel_owners`."""
    depth = np.asarray(depth, np.float64)
    h, w = depth.shape
    valid = np.isfinite(depth) & (depth > 1e-6)
    out = np.full((h * w, 3), np.nan)
    out[np.flatnonzero(valid)] = world_points(depth, pose, valid)
    return out.reshape(h, w, 3)


def table_height(points: np.ndarray, bin_m: float = 0.002) -> float:
    """The most common point height (the table fills most of a table-top view), refined to the median of its bin."""
    z = points[:, 2]
    lo = float(np.min(z))
    idx = np.floor((z - lo) / bin_m).astype(np.int64)
    top = int(np.bincount(idx).argmax())
    return float(np.median(z[idx == top]))


@dataclass(frozen=True)
class TabletopObject:
    """One region of the occupancy grid: box centre (x, y), height above the table, footprint and main axis."""

    centre: np.ndarray  # xy, metres: the middle of the footprint's extent along its main and minor axes
    height: float  # highest point above the table
    extent: tuple[float, float]  # footprint length along the main axis and across it (metres)
    axis_yaw: float  # direction of the main axis (radians, in [−π/2, π/2))
    cells: np.ndarray  # xy centres of the occupied cells (K×2), for later narrowing

    @property
    def size(self) -> float:
        """The footprint's larger side."""
        return max(self.extent)


@dataclass(frozen=True)
class GridConfig(Options):
    """Where objects are looked for and how finely."""

    low: tuple[float, float] = (-0.45, -0.2)  # xy bounds of the table-top region (the arm's workspace)
    high: tuple[float, float] = (0.45, 0.45)
    cell: float = 0.004  # metres per grid cell
    min_height: float = 0.003  # above the table: anything lower is table
    max_height: float = 0.25  # below this: higher points are the arm, not objects on the table
    min_cells: int = 12  # smaller regions are noise


def footprint(cells: np.ndarray, height: float) -> TabletopObject:
    """Box centre, extent and main axis of a set of occupied cell centres (principal axes of their xy spread)."""
    mean = cells.mean(axis=0)
    cov = np.cov((cells - mean).T) if len(cells) > 2 else np.eye(2)
    vals, vecs = np.linalg.eigh(cov)
    major = vecs[:, int(np.argmax(vals))]
    minor = np.array([-major[1], major[0]])
    a, b = (cells - mean) @ major, (cells - mean) @ minor
    a_lo, a_hi = np.percentile(a, [1, 99])
    b_lo, b_hi = np.percentile(b, [1, 99])
    centre = mean + major * (a_lo + a_hi) / 2 + minor * (b_lo + b_hi) / 2
    yaw = (math.atan2(major[1], major[0]) + math.pi / 2) % math.pi - math.pi / 2
    return TabletopObject(centre, float(height), (float(a_hi - a_lo), float(b_hi - b_lo)), yaw, cells)


def tabletop_objects(points: Iterable[np.ndarray], table_z: float, config: GridConfig = GridConfig()
                     ) -> list[TabletopObject]:
    """Objects standing on the table, from world points of any number of views (largest footprint first)."""
    pts = np.concatenate([np.asarray(p, np.float64).reshape(-1, 3) for p in points])
    height = pts[:, 2] - table_z
    lo, hi = np.asarray(config.low), np.asarray(config.high)
    keep = (height > config.min_height) & (height < config.max_height) & np.all((pts[:, :2] >= lo)
                                                                             & (pts[:, :2] < hi), axis=1)
    pts, height = pts[keep], height[keep]
    shape = tuple(np.ceil((hi - lo) / config.cell).astype(int))
    ij = np.floor((pts[:, :2] - lo) / config.cell).astype(int)
    grid = np.zeros(shape)
    np.maximum.at(grid, (ij[:, 0], ij[:, 1]), height)
    labels, n = ndimage.label(grid > 0, structure=np.ones((3, 3), bool))
    out = []
    for k, sl in enumerate(ndimage.find_objects(labels), start=1):
        region = labels[sl] == k
        if region.sum() < config.min_cells:
            continue
        ii, jj = np.nonzero(region)
        ii, jj = ii + sl[0].start, jj + sl[1].start
        cells = lo + (np.stack([ii, jj], axis=1) + 0.5) * config.cell
        out.append(footprint(cells, float(grid[ii, jj].max())))
    return sorted(out, key=lambda o: -len(o.cells))


def pixel_owners(points: np.ndarray, table_z: float, objects: list[TabletopObject], reach: float = 0.012,
                 config: GridConfig = GridConfig()) -> np.ndarray:
    """Which object each pixel of one view shows: ``points`` (H×W×3, that view's pixels lifted to world by
    :func:`view_points`) → H×W indices into ``objects`` (−1: table, background or
    nothing within ``reach`` metres of a footprint cell). A pixel above the table belongs to the footprint whose
    nearest cell lies under it: the objects' sides and tops, seen in the image, are told apart by where they stand."""
    h, w = points.shape[:2]
    owners = np.full((h, w), -1, np.int64)
    if not objects:
        return owners
    lo, hi = np.asarray(config.low), np.asarray(config.high)
    shape = tuple(np.ceil((hi - lo) / config.cell).astype(int))
    grid = np.full(shape, -1, np.int64)
    for k, obj in enumerate(objects):
        ij = np.clip(np.floor((obj.cells - lo) / config.cell).astype(int), 0, np.array(shape) - 1)
        grid[ij[:, 0], ij[:, 1]] = k
    dist, (ni, nj) = ndimage.distance_transform_edt(grid < 0, return_indices=True)
    nearest = np.where(dist * config.cell <= reach, grid[ni, nj], -1)
    pts = points.reshape(-1, 3)
    ok = np.isfinite(pts).all(axis=1) & (pts[:, 2] > table_z + config.min_height) & np.all(
        (pts[:, :2] >= lo) & (pts[:, :2] < hi), axis=1)
    ij = np.floor((pts[ok, :2] - lo) / config.cell).astype(int)
    flat = owners.reshape(-1)
    flat[np.flatnonzero(ok)] = nearest[ij[:, 0], ij[:, 1]]
    return owners


def rectangle_yaw(cells: np.ndarray) -> float:
    """Direction (radians, in [−π/2, π/2)) of the longer side of the smallest-area rectangle around ``cells``.

    A square footprint has no principal axis (its spread is the same in every direction), but its sides still have
    one direction: the rectangle's sides lie along an edge of the convex hull (rotating calipers), so only the hull's
    edge directions are tried.
    """
    pts = np.asarray(cells, np.float64).reshape(-1, 2)
    try:
        hull = pts[ConvexHull(pts).vertices]
    except (QhullError, ValueError):  # fewer than 3 points, or all on one line: no rectangle to turn
        return 0.0
    edges = np.roll(hull, -1, axis=0) - hull
    angles = np.unique(np.mod(np.arctan2(edges[:, 1], edges[:, 0]), math.pi / 2))
    best, best_area, best_sides = 0.0, math.inf, (0.0, 0.0)
    for a in angles:
        u = np.array([math.cos(a), math.sin(a)])
        v = np.array([-u[1], u[0]])
        sides = (float(np.ptp(hull @ u)), float(np.ptp(hull @ v)))
        if sides[0] * sides[1] < best_area - 1e-12:
            best, best_area, best_sides = float(a), sides[0] * sides[1], sides
    if best_sides[1] > best_sides[0]:  # the longer side is across u
        best += math.pi / 2
    return (best + math.pi / 2) % math.pi - math.pi / 2


def nearest_object(objects: list[TabletopObject], xy: np.ndarray) -> TabletopObject | None:
    """The object whose footprint has a cell closest to ``xy`` (None when there are none)."""
    if not objects:
        return None
    return min(objects, key=lambda o: float(np.min(np.linalg.norm(o.cells - xy, axis=1))))


def round_body_centre(obj: TabletopObject, band: float = 0.012) -> np.ndarray:
    """The centre of a round body with something thin sticking out of one side (a mug's handle): a disc as wide as
    the footprint's minor extent, at the end of the main axis where the footprint is wide (the body's cap; the
    handle seen from above is a thin strip)."""
    length, width = obj.extent
    r = width / 2
    if length <= width + 2 * GridConfig.cell:
        return obj.centre
    major = np.array([math.cos(obj.axis_yaw), math.sin(obj.axis_yaw)])
    minor = np.array([-major[1], major[0]])
    a, b = (obj.cells - obj.centre) @ major, (obj.cells - obj.centre) @ minor
    spreads = []
    for near in (a <= a.min() + band, a >= a.max() - band):
        spreads.append(float(np.ptp(b[near])) if near.any() else 0.0)
    sign = 1.0 if spreads[1] > spreads[0] else -1.0
    return obj.centre + sign * major * (length / 2 - r)
