"""Class-agnostic object proposals from RGB-D (table-plane removal + depth discontinuities) or RGB alone.

With depth: a plane is fitted robustly to *inverse* depth (for a pinhole camera a planar surface has inverse depth
affine in pixel coordinates, so no intrinsics are needed); pixels clearly nearer than the plane are foreground,
depth discontinuities split touching objects, and connected components become proposals. Without depth: the
dominant colour (the table) is removed in Lab space and the remaining connected components are proposals.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from scipy import ndimage

from envs.config import Options


@dataclass(frozen=True)
class ProposalConfig(Options):
    """Thresholds of the proposal generator (fractions are of the image area)."""

    min_area_frac: float = 0.0008
    max_area_frac: float = 0.25
    plane_margin: float = 0.004  # inverse-depth units (1/m) above the plane that count as "on the table"
    edge_rel: float = 0.03  # relative depth jump between neighbours that separates two objects
    colour_dist: float = 18.0  # Lab distance from the table colour that counts as foreground
    ransac_iters: int = 64
    seed: int = 0
    merge_fragments: bool = True  # also propose the union of touching, vertically stacked fragments
    merge_x_overlap: float = 0.6  # horizontal overlap (fraction of the narrower fragment) for stacked fragments


def fit_inverse_depth_plane(depth: np.ndarray, cfg: ProposalConfig) -> np.ndarray | None:
    """RANSAC + least-squares plane ``a·x/w + b·y/h + c`` fitted to inverse depth (the dominant surface), or None."""
    h, w = depth.shape
    valid = np.isfinite(depth) & (depth > 1e-6)
    ys, xs = np.nonzero(valid)
    if len(xs) < 3:
        return None
    rng = np.random.default_rng(cfg.seed)
    sample = rng.choice(len(xs), size=min(len(xs), 4000), replace=False)
    A = np.stack([xs[sample] / w, ys[sample] / h, np.ones(len(sample))], axis=1)
    b = 1.0 / depth[ys[sample], xs[sample]]
    tol = max(cfg.plane_margin * 0.5, 1e-6)
    # All hypotheses at once (the same draws, in order, as one per iteration); degenerate triples are skipped.
    picks = np.stack([rng.choice(len(sample), size=3, replace=False) for _ in range(cfg.ransac_iters)])
    ok = np.abs(np.linalg.det(A[picks])) > 1e-12
    if not ok.any():
        return None
    coefs = np.linalg.solve(A[picks[ok]], b[picks[ok]][..., None])[..., 0]
    counts = (np.abs(A @ coefs.T - b[:, None]) < tol).sum(axis=0)
    best = coefs[int(np.argmax(counts))]  # the first hypothesis with the most inliers, as before
    inliers = np.abs(A @ best - b) < tol
    return np.linalg.lstsq(A[inliers], b[inliers], rcond=None)[0]  # refine on all inliers


def height_above_plane(depth: np.ndarray, plane: np.ndarray | None, origin: tuple[int, int] = (0, 0),
                       frame_shape: tuple[int, int] | None = None) -> np.ndarray:
    """Inverse depth minus ``plane`` (positive = nearer than the surface); 0 where depth is invalid.

    ``depth`` may be a window of the frame the plane was fitted on: ``origin`` is its top-left (row, col) in that
    frame and ``frame_shape`` the frame's (h, w), so a plane fitted once per episode serves every later window.
    """
    h, w = frame_shape if frame_shape is not None else depth.shape
    valid = np.isfinite(depth) & (depth > 1e-6)
    inv = np.zeros(depth.shape, dtype=np.float64)
    inv[valid] = 1.0 / depth[valid]
    if plane is None:
        return np.zeros_like(inv)
    yy, xx = np.ogrid[origin[0]:origin[0] + depth.shape[0], origin[1]:origin[1] + depth.shape[1]]
    surface = plane[0] * xx / w + plane[1] * yy / h + plane[2]
    return np.where(valid, inv - surface, 0.0)


def fit_plane_inverse_depth(depth: np.ndarray, cfg: ProposalConfig) -> np.ndarray:
    """Height above the dominant plane in inverse-depth units (positive = nearer the camera than the table)."""
    return height_above_plane(depth, fit_inverse_depth_plane(depth, cfg))


def _components(fg: np.ndarray, cfg: ProposalConfig, split: np.ndarray | None = None) -> list[np.ndarray]:
    """Connected components of ``fg`` (after removing ``split`` pixels, which are then re-attached) as masks."""
    h, w = fg.shape
    core = fg & ~split if split is not None else fg
    core = ndimage.binary_opening(core, structure=np.ones((2, 2), bool))
    labels, n = ndimage.label(core)
    if n == 0:
        return []
    if split is not None:  # give removed edge pixels back to the nearest component
        # Only foreground pixels are relabelled and every component lies inside the foreground's box, so the
        # distance transform runs on that box alone (same labels, a fraction of the cost at 224²).
        fy, fx = np.nonzero(fg.any(axis=1))[0], np.nonzero(fg.any(axis=0))[0]
        box = slice(fy[0], fy[-1] + 1), slice(fx[0], fx[-1] + 1)
        sub = labels[box]
        _, (iy, ix) = ndimage.distance_transform_edt(sub == 0, return_indices=True)
        labels = np.zeros_like(labels)
        labels[box] = np.where(fg[box] & (sub == 0), sub[iy, ix], sub)
        labels[~fg] = 0
    min_area, max_area = cfg.min_area_frac * h * w, cfg.max_area_frac * h * w
    areas = ndimage.sum_labels(np.ones_like(labels), labels, index=np.arange(1, n + 1))
    masks = []
    slices = ndimage.find_objects(labels)
    for k in np.nonzero((areas >= min_area) & (areas <= max_area))[0]:
        masks.append(_fill_holes_in_box(labels, k + 1, slices[k]))
    return masks


def _fill_holes_in_box(labels: np.ndarray, k: int, box: tuple[slice, slice]) -> np.ndarray:
    """``binary_fill_holes(labels == k)`` computed on the component's box (+1 px) only: same result, far cheaper."""
    h, w = labels.shape
    ys = slice(max(box[0].start - 1, 0), min(box[0].stop + 1, h))
    xs = slice(max(box[1].start - 1, 0), min(box[1].stop + 1, w))
    out = np.zeros((h, w), bool)
    out[ys, xs] = ndimage.binary_fill_holes(labels[ys, xs] == k)
    return out


