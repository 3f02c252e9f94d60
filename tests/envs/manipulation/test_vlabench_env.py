"""Personalized-VLABench env: check_env, determinism, options, delta actions and the metrics with the expert."""

import math

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from envs.errors import ConfigError  # noqa: E402
from envs.manipulation.vlabench.env import VLABenchOptions, make_env  # noqa: E402
from envs.manipulation.vlabench.tasks import TASKS  # noqa: E402
from policies.manipulation.vlabench_expert import VLABenchExpert  # noqa: E402

FAST = {"image_size": 64, "references": False}


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TASKS))
def test_check_env_every_task_through_its_gym_id(task):
    import gymnasium as gym

    from envs.registration import family_id

    env = gym.make(family_id("PersonalizedVLABench", task), **FAST, max_steps=5).unwrapped
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_same_seed_same_episode_and_four_views():
    a, b = make_env("select_my_in_box", FAST), make_env("select_my_in_box", FAST)
    try:
        oa, ia = a.reset(seed=7)
        ob, ib = b.reset(seed=7)
        assert set(oa["images"]) == {"left", "right", "front", "wrist"}
        assert np.array_equal(oa["image"], oa["images"]["front"])
        assert ia["instruction"] == ib["instruction"] and ia["personal_object"] == ib["personal_object"]
        for cam in oa["images"]:
            assert np.array_equal(oa["images"][cam], ob["images"][cam])
        act = np.array([0.05, 0.1, 1.0, math.pi, 0.0, 0.3, 1.0], np.float32)
        sa, sb = a.step(act)[0], b.step(act)[0]
        assert np.array_equal(sa["joints"], sb["joints"]) and np.array_equal(sa["images"]["wrist"],
                                                                             sb["images"]["wrist"])
        assert "my " in ia["instruction"] and 2 <= len(ia["distractors"]) <= 4 + 1
    finally:
        a.close()
        b.close()


def test_in_distribution_track_names_attributes():
    env = make_env("select_my_pick", {**FAST, "track": "in_distribution"})
    try:
        _, info = env.reset(seed=3)
        attrs = info["target_attributes"]
        assert "my " not in info["instruction"] and attrs["colour"] in info["instruction"]
        assert attrs["category"] in info["instruction"]
    finally:
        env.close()


def test_randomised_look_changes_the_room_only_and_is_seeded():
    from envs.manipulation.vlabench.appearance import room_look, training_look
    from envs.manipulation.vlabench.scene import Look

    plain = make_env("select_my_pick", {**FAST, "track": "in_distribution"})
    looks = [make_env("select_my_pick", {**FAST, "track": "in_distribution", "randomise_look": True})
             for _ in range(2)]
    try:
        op, ip = plain.reset(seed=3)
        oa, ia = looks[0].reset(seed=3)
        ob, _ = looks[1].reset(seed=3)
        assert np.array_equal(oa["image"], ob["image"])  # seeded
        assert ia["personal_object"] == ip["personal_object"]
        starts = [[o.start for o in env.unwrapped.objects] for env in (plain, looks[0])]
        assert np.allclose(starts[0], starts[1])  # same objects, same layout: only the room differs
        assert not np.array_equal(oa["image"], op["image"])
    finally:
        for env in (plain, *looks):
            env.close()
    # never one of unseen_texture's textures: surfaces are plain colours or smooth two-colour gradients
    rng = np.random.default_rng(0)
    drawn = [training_look(rng) for _ in range(20)]
    assert any(look.table_texture is None and look.table_rgba != Look().table_rgba for look in drawn)
    textures = [t for look in drawn for t in (look.table_texture, look.floor_texture) if t is not None]
    assert textures and all(_is_linear_gradient(t) for t in textures)
    rooms = [room_look(rng) for _ in range(20)]  # wood, tiles, noise: the check tells them apart
    assert not any(_is_linear_gradient(t) for look in rooms for t in (look.table_texture, look.floor_texture))


def _is_linear_gradient(path: str) -> bool:
    """Every row and column changes monotonically per channel, by at most a few levels per pixel."""
    from PIL import Image

    tex = np.asarray(Image.open(path).convert("RGB"), int)
    for axis in (0, 1):
        step = np.diff(tex, axis=axis)
        if np.abs(step).max() > 3:
            return False
        up, down = (step >= 0).all(axis=axis), (step <= 0).all(axis=axis)
        if not (up | down).all():
            return False
    return True


@pytest.mark.parametrize("options, message", [
    ({"track": "bogus"}, "bogus"),
    ({"cameras": "front,top"}, "top"),
    ({"image_size": 8}, "image_size"),
    ({"action_mode": "joint"}, "joint"),
    ({"num_distractors": 9}, "num_distractors"),
    ({"colour": "red"}, "colour"),
    ({"randomise_look": "sometimes"}, "randomise_look"),
])
def test_bad_options_are_config_errors(options, message):
    with pytest.raises(ConfigError, match=message):
        VLABenchOptions.from_options(options)


def test_unknown_task_is_config_error():
    with pytest.raises(ConfigError, match="select_my_pick"):
        make_env("select_my_fly", FAST)


def test_delta_mode_moves_along_robot_forward():
    env = make_env("select_my_pick", {**FAST, "action_mode": "delta", "cameras": "front"})
    try:
        obs, _ = env.reset(seed=1)
        y0 = float(obs["ee_pose"][1])
        for k in range(7):  # base frame +x = world +y (the robot faces +y); 4 moves, then 3 steps to arrive
            obs = env.step(np.array([0.03 if k < 4 else 0.0, 0, 0, 0, 0, 0, -1], np.float32))[0]
        assert float(obs["ee_pose"][1]) - y0 == pytest.approx(0.12, abs=0.02)
        assert float(obs["ee_state"][0]) == pytest.approx(float(obs["ee_pose"][1]) + 0.4, abs=1e-4)
    finally:
        env.close()


def test_expert_succeeds_and_scores_full_progress():
    env = make_env("select_my_pick", {**FAST, "cameras": "front"})
    try:
        obs, info = env.reset(seed=11)
        expert = VLABenchExpert(env)
        expert.reset(obs["instruction"], info)
        for _ in range(60):
            obs, reward, terminated, truncated, step_info = env.step(expert.act(obs))
            if terminated or truncated:
                break
        assert terminated and reward == 1.0
        assert step_info["success"] and step_info["correct_object"] and not step_info["wrong_object"]
        assert step_info["progress_score"] == 1.0 and step_info["intention_score"] == 1.0
    finally:
        env.close()
