"""Print layout: where on the object each colour sits, compared under small shifts.

Colour histograms and pooled CNN features hardly change when a print is mirrored, turned upside down or cut to
another part of the same photo; the *arrangement* of the print does. A layout signature is the object crop shrunk to
a small grid (Lab, each channel centred on the object's own mean so a change of light shifts nothing), with the
mask's coverage as per-cell weight. Two signatures are compared by a weighted normalised cross-correlation over
small shifts: turning a cylinder or a box a little moves its print sideways (a consistent horizontal shift), and
the crop box varies by a cell or two, while a mirror or an upside-down print cannot be undone by a shift. The
references that match a candidate's layout best are also the views its keypoints are checked against
(``perception/matching.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

GRID = 16  # cells a side: the objects are 25-60 px wide in a 224² frame, so finer grids only add noise
SHIFT_X, SHIFT_Y = 3, 2  # cells of shift tried each way (a yaw error of ~20°, a crop box off by a few pixels)
_CHROMA = 1.5  # a and b channels weigh more than lightness: shading varies between views, hue does not


@dataclass
class LayoutSignature:
    """A centred Lab grid (GRID×GRID×3, float32) and its coverage weights (GRID×GRID, in [0, 1])."""

    grid: np.ndarray
    weight: np.ndarray


def layout_signature(crop: np.ndarray, mask: np.ndarray, grid: int = GRID) -> LayoutSignature:
    """The layout signature of an object crop (uint8 RGB) and its mask (bool, same size)."""
    lab = cv2.cvtColor(np.ascontiguousarray(crop, np.uint8), cv2.COLOR_RGB2LAB).astype(np.float32)
    m = np.asarray(mask, np.float32)
    small = cv2.resize(lab * m[..., None], (grid, grid), interpolation=cv2.INTER_AREA)
    weight = cv2.resize(m, (grid, grid), interpolation=cv2.INTER_AREA)
    cells = small / np.maximum(weight, 1e-3)[..., None]  # the object's own colour per cell, background left out
    weight = np.where(weight > 0.5, weight, 0.0).astype(np.float32)  # edge cells are mostly background: drop
    total = float(weight.sum())
    if total > 0:
        cells = cells - (cells * weight[..., None]).sum(axis=(0, 1)) / total
    cells = cells * np.array([1.0, _CHROMA, _CHROMA], np.float32)
    return LayoutSignature(cells.astype(np.float32), weight)


def _shifted(sig: LayoutSignature, sx: int, sy: int) -> tuple[np.ndarray, np.ndarray]:
    """Every shift of ``sig`` within ±sx, ±sy cells (zero-padded): arrays (S, g, g, 3) and (S, g, g)."""
    g = sig.weight.shape[0]
    grid = np.pad(sig.grid, ((sy, sy), (sx, sx), (0, 0)))
    weight = np.pad(sig.weight, ((sy, sy), (sx, sx)))
    grids, weights = [], []
    for dy in range(2 * sy + 1):
        for dx in range(2 * sx + 1):
            grids.append(grid[dy:dy + g, dx:dx + g])
            weights.append(weight[dy:dy + g, dx:dx + g])
    return np.stack(grids), np.stack(weights)


@dataclass
class LayoutBank:
    """A reference set's layout signatures stacked once (per reference set, not per call), so comparing a
    candidate with every reference is one matrix product."""

    weight: np.ndarray  # (R, P) coverage per cell
    weighted: np.ndarray  # (R, 3P) coverage × centred colour
    energy: np.ndarray  # (R, P) coverage × squared colour
    area: np.ndarray  # (R,) total coverage


def layout_bank(references: list[LayoutSignature]) -> LayoutBank:
    """Stack reference signatures (all of one grid size) for :func:`layout_similarities`."""
    cells = references[0].weight.size
    w = np.stack([r.weight.ravel() for r in references])
    g = np.stack([r.grid.reshape(cells, 3) for r in references])
    return LayoutBank(w, (w[..., None] * g).reshape(len(references), -1), w * (g * g).sum(axis=-1), w.sum(axis=1))


def layout_similarities(candidates: list[LayoutSignature], bank: LayoutBank,
                        shift_x: int = SHIFT_X, shift_y: int = SHIFT_Y) -> np.ndarray:
    """Per candidate and reference, the best weighted correlation under any shift, shape (n, R), in [-1, 1].

    The correlation is normalised by the larger of the two signatures' energies (not their geometric mean), so
    it also asks for the same contrast: a plain patch (a mug's inside, the robot's white base) otherwise reaches
    a high correlation from its shading alone, and as the best *other* candidate it took the user's object's
    margin. A shift that leaves less than a third of the smaller object overlapping does not count.
    """
    out = np.zeros((len(candidates), len(bank.area)))
    cells = bank.weight.shape[1]
    for i, cand in enumerate(candidates):
        grids, weights = _shifted(cand, shift_x, shift_y)  # (S, g, g, 3), (S, g, g)
        g = grids.reshape(len(grids), cells, 3)
        w = weights.reshape(len(weights), cells)
        cross = (w[..., None] * g).reshape(len(g), -1) @ bank.weighted.T  # sum over cells of w_s w_r <g_s, g_r>
        ca = (w * (g * g).sum(axis=-1)) @ bank.weight.T
        cb = w @ bank.energy.T
        overlap = w @ bank.weight.T
        corr = cross / np.maximum(np.maximum(ca, cb), 1e-6)
        enough = overlap >= np.minimum(float(cand.weight.sum()), bank.area)[None, :] / 3
        out[i] = np.where(enough, corr, -1.0).max(axis=0)
    return out


def layout_similarity(candidates: list[LayoutSignature], references: list[LayoutSignature],
                      shift_x: int = SHIFT_X, shift_y: int = SHIFT_Y) -> np.ndarray:
    """Per candidate, the best similarity (:func:`layout_similarities`) with any reference, shape (n,).

    About 1 ms for 4 candidates × 20 references on one core.
    """
    if not candidates or not references:
        return np.zeros(len(candidates))
    return layout_similarities(candidates, layout_bank(references), shift_x, shift_y).max(axis=1)
