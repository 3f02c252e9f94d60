"""Keeps the chosen object's mask across an episode: cheap re-localisation every k steps plus association.

Every ``every`` steps, unless the region around the object is unchanged (then the mask is kept for free), the
class-agnostic proposals inside that region (no network) are associated to the track by mask IoU and
colour-histogram similarity; if nothing associates (e.g. the gripper covers the object) the last mask
is kept ("coasting"). A proposal that grew far beyond the track (the object merged with the gripper) is clipped to
the dilated previous mask. Between updates the mask is reused; :meth:`visible_mask` drops masked pixels whose
colour no longer fits the object's colour model, so an occluding gripper is not highlighted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from envs.config import Options
from perception.candidate import box_of_mask, mask_iou


@dataclass(frozen=True)
class TrackerConfig(Options):
    """Re-localisation period and association thresholds."""

    every: int = 5  # steps between re-localisations (1 = every step)
    min_iou: float = 0.2
    min_colour: float = 0.3  # histogram intersection
    grow_limit: float = 2.0  # a proposal larger than this × the track is clipped to the dilated track
    shrink_limit: float = 0.6  # a proposal smaller than this × the track is a partly occluded view: keep the track
    visible_backprojection: float = 0.02  # colour-model probability below which a masked pixel is "not the object"
    still_diff: float = 3.0  # mean |Δ| (grey levels) around the object below which nothing moved: keep the mask
    roi_scale: float = 1.0  # re-localise inside the track's box grown by this × its size on each side


def _hist(hsv: np.ndarray, mask: np.ndarray) -> np.ndarray:
    h = cv2.calcHist([hsv], [0, 1], mask.astype(np.uint8), [18, 8], [0, 180, 0, 256])
    return h / max(float(h.sum()), 1.0)


class MaskTracker:
    """Single-object mask tracker; ``start`` with the grounded mask, then ``update`` once per control step."""

    def __init__(self, config: TrackerConfig = TrackerConfig(),
                 proposals: Callable[[np.ndarray, np.ndarray | None], Sequence[np.ndarray]] | None = None) -> None:
        self.config = config
        # Default: depth proposals against the table plane fitted once in ``start`` (the camera and table do not
        # move), colour proposals without depth; a custom ``proposals(image, depth)`` is called as given.
        self.proposals = proposals
        self.plane: np.ndarray | None = None
        self.mask: np.ndarray | None = None
        self.hist: np.ndarray | None = None
        self.steps = 0
        self.coasting = 0  # consecutive re-localisations without an association
        self.lost_updates = 0  # total over the episode

    def start(self, image: np.ndarray, mask: np.ndarray, depth: np.ndarray | None = None,
              plane: np.ndarray | None = None) -> None:
        """Begin tracking ``mask`` in ``image``; ``depth`` (same frame) gives the table plane unless ``plane`` does."""
        from perception.proposals import ProposalConfig, fit_inverse_depth_plane

        self.mask = mask.copy()
        self.hist = _hist(cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2HSV), mask)
        self.plane = plane
        if plane is None and depth is not None and self.proposals is None:
            self.plane = fit_inverse_depth_plane(np.asarray(depth, np.float64), ProposalConfig())
        self.steps, self.coasting, self.lost_updates = 0, 0, 0
        self.skipped = 0  # re-localisations skipped because the region around the object did not change
        self._last = np.asarray(image).copy()

    def _roi(self, shape: tuple[int, ...]) -> tuple[slice, slice]:
        ys, xs = np.nonzero(self.mask)
        h, w = shape[:2]
        if len(xs) == 0:
            return slice(0, h), slice(0, w)
        gy = int((ys.max() - ys.min() + 1) * self.config.roi_scale) + 4
        gx = int((xs.max() - xs.min() + 1) * self.config.roi_scale) + 4
        return (slice(max(ys.min() - gy, 0), min(ys.max() + 1 + gy, h)),
                slice(max(xs.min() - gx, 0), min(xs.max() + 1 + gx, w)))

    def update(self, image: np.ndarray, depth: np.ndarray | None = None) -> np.ndarray:
        """Advance one step; re-localise when due; returns the current mask."""
        if self.mask is None:
            raise RuntimeError("MaskTracker.update before start")
        self.steps += 1
        if self.steps % max(1, self.config.every):
            return self.mask
        # Cheap first: if the region around the object looks as it did at the last re-localisation, keep the mask.
        ys, xs = self._roi(image.shape)
        roi_img = np.asarray(image)[ys, xs]
        if np.abs(roi_img.astype(np.int16) - self._last[ys, xs].astype(np.int16)).mean() < self.config.still_diff:
            self.skipped += 1
            return self.mask
        self._last = np.asarray(image).copy()
        roi_img = np.ascontiguousarray(roi_img)
        hsv = cv2.cvtColor(roi_img, cv2.COLOR_RGB2HSV)  # colour is only compared inside the ROI
        best, best_score = None, -1.0
        roi_depth = None if depth is None else np.asarray(depth)[ys, xs]
        for local in self._propose(roi_img, roi_depth, (ys.start, xs.start), image.shape[:2]):
            m = np.zeros(self.mask.shape, bool)
            m[ys, xs] = local
            iou = mask_iou(m, self.mask)
            if iou < self.config.min_iou:
                continue
            if m.sum() > self.config.grow_limit * max(self.mask.sum(), 1):
                m = m & cv2.dilate(self.mask.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
            colour = float(np.minimum(_hist(hsv, m[ys, xs]), self.hist).sum())
            if colour < self.config.min_colour:
                continue
            score = iou + colour
            if score > best_score:
                best, best_score = m, score
        if best is not None and best.sum() < self.config.shrink_limit * self.mask.sum():
            best = None  # partial occlusion (the gripper over the object): coast on the full previous mask
        if best is None:
            self.coasting += 1
            self.lost_updates += 1
        else:
            self.mask, self.coasting = best, 0
        return self.mask

    def _propose(self, roi_img: np.ndarray, roi_depth: np.ndarray | None, origin: tuple[int, int],
                 frame_shape: tuple[int, int]) -> Sequence[np.ndarray]:
        """Class-agnostic proposals inside the ROI (no network)."""
        if self.proposals is not None:
            return self.proposals(roi_img, roi_depth)
        from perception.proposals import propose

        return propose(roi_img, roi_depth, plane=self.plane, origin=origin, frame_shape=frame_shape)

    def visible_mask(self, image: np.ndarray) -> np.ndarray:
        """The tracked mask minus pixels whose colour the object's model finds unlikely (occluders)."""
        if self.mask is None:
            raise RuntimeError("MaskTracker.visible_mask before start")
        x0, y0, x1, y1 = box_of_mask(self.mask)
        out = np.zeros_like(self.mask)
        if x1 == x0:
            return out
        box = slice(y0, y1), slice(x0, x1)  # only the mask's box can be highlighted
        hsv = cv2.cvtColor(np.ascontiguousarray(np.asarray(image)[box]), cv2.COLOR_RGB2HSV)
        prob = cv2.calcBackProject([hsv], [0, 1], self.hist.astype(np.float32), [0, 180, 0, 256], scale=255)
        out[box] = self.mask[box] & (prob > self.config.visible_backprojection * 255)
        return out
