"""Proposals, detectors, matching, tracking and prompting on synthetic RGB-D frames and real env frames."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from perception.candidate import box_of_mask, mask_iou
from perception.category import drop_personal, parse_category
from perception.detectors import OracleDetector, ProposalDetector, TransformersDetector, make_detector
from perception.matching import InstanceMatcher, MatcherConfig, load_reference_images, reference_mask
from perception.prompting import VisualPrompter, choose_colour, rewrite_instruction
from perception.proposals import colour_proposals, depth_proposals
from perception.synthetic import GRIPPER_ID, random_instances, reference_views, render_scene
from perception.tracking import MaskTracker, TrackerConfig

torch.set_num_threads(1)


def scene(seed: int, same_colour: bool = False, gripper: bool = False):
    rng = np.random.default_rng(seed)
    objs = random_instances(rng, 3, same_colour=same_colour)
    g = (objs[0].u, objs[0].v - 22, 7) if gripper else None
    return objs, render_scene(objs, rng=rng, gripper=g), rng


def majority(seg: np.ndarray, mask: np.ndarray) -> int:
    return int(np.bincount(seg[mask].ravel()).argmax())


def test_parse_category_and_rewrite():
    assert parse_category("pick up my mug") == "mug"
    assert parse_category("put my coffee mug on the plate") == "coffee mug"
    assert parse_category("move my can near the apple") == "can"
    with pytest.raises(ConfigError, match="no personal object"):
        parse_category("pick up the mug")
    assert drop_personal("pick up my mug") == "pick up the mug"
    assert rewrite_instruction("put my cup in the basket", "cup", "red") == "put the red cup in the basket"
    assert rewrite_instruction("pick up my mug", "mug") == "pick up the mug"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_proposals_recover_every_object(seed):
    objs, frame, _ = scene(seed, gripper=True)
    for masks in (depth_proposals(frame.depth), colour_proposals(frame.image)):
        ious = [max(mask_iou(m, frame.segmentation == k + 1) for m in masks) for k in (1, 2)]
        assert min(ious) > 0.8  # the un-occluded objects come out whole
    depth_masks = depth_proposals(frame.depth)
    # Depth separates the gripper from the object under it; colour alone cannot reach the same quality.
    assert max(mask_iou(m, frame.segmentation == 1) for m in depth_masks) > 0.85
    assert any(majority(frame.segmentation, m) == GRIPPER_ID for m in depth_masks)


def test_proposal_detector_scores_a_category_in_unit_range():
    _, frame, _ = scene(3)
    cands = ProposalDetector().detect(frame.image, "mug", depth=frame.depth)
    assert len(cands) >= 3
    assert all(0.0 <= c.score <= 1.0 for c in cands)
    assert [c.score for c in cands] == sorted((c.score for c in cands), reverse=True)
    assert all(c.box == box_of_mask(c.mask) for c in cands)


def test_oracle_detector_reads_segmentation_and_unknown_backend_is_a_config_error():
    _, frame, _ = scene(4)
    det = OracleDetector()
    det.reset({"personal_body_id": 2, "distractor_body_ids": [1, 3]})
    cands = det.detect(frame.image, "mug", segmentation=frame.segmentation)
    assert [c.extra["body_id"] for c in cands] == [2, 1, 3]
    assert np.array_equal(cands[0].mask, frame.segmentation == 2) and cands[0].score == 1.0
    assert det.detect(frame.image, "mug") == []  # no segmentation: nothing privileged to read
    # The other table-top bodies are not candidates, but their masks reach all_masks (the prompt colour's pool).
    det = OracleDetector(scene_ids_fn=lambda: [1, 2, 3, 99])
    det.reset({"personal_body_id": 2})
    cands = det.detect(frame.image, "mug", segmentation=frame.segmentation)
    assert [c.extra["body_id"] for c in cands] == [2]
    assert det.all_masks[0] is cands[0].mask and len(det.all_masks) == 3  # 99 is not in view
    assert [int(frame.segmentation[m].max()) for m in det.all_masks] == [2, 1, 3]
    with pytest.raises(ConfigError, match="valid: proposals, oracle"):
        make_detector("yolo")
    with pytest.raises(ConfigError, match="model_dir"):
        make_detector("transformers")


def _matcher_accuracy(components, seeds):
    det, m = ProposalDetector(), InstanceMatcher(MatcherConfig(components=components))
    hits = 0
    for seed in seeds:
        objs, frame, rng = scene(seed, same_colour=seed % 2 == 0)
        m.set_references(reference_views(objs[0], 3, rng))
        cands = det.detect(frame.image, "mug", depth=frame.depth)
        probs = m.score(frame.image, cands)
        assert np.all((probs >= 0) & (probs <= 1))
        hits += majority(frame.segmentation, cands[int(np.argmax(probs))].mask) == 1
    return hits


def test_matcher_finds_the_personal_instance_among_look_alikes():
    seeds = range(10, 22)
    assert _matcher_accuracy(("embedding", "colour", "keypoints"), seeds) >= 11


def test_calibration_fit_separates_positives():
    det, m = ProposalDetector(), InstanceMatcher()
    rows, labels = [], []
    for seed in range(30, 36):
        objs, frame, rng = scene(seed)
        m.set_references(reference_views(objs[0], 2, rng))
        cands = det.detect(frame.image, "mug", depth=frame.depth)
        rows.append(m.cues(m.views(frame.image, [c.mask for c in cands])))
        labels.append(np.array([majority(frame.segmentation, c.mask) == 1 for c in cands], float))
    fitted = m.fit_calibration(rows, labels)
    m2 = InstanceMatcher(fitted)
    p = np.concatenate([m2.combine(r) for r in rows])
    y = np.concatenate(labels)
    assert p[y == 1].min() > p[y == 0].max() - 0.2
    assert p[y == 1].mean() > 0.5 > p[y == 0].mean()


def test_reference_mask_keeps_a_patterned_object_whole():
    # A white bottle with green letters on a light-grey backdrop, and a white strip of sky along the top edge: the
    # mask must hold the white body (close to the backdrop in colour, apart in lightness), not only its green parts.
    img = np.full((120, 120, 3), (176, 177, 176), np.uint8)
    img[:4] = 255
    yy, xx = np.mgrid[:120, :120]
    body = (np.abs(xx - 60) <= 14) & (yy >= 30) & (yy <= 100)
    img[body] = (235, 238, 236)
    letters = body & ((yy // 8) % 2 == 0) & (np.abs(xx - 60) <= 8)
    img[letters] = (30, 150, 40)
    mask = reference_mask(img)
    assert mask[body].mean() > 0.97  # the whole body, letters and white together
    assert mask[~body].mean() < 0.03 and not mask[:4].any()  # neither the backdrop (bar a 1-px rim) nor the strip


def test_reference_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="no reference images"):
        load_reference_images([])
    with pytest.raises(ConfigError, match="unreadable"):
        load_reference_images([str(tmp_path / "missing.png")])
    (tmp_path / "bad.png").write_bytes(b"not a png")
    with pytest.raises(ConfigError, match="unreadable"):
        load_reference_images([str(tmp_path / "bad.png")])
    with pytest.raises(ConfigError, match="expected H×W×3"):
        load_reference_images([np.zeros((4, 4))])
    with pytest.raises(ConfigError, match="unknown matcher components"):
        MatcherConfig(components=("sift",))


def test_tracker_survives_gripper_occlusion_and_follows_motion():
    objs, frame, rng = scene(5)
    tracker = MaskTracker(TrackerConfig(every=1))
    tracker.start(frame.image, frame.segmentation == 1)
    occluded = render_scene(objs, gripper=(objs[0].u, objs[0].v - 10, 20))  # covers most of the object
    mask = tracker.update(occluded.image, occluded.depth)
    assert mask_iou(mask, frame.segmentation == 1) > 0.9  # coasted on the full mask, not jumped elsewhere
    assert tracker.coasting == 1
    visible = tracker.visible_mask(occluded.image)
    assert (occluded.segmentation[visible] == GRIPPER_ID).mean() < 0.2  # the gripper is not highlighted
    moved = [objs[0].__class__(**{**objs[0].__dict__, "u": objs[0].u + 4})] + objs[1:]
    shifted = render_scene(moved)
    mask = tracker.update(shifted.image, shifted.depth)
    assert mask_iou(mask, shifted.segmentation == 1) > 0.8


@pytest.mark.parametrize("style", ["recolour", "overlay", "outline", "dim", "crop"])
def test_prompter_styles_change_what_they_should(style):
    objs, frame, _ = scene(6)
    mask = frame.segmentation == 1
    others = [frame.segmentation == 2, frame.segmentation == 3]
    out, instr = VisualPrompter(style=style).prompt(frame.image, mask, "pick up my mug", "mug", others)
    assert out.shape == frame.image.shape and out.dtype == np.uint8
    changed = np.any(out != frame.image, axis=-1)
    if style == "recolour":
        colour = instr.split()[3]
        assert instr == f"pick up the {colour} mug"
        assert not changed[~mask].any() and changed[mask].mean() > 0.5
        v_in = frame.image[mask].max(axis=1).astype(float)
        v_out = out[mask].max(axis=1).astype(float)
        assert np.corrcoef(v_in, v_out)[0, 1] > 0.8  # shading preserved
    elif style in ("overlay", "outline"):
        assert not changed[~mask].any() and changed[mask].any() and instr == "pick up the mug"
    elif style == "dim":
        assert not changed[mask].any() and changed[~mask].mean() > 0.5
    else:
        assert changed.mean() > 0.5
    with pytest.raises(ConfigError, match="valid: recolour"):
        VisualPrompter(style="glow")


def test_choose_colour_avoids_distractor_hues():
    img = np.zeros((10, 30, 3), np.uint8)
    img[:, :10] = (200, 30, 30)  # a red distractor
    img[:, 10:20] = (235, 205, 30)  # a yellow distractor
    others = [np.zeros((10, 30), bool) for _ in range(2)]
    others[0][:, :10] = True
    others[1][:, 10:20] = True
    assert choose_colour(img, others, {"red": (200, 30, 30), "yellow": (235, 205, 30), "blue": (35, 70, 200)}) == "blue"
    # With a hue margin the palette order is a preference: the first colour far enough from every distractor.
    palette = {"red": (200, 30, 30), "green": (40, 160, 50), "blue": (35, 70, 200), "purple": (130, 45, 170)}
    # Hues: red 0°, yellow 52°, green 126°, blue 228°, purple 280°.
    assert choose_colour(img, others, palette) == "blue"  # farthest: 132° from red, 176° from yellow
    assert choose_colour(img, others, palette, margin=60) == "green"  # 74° from yellow: enough, and before blue
    assert choose_colour(img, others, palette, margin=80) == "blue"
    assert choose_colour(img, others[1:], palette, margin=50) == "red"  # only yellow left: red is 52° away
    assert choose_colour(img, others, {"red": (200, 30, 30)}, margin=170) == "red"  # none far enough: farthest
    with pytest.raises(ConfigError, match="hue margin"):
        VisualPrompter(hue_margin=200)


def _tiny_owlv2(folder):
    """A randomly initialised OWLv2 with a 30-token BPE vocabulary, saved like a real checkpoint."""
    from transformers import CLIPTokenizer, Owlv2Config, Owlv2ForObjectDetection, Owlv2ImageProcessor, Owlv2Processor

    words = ["a", "photo", "of", "mug", "cup", "can"]
    vocab = {"!": 0, "<|startoftext|>": 1, "<|endoftext|>": 2}  # OWL treats id 0 as padding
    for c in "abcdefghijklmnopqrstuvwxyz.":
        vocab.setdefault(c, len(vocab))
        vocab.setdefault(c + "</w>", len(vocab))
    merges = ["#version: 0.2"]
    for w in words:
        cur = w[0]
        for i, ch in enumerate(w[1:]):
            piece = ch + ("</w>" if i == len(w) - 2 else "")
            merges.append(f"{cur} {piece}")
            cur += piece
            vocab.setdefault(cur, len(vocab))
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("\n".join(merges) + "\n")
    tok = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    small = dict(hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=2)
    cfg = Owlv2Config(text_config=dict(vocab_size=len(vocab) + 2, max_position_embeddings=16, bos_token_id=1,
                                       eos_token_id=2, pad_token_id=0, **small),
                      vision_config=dict(image_size=64, patch_size=16, **small), projection_dim=32)
    torch.manual_seed(0)
    out = folder / "owlv2"
    Owlv2ForObjectDetection(cfg).save_pretrained(out)
    processor = Owlv2Processor(image_processor=Owlv2ImageProcessor(size={"height": 64, "width": 64}), tokenizer=tok)
    processor.save_pretrained(out)
    return out


def test_transformers_backend_loads_a_local_owlv2_and_runs_on_a_real_frame(tmp_path):
    folder = _tiny_owlv2(tmp_path)
    det = make_detector("transformers", model_dir=str(folder))
    assert isinstance(det, TransformersDetector) and det.kind == "owlv2"
    det.box_threshold = 0.0
    _, frame, _ = scene(7)
    cands = det.detect(frame.image, "mug", depth=frame.depth)
    assert len(cands) == (64 // 16) ** 2  # one box per image patch
    for c in cands:
        x0, y0, x1, y1 = c.box
        assert 0 <= x0 < x1 <= 128 and 0 <= y0 < y1 <= 128 and c.mask.shape == (128, 128) and c.mask.any()
    with pytest.raises(ConfigError, match="no config.json"):
        TransformersDetector(tmp_path / "nothing")


def test_external_embedder_from_local_folder(tmp_path):
    from transformers import Dinov2Config, Dinov2Model

    from perception.embedders import HFImageEmbedder

    torch.manual_seed(0)
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
                             image_size=56, patch_size=14)).save_pretrained(tmp_path / "dino")
    emb = HFImageEmbedder(tmp_path / "dino")
    objs, frame, rng = scene(8)
    m = InstanceMatcher(MatcherConfig(components=("embedding",)), embedder=emb)
    m.set_references(reference_views(objs[0], 2, rng))
    probs = m.score(frame.image, OracleDetector().detect(frame.image, "mug") or [
        c for c in ProposalDetector().detect(frame.image, "mug", depth=frame.depth)])
    assert probs.ndim == 1 and len(probs) >= 3 and np.all(np.isfinite(probs))
    assert m.references[0].embedding.shape == (32,)


def test_stacked_fragments_get_a_union_but_neighbours_do_not():
    from perception.proposals import stacked_unions

    body = np.zeros((64, 64), bool)
    body[30:50, 20:36] = True
    rim = np.zeros_like(body)
    rim[24:30, 21:35] = True  # the inside of the cup, right above the body, same width
    beside = np.zeros_like(body)
    beside[30:50, 40:56] = True  # a neighbour at the same height, touching nothing vertically
    far = np.zeros_like(body)
    far[2:12, 20:36] = True  # same column, but a gap: not touching
    unions = stacked_unions([body, rim, beside, far])
    assert len(unions) == 1
    assert (unions[0] >= (body | rim)).all() and not (unions[0] & (beside | far)).any()
    assert mask_iou(unions[0], body | rim) > 0.95


def test_margins_ignore_overlapping_alternatives():
    from perception.matching import margins, overlap_matrix

    a, b, c = (np.zeros((8, 8), bool) for _ in range(3))
    a[0:4, 0:4] = True
    b[0:6, 0:6] = True  # a larger mask of the same object as a
    c[6:8, 6:8] = True  # another object
    ov = overlap_matrix([a, b, c])
    assert ov.tolist() == [[True, True, False], [True, True, False], [False, False, True]]
    val = np.array([0.9, 0.8, 0.5])
    assert np.allclose(margins(val), [0.1, -0.1, -0.4])  # plain: against the best other
    assert np.allclose(margins(val, ov), [0.4, 0.3, -0.4])  # a and b are not each other's competitors
    assert np.allclose(margins(np.array([0.3]), np.ones((1, 1), bool)), [0.0])


def test_a_union_yields_to_the_part_that_alone_matches_better():
    from perception.matching import prefer_part

    mine, other, elsewhere = (np.zeros((12, 12), bool) for _ in range(3))
    mine[6:12, 2:8] = True
    other[0:6, 2:8] = True  # the look-alike just behind (above in the image)
    elsewhere[0:3, 9:12] = True
    union = mine | other
    masks = [union, mine, other, elsewhere]
    # the union inherited my object's margin and won; alone, my object matches the references clearly better
    assert prefer_part(masks, 0, np.array([6.7, 8.2, 6.1, 5.0])) == 1
    # fragments of one object score about like their union: keep the whole object
    assert prefer_part(masks, 0, np.array([6.1, 6.15, 6.0, 5.0])) == 0
    # one contained candidate is not a union of parts; a winner that is a part stays itself
    assert prefer_part([union, mine, elsewhere], 0, np.array([6.0, 9.0, 5.0])) == 0
    assert prefer_part(masks, 1, np.array([9.0, 6.0, 6.0, 5.0])) == 1


def test_score_with_cues_matches_score():
    matcher = InstanceMatcher()
    objs, frame, rng = scene(3, same_colour=True)
    matcher.set_references(reference_views(objs[0], 2, rng))
    cands = ProposalDetector().detect(frame.image, "mug", depth=frame.depth)
    probs, cues = matcher.score_with_cues(frame.image, cands)
    assert np.allclose(probs, matcher.score(frame.image, cands))
    assert set(cues) == set(matcher.config.components) and all(len(v) == len(cands) for v in cues.values())
    assert matcher.absolute(cues).shape == (len(cands),)

def test_embedder_cache_shares_one_pass_and_matches_the_network():
    from perception.embedders import MobileNetEmbedder
    from perception.mobilenet_v2 import class_probabilities, pooled_features

    _, frame, _ = scene(6)
    crops = np.stack([frame.image[:48, :48], frame.image[-48:, -48:]])
    emb = MobileNetEmbedder(cache_size=8)
    first = emb.pooled(crops)
    assert len(emb._cache) == 2
    assert np.allclose(first, pooled_features(crops, size=None), atol=1e-5)
    assert np.allclose(emb.class_probabilities(crops), class_probabilities(crops, size=None), atol=1e-5)
    assert len(emb._cache) == 2  # the classifier reused the cached pooled features
    assert np.allclose(np.linalg.norm(emb.embed(crops[::-1]), axis=1), 1.0)


def test_embedder_cache_overflow_keeps_the_hits_of_the_same_call():
    from perception.embedders import MobileNetEmbedder
    from perception.mobilenet_v2 import pooled_features

    _, frame, _ = scene(6)
    crops = np.stack([frame.image[i:i + 32, i:i + 32] for i in range(0, 60, 20)])  # 3 distinct crops
    emb = MobileNetEmbedder(cache_size=2)
    emb.pooled(crops[:2])  # cache full
    both = emb.pooled(crops[1:])  # one hit + one miss: the miss overflows and clears the cache
    assert np.allclose(both, pooled_features(crops[1:], size=None), atol=1e-5)


def test_colour_ranker_keeps_the_plausible_proposals():
    objs, frame, rng = scene(7)
    m = InstanceMatcher(MatcherConfig(components=("colour",)))
    m.set_references(reference_views(objs[0], 2, rng))
    all_masks = ProposalDetector(max_candidates=50).proposals(frame.image, frame.depth)
    ranked = ProposalDetector(max_candidates=1, ranker=m.colour_similarity).proposals(frame.image, frame.depth)
    assert len(all_masks) >= 3 and len(ranked) == 1
    sims = m.colour_similarity(frame.image, all_masks)
    assert np.array_equal(ranked[0], all_masks[int(np.argmax(sims))])
    assert majority(frame.segmentation, ranked[0]) == 1  # the personal object has the reference colours


def test_tracker_skips_relocalisation_while_nothing_moves():
    objs, frame, _ = scene(8)
    calls = []

    def counting_proposals(image, depth):
        calls.append(image.shape)
        return depth_proposals(depth) if depth is not None else colour_proposals(image)

    tracker = MaskTracker(TrackerConfig(every=1), proposals=counting_proposals)
    tracker.start(frame.image, frame.segmentation == 1)
    for _ in range(3):
        tracker.update(frame.image, frame.depth)
    assert tracker.skipped == 3 and calls == []  # identical frames: no proposals computed at all
    moved = [objs[0].__class__(**{**objs[0].__dict__, "u": objs[0].u + 5})] + objs[1:]
    shifted = render_scene(moved)
    mask = tracker.update(shifted.image, shifted.depth)
    assert len(calls) == 1 and calls[0][0] * calls[0][1] < 0.5 * frame.image.shape[0] * frame.image.shape[1]
    assert mask_iou(mask, shifted.segmentation == 1) > 0.8


def test_plane_fitted_once_gives_the_same_window_proposals_as_a_fresh_fit():
    from perception.proposals import (
        ProposalConfig,
        fit_inverse_depth_plane,
        fit_plane_inverse_depth,
        height_above_plane,
    )

    objs, frame, _ = scene(9)
    depth = np.asarray(frame.depth, np.float64)
    plane = fit_inverse_depth_plane(depth, ProposalConfig())
    assert np.allclose(height_above_plane(depth, plane), fit_plane_inverse_depth(depth, ProposalConfig()))
    ys, xs = slice(10, 70), slice(20, 100)  # a window evaluated against the whole frame's plane
    window = height_above_plane(depth[ys, xs], plane, origin=(ys.start, xs.start), frame_shape=depth.shape)
    assert np.allclose(window, height_above_plane(depth, plane)[ys, xs])
    full = depth_proposals(frame.depth)
    reused = depth_proposals(frame.depth, plane=plane)
    assert len(full) == len(reused) and all(np.array_equal(a, b) for a, b in zip(full, reused, strict=True))


def test_tracker_reuses_the_detector_plane_and_visible_mask_stays_inside_the_box():
    objs, frame, _ = scene(10)
    detector = ProposalDetector()
    detector.proposals(frame.image, frame.depth)
    assert detector.plane is not None
    own, shared = MaskTracker(TrackerConfig(every=1)), MaskTracker(TrackerConfig(every=1))
    own.start(frame.image, frame.segmentation == 1, depth=frame.depth)
    shared.start(frame.image, frame.segmentation == 1, depth=frame.depth, plane=detector.plane)
    assert np.allclose(own.plane, shared.plane)
    moved = [objs[0].__class__(**{**objs[0].__dict__, "u": objs[0].u + 4})] + objs[1:]
    shifted = render_scene(moved)
    assert np.array_equal(own.update(shifted.image, shifted.depth), shared.update(shifted.image, shifted.depth))
    assert mask_iou(shared.mask, shifted.segmentation == 1) > 0.8
    visible = shared.visible_mask(shifted.image)
    assert visible.shape == shared.mask.shape and not (visible & ~shared.mask).any() and visible.sum() > 0


def test_box_of_mask_and_fast_percentile_match_the_plain_numpy_versions():
    from perception.prompting import _percentile

    rng = np.random.default_rng(0)
    for _ in range(20):
        m = np.zeros((40, 50), bool)
        if rng.random() < 0.9:
            y, x = rng.integers(0, 39), rng.integers(0, 49)
            m[y:y + rng.integers(1, 10), x:x + rng.integers(1, 10)] = True
        ys, xs = np.nonzero(m)
        want = (0, 0, 0, 0) if not len(xs) else (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
        assert box_of_mask(m) == tuple(int(v) for v in want)
        values = rng.random(int(rng.integers(1, 300))).astype(np.float32) * 255
        assert _percentile(values, 95.0) == pytest.approx(float(np.percentile(values, 95.0)), rel=1e-6)


def test_embedder_input_size_resizes_crops_and_rejects_tiny_sizes():
    from perception.embedders import MobileNetEmbedder, make_embedder
    from perception.mobilenet_v2 import pooled_features

    _, frame, _ = scene(6)
    crops = np.stack([frame.image[:48, :48], frame.image[-48:, -48:]])
    small = make_embedder(None, input_size=64)
    assert np.allclose(small.pooled(crops), pooled_features(crops, size=64), atol=1e-5)
    with pytest.raises(ConfigError, match="embedder input size must be >= 32"):
        MobileNetEmbedder(input_size=16)


def test_references_are_featurised_in_one_batch_like_one_by_one():
    rng = np.random.default_rng(12)
    refs = reference_views(random_instances(rng, 1)[0], 3, rng)
    together = InstanceMatcher()
    together.set_references(refs)
    alone = InstanceMatcher()
    views = [alone.views(r, [reference_mask(r)])[0] for r in refs]
    for a, b in zip(together.references, views, strict=True):
        assert np.allclose(a.embedding, b.embedding, atol=1e-5)
        assert np.array_equal(a.hist, b.hist) and np.array_equal(a.points, b.points)
        assert np.array_equal(a.descriptors, b.descriptors)
    assert together.set_references(refs[:2] + refs[:1]) == 3  # cached views, a repeated one reused


def test_edge_pixels_go_back_to_the_nearest_component_as_on_the_whole_frame():
    from scipy import ndimage

    from perception.proposals import ProposalConfig, _components

    for seed in range(3):
        _, frame, _ = scene(20 + seed)
        depth = np.asarray(frame.depth, np.float64)
        fg = depth < np.percentile(depth, 40)
        gy, gx = np.gradient(depth)
        split = np.hypot(gx, gy) / depth > 0.03
        cfg = ProposalConfig()
        # The plain computation the box-restricted one replaces: nearest labelled pixel over the whole frame.
        core = ndimage.binary_opening(fg & ~split, structure=np.ones((2, 2), bool))
        labels, n = ndimage.label(core)
        _, (iy, ix) = ndimage.distance_transform_edt(labels == 0, return_indices=True)
        labels = np.where(fg & (labels == 0), labels[iy, ix], labels)
        labels[~fg] = 0
        lo, hi = cfg.min_area_frac * fg.size, cfg.max_area_frac * fg.size
        expected = [ndimage.binary_fill_holes(labels == k) for k in range(1, n + 1)
                    if lo <= (labels == k).sum() <= hi]
        got = _components(fg, cfg, split=split)
        assert len(got) == len(expected) > 0
        assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))


def test_plane_fit_recovers_the_table_among_outliers_deterministically():
    from perception.proposals import ProposalConfig, fit_inverse_depth_plane

    h, w = 60, 80
    yy, xx = np.mgrid[0:h, 0:w]
    true = np.array([0.3, -0.5, 1.2])
    inv = true[0] * xx / w + true[1] * yy / h + true[2]
    rng = np.random.default_rng(0)
    outliers = rng.random((h, w)) < 0.3
    inv = np.where(outliers, inv + rng.uniform(0.05, 0.5, (h, w)), inv)  # objects: nearer than the table
    depth = 1.0 / inv
    plane = fit_inverse_depth_plane(depth, ProposalConfig())
    assert np.allclose(plane, true, atol=1e-6)
    assert np.array_equal(plane, fit_inverse_depth_plane(depth, ProposalConfig()))
    assert fit_inverse_depth_plane(np.full((h, w), np.nan), ProposalConfig()) is None
