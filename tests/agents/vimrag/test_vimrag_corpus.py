"""The corpus' clips and slot questions: names as the keyframe camera shows them, one object per named slot."""

from __future__ import annotations

import re

import numpy as np
import pytest

from envs.manipulation.objects import COLOURS
from envs.manipulation.scene import project_to_image
from envs.rag.corpus import _SLOTS, MID_FRAMES, QUESTION_TYPES, slot_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(tiny_stack):
    return tiny_stack  # tests/conftest.py


def _slot_pixels(size: int) -> dict[str, tuple[int, int]]:
    uv = project_to_image("fractal", np.array([[x, y, 0.03] for x, y in _SLOTS]))
    return {slot_name(s): tuple(((uv[s] + 1) / 2 * size).astype(int)) for s in range(len(_SLOTS))}


def test_slot_names_follow_the_keyframe_camera() -> None:
    px = _slot_pixels(112)
    assert len(px) == 9 and "centre" in px
    for row in ("back", "middle", "front"):
        left = px["middle-left" if row == "middle" else f"{row}-left"]
        centre = px["centre" if row == "middle" else f"{row}-centre"]
        right = px["middle-right" if row == "middle" else f"{row}-right"]
        assert left[0] < centre[0] < right[0]
    for col in ("left", "right"):
        assert px[f"back-{col}"][1] < px[f"middle-{col}"][1] < px[f"front-{col}"][1]


def test_each_slot_question_names_an_occupied_slot_of_its_keyframe(stack) -> None:
    kb = stack[0]
    corpus = kb.corpus
    px = _slot_pixels(corpus.pixels.shape[1])
    slot_qs = [q for q in corpus.questions if q.qtype == "slot_colour"]
    runs = {q.qid.split("/")[0] for q in corpus.questions}
    for split in ("dev", "test"):  # one per run there; the train split asks about every occupied slot
        split_runs = {q.qid.split("/")[0] for q in corpus.split(split)}
        assert len([q for q in slot_qs if q.split == split]) == len(split_runs)
    assert len([q for q in slot_qs if q.split == "train"]) >= 5 * len({q.qid.split("/")[0] for q in
                                                                    corpus.split("train")})
    assert len(runs) == 10
    for q in slot_qs:
        m = re.search(r"the (start|end) keyframe of run (R-\d+), .* the ([a-z-]+) slot", q.text)
        assert m is not None, q.text
        frame = "0" if m.group(1) == "start" else "1"
        assert q.gold == (f"log:{m.group(2)}", f"kf:{m.group(2)}:{frame}")
        image = corpus.pixels[corpus.image_row[q.gold[1]]].astype(float)
        x, y = px[m.group(3)]
        patch = image[y - 8:y + 2, x - 4:x + 5].reshape(-1, 3)  # the object's lower body, above its base point
        # The answer's colour is painted there (shading and patterns keep some pixels near the paint colour).
        assert np.linalg.norm(patch - np.array(COLOURS[q.answer]), axis=1).min() < 65, q.text


def test_run_logs_link_their_clip_in_order_and_the_placed_object_moves(stack) -> None:
    corpus = stack[0].corpus
    log = next(d for d in corpus.documents if d.kind == "run_log")
    run = log.doc_id.split(":", 1)[1]
    frames = [f"kf:{run}:0", *(f"kf:{run}:m{k}" for k in range(1, MID_FRAMES + 1)), f"kf:{run}:1"]
    assert list(log.links[:-1]) == frames and log.links[-1].startswith("card:")
    kinds = [corpus.item(f).kind for f in frames]
    assert kinds == ["keyframe_start", *["keyframe_mid"] * MID_FRAMES, "keyframe_end"]
    pix = [corpus.pixels[corpus.image_row[f]].astype(int) for f in frames]
    for a, b in zip(pix, pix[1:], strict=False):
        assert np.abs(a - b).sum() > 0  # every frame shows the carried object somewhere else


def test_reader_and_planner_are_fitted_on_disjoint_runs_and_types_are_drawn_evenly(stack) -> None:
    from envs.errors import ConfigError
    from envs.rag.corpus import QUESTION_TYPES, fitting_half, sample_by_type

    train = stack[0].corpus.split("train")
    reader, planner = fitting_half(train, "reader"), fitting_half(train, "planner")
    runs = {part: {q.qid.split("/")[0] for q in qs} for part, qs in (("reader", reader), ("planner", planner))}
    assert runs["reader"] and runs["planner"] and not runs["reader"] & runs["planner"]
    assert sorted(q.qid for q in reader + planner) == sorted(q.qid for q in train)
    with pytest.raises(ConfigError, match="unknown fitting part 'critic'"):
        fitting_half(train, "critic")
    drawn = sample_by_type(train, np.random.default_rng(0), 5000)
    counts = [sum(q.qtype == t for q in drawn) for t in {q.qtype for q in train}]
    assert len(counts) >= len(QUESTION_TYPES) - 1 and max(counts) - min(counts) < 250  # slot questions are not ~60 %


@pytest.mark.parametrize("qtype", sorted(QUESTION_TYPES))
def test_every_question_type_passes_check_env_through_its_gym_id(qtype, stack) -> None:
    import gymnasium as gym

    import envs.rag  # noqa: F401  (registers the ids)
    from envs.registration import family_id
    from tests.envs.test_gym_ids import checked

    env = gym.make(family_id("VimRAG", qtype), corpus_dir=str(stack[3]), split="train")
    checked(env)
    obs, _ = env.reset(seed=0)
    assert obs["qid"] in {q.qid for q in stack[0].corpus.split("train", qtype)}
    _, reward, terminated, _, info = env.step("nothing")
    assert terminated and info["answer"] == "nothing" and reward == 0.0