def stacked_unions(masks: list[np.ndarray], cfg: ProposalConfig = ProposalConfig()) -> list[np.ndarray]:
    """Unions of fragment pairs that touch and sit one above the other in the image.

    Depth discontinuities split a mug, cup or bowl at its rim (the inner wall is farther than the front lip), so
    the object comes out as a body and an "inside" fragment stacked vertically with the same horizontal extent.
    Both the fragments and their union are kept; the matcher, which compares each candidate only with candidates
    it does not overlap, decides which one is the object.
    """
    if len(masks) < 2:
        return []
    h, w = masks[0].shape
    kernel = np.ones((5, 5), np.uint8)
    boxes = []
    for m in masks:
        ys, xs = np.nonzero(m)
        boxes.append((xs.min(), ys.min(), xs.max() + 1, ys.max() + 1))
    out = []
    max_area = cfg.max_area_frac * h * w
    for i in range(len(masks)):
        for j in range(i + 1, len(masks)):
            a, b = boxes[i], boxes[j]
            overlap = min(a[2], b[2]) - max(a[0], b[0])
            if overlap < cfg.merge_x_overlap * min(a[2] - a[0], b[2] - b[0]):
                continue
            if a[1] > b[3] + 2 or b[1] > a[3] + 2:  # a vertical gap: not touching
                continue
            y0, y1 = max(min(a[1], b[1]) - 3, 0), min(max(a[3], b[3]) + 3, h)
            x0, x1 = max(min(a[0], b[0]) - 3, 0), min(max(a[2], b[2]) + 3, w)
            grown = cv2.dilate(masks[i][y0:y1, x0:x1].astype(np.uint8), kernel).astype(bool)
            if not (grown & masks[j][y0:y1, x0:x1]).any():
                continue
            pair = masks[i] | masks[j]
            union = pair.copy()  # close the seam between them, on the pair's box (+ margin) only
            y0, y1 = max(min(a[1], b[1]) - 6, 0), min(max(a[3], b[3]) + 6, h)
            x0, x1 = max(min(a[0], b[0]) - 6, 0), min(max(a[2], b[2]) + 6, w)
            union[y0:y1, x0:x1] |= ndimage.binary_closing(pair[y0:y1, x0:x1], np.ones((5, 5), bool))
            if union.sum() <= max_area:
                out.append(union)
    return out


