"""Metric height of detection candidates above the table, checked against the heights the named category can have.

A candidate's pixels are lifted to 3-D with the camera's depth and vertical field of view (a calibrated RGB-D
sensor; no camera pose is needed) and measured against the table plane, which the proposal generator already fits
to inverse depth: for a pinhole camera a plane ``1/d = a·x/w + b·y/h + c`` in pixel coordinates is the metric plane
``g·P = 1`` in the camera frame, so the plane costs nothing more. The candidate's height is a high quantile of its
pixels' heights (the object's top; robust to a stray pixel of something taller behind it).

:class:`HeightCheck` removes candidates whose height no object of the named category has (bottles are 13-16 cm,
boxes 4.5-7 cm: a bottle is never "my box"). The ranges come from the project's own object library and books,
widened by a margin; a category outside them, or a check that would remove every candidate, keeps all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from envs.config import Options
from perception.candidate import Candidate
from perception.proposals import ProposalConfig, fit_inverse_depth_plane


@lru_cache(maxsize=1)
def category_heights() -> dict[str, tuple[float, float]]:
    """(lowest, highest) object height in metres per category, over the library, its extra designs and books."""
    from envs.manipulation.objects import EXTRA_TRAIN, LIBRARY
    from envs.manipulation.vlabench.books import BOOKS

    out: dict[str, tuple[float, float]] = {}
    for inst in (*LIBRARY.values(), *EXTRA_TRAIN.values(), *BOOKS.values()):
        lo, hi = out.get(inst.category, (math.inf, -math.inf))
        out[inst.category] = (min(lo, inst.height), max(hi, inst.height))
    return out


def plane_in_camera(plane: np.ndarray, shape: tuple[int, int], fovy_deg: float) -> np.ndarray:
    """The inverse-depth plane (:func:`~perception.proposals.fit_inverse_depth_plane`) as ``g`` with ``g·P = 1`` for
    camera-frame points ``P = d·((col + 0.5 − w/2)/f, (row + 0.5 − h/2)/f, 1)`` (x right, y down, z forward)."""
    h, w = shape
    f = (h / 2) / math.tan(math.radians(fovy_deg) / 2)
    a, b, c = (float(v) for v in plane)
    return np.array([a * f / w, b * f / h, a * (w / 2 - 0.5) / w + b * (h / 2 - 0.5) / h + c])


def heights_above(depth: np.ndarray, mask: np.ndarray, g: np.ndarray, fovy_deg: float) -> np.ndarray:
    """Metric height above the plane ``g`` (positive toward the camera) of the mask's pixels with valid depth."""
    h, w = depth.shape
    rows, cols = np.nonzero(mask)
    d = np.asarray(depth, np.float64)[rows, cols]
    ok = np.isfinite(d) & (d > 1e-6)
    rows, cols, d = rows[ok], cols[ok], d[ok]
    f = (h / 2) / math.tan(math.radians(fovy_deg) / 2)
    pts = np.stack([(cols + 0.5 - w / 2) / f * d, (rows + 0.5 - h / 2) / f * d, d], axis=1)
    return (1.0 - pts @ g) / max(float(np.linalg.norm(g)), 1e-12)


@dataclass(frozen=True)
class HeightCheckConfig(Options):
    """How a candidate's height is read and how far outside its category's range it may be before it is dropped."""

    quantile: float = 0.95  # of the mask's pixel heights: the object's top, robust to a few stray pixels
    margin_above: float = 0.02  # metres above the category's tallest object that still count
    margin_below: float = 0.02  # metres below its lowest (a mask cut at the rim, a partly hidden top)


class HeightCheck:
    """Drops detection candidates whose metric height is impossible for the category (see the module docstring).

    ``fovy_deg``: the camera's vertical field of view (square pixels), unless each call passes its own.
    ``last_heights`` / ``last_rejected`` keep the last call's measurements; ``flagged`` counts every candidate ever
    found out of range, kept by the never-empty rule or not (diagnostics: a check that flags nothing changed
    nothing).
    """

    def __init__(self, fovy_deg: float | None = None, config: HeightCheckConfig = HeightCheckConfig(),
                 proposal_config: ProposalConfig = ProposalConfig()) -> None:
        self.fovy_deg = fovy_deg
        self.config = config
        self.proposal_config = proposal_config
        self.last_heights: list[float] = []
        self.last_rejected = 0
        self.flagged = 0

    def allowed(self, category: str) -> tuple[float, float] | None:
        """The accepted (low, high) heights of ``category``, or None when the library does not know it."""
        span = category_heights().get(category)
        if span is None:
            return None
        return span[0] - self.config.margin_below, span[1] + self.config.margin_above

    def measure(self, depth: np.ndarray, masks: Sequence[np.ndarray], plane: np.ndarray | None = None,
                fovy_deg: float | None = None) -> list[float]:
        """Each mask's height above the table (NaN where it cannot be measured); ``plane``: the frame's inverse-depth
        plane when already fitted (VAP's detector keeps it), else fitted here."""
        fovy = self.fovy_deg if fovy_deg is None else fovy_deg
        depth = np.asarray(depth, np.float64)
        if fovy is None or depth.ndim != 2:
            return [math.nan] * len(masks)
        if plane is None:
            plane = fit_inverse_depth_plane(depth, self.proposal_config)
        if plane is None:
            return [math.nan] * len(masks)
        g = plane_in_camera(np.asarray(plane), depth.shape, fovy)
        out = []
        for m in masks:
            hs = heights_above(depth, np.asarray(m, bool), g, fovy)
            out.append(float(np.quantile(hs, self.config.quantile)) if hs.size else math.nan)
        return out

    def filter(self, candidates: list[Candidate], depth: np.ndarray | None, category: str | None,
               plane: np.ndarray | None = None, fovy_deg: float | None = None) -> list[Candidate]:
        """``candidates`` without those too tall or too short for ``category`` (order kept; all of them when the
        check cannot decide or would leave none)."""
        self.last_heights, self.last_rejected = [], 0
        span = self.allowed(category) if category else None
        if depth is None or span is None or not candidates:
            return candidates
        heights = self.measure(depth, [c.mask for c in candidates], plane, fovy_deg)
        self.last_heights = heights
        kept = [c for c, h in zip(candidates, heights, strict=True)
                if not (math.isfinite(h) and not span[0] <= h <= span[1])]
        self.flagged += len(candidates) - len(kept)
        if not kept:
            return candidates
        self.last_rejected = len(candidates) - len(kept)
        return kept
