"""The print-layout cue: a print matches itself under a small shift, not its mirror, upside-down turn or recrop."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import matplotlib
import numpy as np

from perception.candidate import object_crop
from perception.layout import layout_signature, layout_similarity
from perception.matching import InstanceMatcher, MatcherConfig


def _photo() -> np.ndarray:
    img = cv2.imread(str(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"))
    return cv2.cvtColor(cv2.resize(img, (60, 80)), cv2.COLOR_BGR2RGB)


def _on_table(print_: np.ndarray, dx: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The print as an object on a grey 128² frame (offset ``dx`` px), with its mask."""
    frame = np.full((128, 128, 3), 110, np.uint8)
    mask = np.zeros((128, 128), bool)
    frame[24:104, 34 + dx:94 + dx] = print_
    mask[24:104, 34 + dx:94 + dx] = True
    return frame, mask


def _signature(print_: np.ndarray, dx: int = 0):
    return layout_signature(*object_crop(*_on_table(print_, dx), 96))


def test_a_print_matches_itself_better_than_its_mirror_turn_or_recrop():
    photo = _photo()
    ref = _signature(photo)
    h, w = photo.shape[:2]
    zoom = cv2.resize(photo[h // 4:h // 4 + h // 2, w // 4:w // 4 + w // 2], (w, h))
    rolled = np.roll(photo, 6, axis=1)  # the body turned a little: the print moves sideways
    sims = layout_similarity([_signature(p) for p in (photo, rolled, photo[:, ::-1], photo[::-1, ::-1], zoom)],
                             [ref])
    assert sims[0] > 0.99  # identical
    assert sims[1] > 0.8  # a sideways shift is searched over
    assert sims[1] > max(sims[2:]) + 0.1, sims


def test_layout_similarity_is_in_range_and_empty_inputs_give_empty_output():
    photo = _photo()
    sims = layout_similarity([_signature(photo), _signature(255 - photo)], [_signature(photo), _signature(photo, 3)])
    assert sims.shape == (2,) and np.all((sims >= -1) & (sims <= 1 + 1e-6)) and sims[0] > sims[1]
    assert layout_similarity([], [_signature(photo)]).shape == (0,)
    assert layout_similarity([_signature(photo)], []).tolist() == [0.0]


def _mirror_and_print() -> tuple[np.ndarray, list[np.ndarray], dict]:
    """One frame: the mirrored print on the left, the user's print (turned a little) on the right; the reference."""
    photo = _photo()
    frame_ref, mask_ref = _on_table(photo)
    frame = np.full((128, 256, 3), 110, np.uint8)
    left, right = np.zeros((128, 256), bool), np.zeros((128, 256), bool)
    frame[24:104, 20:80], left[24:104, 20:80] = photo[:, ::-1], True
    frame[24:104, 150:210], right[24:104, 150:210] = np.roll(photo, 6, axis=1), True
    return frame, [left, right], {"image": frame_ref, "mask": mask_ref}


def test_matcher_with_the_layout_cue_prefers_the_print_over_its_mirror():
    frame, masks, ref = _mirror_and_print()
    matcher = InstanceMatcher(MatcherConfig(layout_min_refs=1))
    assert "layout" in matcher.config.components
    matcher.set_references([ref])
    cues = matcher.cues(matcher.views(frame, masks))
    assert cues["layout"][1] > cues["layout"][0] + 0.1


def test_with_few_references_the_layout_cue_is_left_out():
    frame, masks, ref = _mirror_and_print()
    from perception.candidate import Candidate, box_of_mask

    cands = [Candidate(box=box_of_mask(m), mask=m, score=1.0) for m in masks]
    with_layout = InstanceMatcher(MatcherConfig())  # default: 8 references or more
    without = InstanceMatcher(MatcherConfig(components=("embedding", "colour", "keypoints")),
                              embedder=with_layout.embedder)
    for m in (with_layout, without):
        m.set_references([ref] * 3)
    probs, cues = with_layout.score_with_cues(frame, cands)
    assert np.all(cues["layout"] == 0)
    assert np.allclose(probs, without.score(frame, cands))


def test_a_plain_patch_does_not_match_a_print_by_its_shading():
    photo = _photo()
    ramp = np.linspace(100, 140, 60, dtype=np.float32)[None, :, None]  # a white mug's inside: shading, no print
    plain = np.broadcast_to(ramp + np.zeros((80, 1, 3), np.float32), (80, 60, 3)).astype(np.uint8)
    sims = layout_similarity([_signature(plain), _signature(np.roll(photo, 6, axis=1))], [_signature(photo)])
    assert sims[0] < 0.3 < sims[1], sims


def _print_and_turned_print():
    """A frame with the print and the print upside down, and a reference of the print."""
    photo = cv2.resize(_photo(), (120, 160))
    frame = np.full((200, 360, 3), 110, np.uint8)
    masks = [np.zeros((200, 360), bool) for _ in range(2)]
    frame[20:180, 20:140], masks[0][20:180, 20:140] = photo, True
    frame[20:180, 220:340], masks[1][20:180, 220:340] = photo[::-1, ::-1], True  # the print turned upside down
    ref_frame, ref_mask = np.full((200, 200, 3), 110, np.uint8), np.zeros((200, 200), bool)
    ref_frame[20:180, 40:160], ref_mask[20:180, 40:160] = photo, True
    return frame, masks, {"image": ref_frame, "mask": ref_mask}


def test_with_the_layout_cue_on_keypoints_need_an_upright_unscaled_fit():
    frame, masks, ref = _print_and_turned_print()
    # never skipped here: this is about the fit (the other cues alone already tell these two apart)
    matcher = InstanceMatcher(MatcherConfig(layout_min_refs=1, keypoint_skip_gap=math.inf))
    matcher.set_references([ref])
    ref = matcher.references[0]
    same, turned = matcher.views(frame, masks)
    assert matcher._inliers(turned, ref) > 8  # any fit: the turned print matches by a 180° similarity
    assert matcher._inliers(turned, ref, upright=True) == 0
    assert matcher._inliers(same, ref, upright=True) > 8
    cues = matcher.cues([same, turned])
    assert cues["keypoints"][0] > 0.5 and cues["keypoints"][1] == 0


def test_a_clear_lead_of_the_other_cues_skips_the_keypoint_cue():
    frame, masks, ref = _print_and_turned_print()
    full = InstanceMatcher(MatcherConfig(layout_min_refs=1, keypoint_skip_gap=math.inf))
    lean = InstanceMatcher(MatcherConfig(layout_min_refs=1), embedder=full.embedder)  # default gap
    for m in (full, lean):
        m.set_references([ref])
    views = full.views(frame, masks)
    every, skipped = full.cues(views), lean.cues(views)
    assert every["keypoints"][0] > 0.5 and np.all(skipped["keypoints"] == 0)
    for cue in ("embedding", "colour", "layout"):
        assert np.array_equal(every[cue], skipped[cue])
    assert np.argmax(full.combine(every)) == np.argmax(lean.combine(skipped)) == 0  # the same choice
    # two masks of one object are not competitors: no lead over anything, so the keypoints are computed
    together = lean.cues(views, overlap=np.ones((2, 2), bool))
    assert together["keypoints"][0] > 0.5
