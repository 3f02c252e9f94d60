"""A detected object candidate (box, mask, score) and the small geometry helpers around it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


@dataclass(frozen=True)
class Candidate:
    """One object hypothesis in one image.

    ``box`` is (x0, y0, x1, y1) in pixels, exclusive upper bounds; ``mask`` is an H×W bool array; ``score`` is the
    detector's confidence that the object belongs to the asked category (in [0, 1]).
    """

    box: tuple[int, int, int, int]
    mask: np.ndarray
    score: float
    label: str = ""
    source: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def area(self) -> int:
        return int(self.mask.sum())

    def with_score(self, score: float, **extra: object) -> Candidate:
        """A copy with a new score (and extra diagnostics merged in)."""
        return replace(self, score=float(score), extra={**self.extra, **extra})


def box_of_mask(mask: np.ndarray) -> tuple[int, int, int, int]:
    """Tight (x0, y0, x1, y1) box around the true pixels of a mask; (0, 0, 0, 0) for an empty mask."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))  # 10× cheaper than nonzero
    if len(rows) == 0:
        return (0, 0, 0, 0)
    return (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)


def mask_of_box(box: tuple[int, int, int, int], shape: tuple[int, int]) -> np.ndarray:
    """A bool mask filling a box (clipped to the image)."""
    h, w = shape
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    m = np.zeros((h, w), bool)
    m[max(0, y0):min(h, y1), max(0, x0):min(w, x1)] = True
    return m


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two bool masks (0 when both are empty)."""
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 0.0


def box_iou(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    """Intersection over union of two boxes."""
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def crop(image: np.ndarray, box: tuple[int, int, int, int], margin: float = 0.15,
         mask: np.ndarray | None = None, fill: tuple[int, int, int] | None = None) -> np.ndarray:
    """The box grown by ``margin`` (fraction of its size); pixels outside ``mask`` set to ``fill`` when given."""
    h, w = image.shape[:2]
    x0, y0, x1, y1 = box
    mx, my = int(round((x1 - x0) * margin)), int(round((y1 - y0) * margin))
    x0, y0, x1, y1 = max(0, x0 - mx), max(0, y0 - my), min(w, x1 + mx), min(h, y1 + my)
    out = image[y0:y1, x0:x1].copy()
    if mask is not None and fill is not None:
        out[~mask[y0:y1, x0:x1]] = fill
    return out


def square_resize(image: np.ndarray, size: int, fill: tuple[int, int, int] = (124, 116, 104)) -> np.ndarray:
    """Pad to a square (keeping the aspect ratio) and resize to ``size``×``size`` with area interpolation."""
    import cv2

    h, w = image.shape[:2]
    side = max(h, w, 1)
    canvas = np.empty((side, side, 3), np.uint8)
    canvas[:] = fill
    y, x = (side - h) // 2, (side - w) // 2
    canvas[y:y + h, x:x + w] = image
    interp = cv2.INTER_AREA if side > size else cv2.INTER_LINEAR
    return cv2.resize(canvas, (size, size), interpolation=interp)


OBJECT_CROP = 96  # matching/scoring resolution: small objects are upsampled so ORB's patches fit
GREY = (124, 116, 104)


def object_crop(image: np.ndarray, mask: np.ndarray, size: int = OBJECT_CROP,
                margin: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """The object alone on grey, squared and resized to ``size`` (uint8 RGB), and its mask at that size.

    One recipe shared by the category scorer and the instance matcher, so both can reuse one network pass.
    """
    box = box_of_mask(mask)
    c = crop(image, box, margin, mask, fill=GREY)
    cm = crop(mask[..., None].astype(np.uint8) * 255, box, margin).repeat(3, axis=2)  # crop first: a few hundred px
    return square_resize(c, size, fill=GREY), square_resize(cm, size, fill=(0, 0, 0))[..., 0] > 127
