"""Personalized-VLABench's shelf task and book category: layout, look-alikes, instructions, success with the expert."""

import math

import numpy as np
import pytest

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from envs.errors import ConfigError  # noqa: E402
from envs.manipulation.objects import CATEGORIES  # noqa: E402
from envs.manipulation.vlabench.books import BOOKS, book_texture, instances_of, x_extent  # noqa: E402
from envs.manipulation.vlabench.env import SHELF_GAP, make_env  # noqa: E402
from envs.manipulation.vlabench.tasks import PICK_PLACE_TASKS, TASKS  # noqa: E402
from policies.manipulation.vlabench_expert import VLABenchExpert  # noqa: E402

FAST = {"image_size": 32, "references": False, "cameras": "front"}


def test_books_only_in_the_new_tasks():
    for name in PICK_PLACE_TASKS:
        assert TASKS[name].categories == CATEGORIES and "book" not in CATEGORIES
    assert set(TASKS) - set(PICK_PLACE_TASKS) == {"select_my_from_shelf", "select_my_button"}
    for name in ("select_my_from_shelf", "select_my_button"):
        assert "book" in TASKS[name].categories


def test_every_test_book_has_a_same_colour_and_a_same_title_look_alike():
    test = instances_of("book", "test")
    train = instances_of("book", "train")
    assert len(test) == 8 and len(train) == 10
    assert not {(b.colour, b.word) for b in test} & {(b.colour, b.word) for b in train}
    for b in test:
        others = [o for o in test if o.instance_id != b.instance_id]
        assert any(o.colour == b.colour and o.word != b.word for o in others)
        assert any(o.word == b.word and o.colour != b.colour for o in others)
        assert b.pattern == b.word.lower()
    assert instances_of("book", "train_extended") == train
    with pytest.raises(ConfigError, match="split"):
        instances_of("book", "validation")


def test_book_covers_differ_by_title_and_by_colour():
    test = instances_of("book", "test")
    same_colour = next((a, b) for a in test for b in test if a.colour == b.colour and a.word != b.word)
    same_title = next((a, b) for a in test for b in test if a.word == b.word and a.colour != b.colour)
    for a, b in (same_colour, same_title):
        ta, tb = book_texture(a), book_texture(b)
        assert ta.shape == tb.shape == (128, 256, 3)
        assert np.mean(np.any(ta != tb, axis=2)) > 0.02  # a visible difference, not a stray pixel
    # The title is printed: the cover holds the base colour and the contrasting ink.
    tex = book_texture(BOOKS["book_10"])
    assert len(np.unique(tex.reshape(-1, 3), axis=0)) > 3


def test_x_extent_covers_turned_boxes_and_mug_handles():
    book = BOOKS["book_00"]
    assert x_extent(book, 0.0) == pytest.approx(book.radius)
    assert x_extent(book, math.pi / 2) == pytest.approx(book.radius * book.shape["depth"])
    mug = instances_of("mug", "test")[0]
    assert x_extent(mug, 0.0) > mug.radius


def test_shelf_row_fits_and_objects_stand_on_the_board():
    env = make_env("select_my_from_shelf", FAST)
    try:
        for seed in range(6):
            _, info = env.reset(seed=seed)
            ps = env.privileged_state()
            fx = ps["fixture"]
            assert fx["kind"] == "shelf" and info["receptacle"] == "shelf"
            board = 0.78 + fx["board"]
            xs = []
            for o in ps["objects"]:
                assert o["position"][2] == pytest.approx(board, abs=0.004)  # settled on the board, upright
                assert abs(o["position"][0] - fx["xy"][0]) < fx["half"]
                xs.append(o["position"][0])
            assert np.min(np.diff(np.sort(xs))) > SHELF_GAP  # one row, nothing stacked
            assert info["instruction"].count("my ") == 1 and "shelf" in info["instruction"]
    finally:
        env.close()


def test_generic_instruction_names_a_book_by_colour_and_title():
    env = make_env("select_my_from_shelf", {**FAST, "track": "in_distribution"})
    try:
        seen = 0
        for seed in range(80):
            _, info = env.reset(seed=seed)
            if info["category"] == "book" and info["instruction_style"] == "colour_pattern":
                attrs = info["target_attributes"]
                assert f"the {attrs['colour']} book titled {attrs['pattern'].upper()}" in info["instruction"]
                seen += 1
                break
        assert seen
    finally:
        env.close()


def test_standing_still_is_no_success():
    env = make_env("select_my_from_shelf", {**FAST, "max_steps": 3})
    try:
        obs, _ = env.reset(seed=2)
        hold = np.array([*obs["ee_pose"], -1.0], np.float32)
        for _ in range(3):
            obs, reward, terminated, truncated, info = env.step(hold)
        assert truncated and not terminated and reward == 0.0
        assert not info["success"] and info["progress_score"] == 0.0 and not info["correct_object"]
    finally:
        env.close()


@pytest.mark.slow
def test_expert_takes_my_object_and_my_book_out_of_the_shelf():
    env = make_env("select_my_from_shelf", FAST)
    try:
        categories = []
        for seed in (7, 11):  # my book among look-alike books; my mug (handle turned sideways)
            obs, info = env.reset(seed=seed)
            categories.append(info["category"])
            expert = VLABenchExpert(env)
            expert.reset(obs["instruction"], info)
            for _ in range(80):
                obs, reward, terminated, truncated, step = env.step(expert.act(obs))
                if terminated or truncated:
                    break
            assert terminated and step["success"] and step["correct_object"] and not step["wrong_object"]
            assert step["progress_score"] == 1.0 and step["intention_score"] == 1.0
        assert categories == ["book", "mug"]
    finally:
        env.close()
