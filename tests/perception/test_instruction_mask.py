"""The region an instruction points at: the colour's region from a pixel floor on, else the detector's best."""

from __future__ import annotations

import numpy as np

from perception.candidate import Candidate, box_of_mask
from perception.instruction_mask import instruction_mask

PURPLE = (130, 45, 170)


def _square(top: int, left: int, side: int) -> np.ndarray:
    mask = np.zeros((48, 48), bool)
    mask[top:top + side, left:left + side] = True
    return mask


class ListedDetector:
    """A detector that returns fixed candidates and records what it was asked."""

    def __init__(self, candidates: list[Candidate]) -> None:
        self.candidates, self.prepared, self.depths = candidates, [], []

    def prepare(self, category: str) -> None:
        self.prepared.append(category)

    def detect(self, image, category, depth=None):
        self.depths.append(depth)
        return list(self.candidates)


class TallerThan:
    """A height check keeping the candidates whose mask is wider than ``cols`` columns (stands for a height)."""

    def __init__(self, cols: int) -> None:
        self.cols, self.calls = cols, []

    def filter(self, cands, depth, category, plane=None, fovy_deg=None):
        self.calls.append((category, plane, fovy_deg))
        return [c for c in cands if np.any(c.mask, axis=0).sum() > self.cols]


def _candidate(mask: np.ndarray, score: float) -> Candidate:
    return Candidate(box=box_of_mask(mask), mask=mask, score=score)


def test_the_colour_region_wins_from_the_pixel_floor_on_and_the_detector_is_never_built():
    image = np.full((48, 48, 3), 110, np.uint8)
    image[_square(5, 5, 4)] = PURPLE  # 16 pixels
    built = []

    def detector():
        built.append(1)
        return ListedDetector([_candidate(_square(30, 30, 6), 0.9)])

    mask, how = instruction_mask(image, "mug", colour=PURPLE, min_colour_pixels=10, detector=detector)
    assert how == "colour" and mask.sum() == 16 and mask[5:9, 5:9].all() and not built


def test_below_the_floor_the_detectors_best_candidate_stands_for_the_object():
    image = np.full((48, 48, 3), 110, np.uint8)
    image[_square(5, 5, 4)] = PURPLE  # 16 pixels: under a floor of 20
    best, other = _square(30, 30, 6), _square(2, 30, 10)
    found = ListedDetector([_candidate(other, 0.4), _candidate(best, 0.8)])
    depth = np.ones((48, 48))
    mask, how = instruction_mask(image, "mug", colour=PURPLE, min_colour_pixels=20, detector=lambda: found,
                                 depth=depth)
    assert how == "detector" and (mask == best).all()
    assert found.prepared == ["mug"] and found.depths[0] is depth


def test_the_height_check_drops_candidates_before_the_best_is_taken():
    found = ListedDetector([_candidate(_square(30, 30, 4), 0.9), _candidate(_square(2, 2, 12), 0.5)])
    found.plane = np.array([0.0, 0.0, 1.0, 0.0])
    check = TallerThan(cols=6)
    mask, how = instruction_mask(np.zeros((48, 48, 3), np.uint8), "mug", colour=None, min_colour_pixels=20,
                                 detector=lambda: found, height_check=check, fovy_deg=45.0)
    assert how == "detector" and mask.sum() == 144
    assert check.calls[0][0] == "mug" and check.calls[0][1] is found.plane and check.calls[0][2] == 45.0


def test_nothing_found_is_no_mask():
    blank = np.zeros((48, 48, 3), np.uint8)
    assert instruction_mask(blank, "mug", colour=PURPLE, min_colour_pixels=10) == (None, "")
    mask, how = instruction_mask(blank, "mug", colour=None, min_colour_pixels=10, detector=lambda: ListedDetector([]))
    assert (mask, how) == (None, "")