def depth_proposals(depth: np.ndarray, cfg: ProposalConfig = ProposalConfig(), plane: np.ndarray | None = None,
                    origin: tuple[int, int] = (0, 0), frame_shape: tuple[int, int] | None = None,
                    ) -> list[np.ndarray]:
    """Masks of things standing on the dominant plane, split at depth discontinuities (+ stacked-fragment unions).

    ``plane`` (from :func:`fit_inverse_depth_plane` on the whole frame; ``depth`` is then a window of it at
    ``origin``) skips the per-call plane fit; without it the plane is fitted to ``depth`` itself.
    """
    depth = np.asarray(depth, np.float64)
    if plane is None:
        height = fit_plane_inverse_depth(depth, cfg)
    else:
        height = height_above_plane(depth, plane, origin, frame_shape)
    fg = height > cfg.plane_margin
    gy, gx = np.gradient(depth)
    jump = np.hypot(gx, gy) / np.maximum(depth, 1e-6)
    masks = _components(fg, cfg, split=jump > cfg.edge_rel)
    return masks + stacked_unions(masks, cfg) if cfg.merge_fragments else masks


def dominant_colour_lab(lab: np.ndarray, bins: int = 12) -> np.ndarray:
    """Mean Lab colour of the most populated coarse colour bin (the table, in a tabletop view)."""
    q = np.clip((lab / 256.0 * bins).astype(int), 0, bins - 1).reshape(-1, 3)
    flat = q[:, 0] * bins * bins + q[:, 1] * bins + q[:, 2]
    top = np.bincount(flat, minlength=bins**3).argmax()
    return lab.reshape(-1, 3)[flat == top].mean(axis=0)


def colour_proposals(image: np.ndarray, cfg: ProposalConfig = ProposalConfig()) -> list[np.ndarray]:
    """Masks of regions whose colour differs from the dominant (table) colour."""
    lab = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2LAB).astype(np.float32)
    lab = cv2.GaussianBlur(lab, (3, 3), 0)
    table = dominant_colour_lab(lab)
    # Weight lightness less: shading on the table should not become foreground.
    diff = (lab - table) * np.array([0.5, 1.0, 1.0], np.float32)
    fg = np.linalg.norm(diff, axis=-1) > cfg.colour_dist
    return _components(fg, cfg)


def propose(image: np.ndarray, depth: np.ndarray | None = None, cfg: ProposalConfig = ProposalConfig(),
            plane: np.ndarray | None = None, origin: tuple[int, int] = (0, 0),
            frame_shape: tuple[int, int] | None = None) -> list[np.ndarray]:
    """Class-agnostic proposal masks: from depth when given (more reliable), else from colour.

    ``plane``: the table plane when already fitted (:func:`fit_inverse_depth_plane`), on this image or on the frame
    it is a window of (``origin``, ``frame_shape``: see :func:`height_above_plane`).
    """
    if depth is not None:
        masks = depth_proposals(depth, cfg, plane=plane, origin=origin, frame_shape=frame_shape)
        if masks:
            return masks
    return colour_proposals(image, cfg)
