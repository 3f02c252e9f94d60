"""Personalized-SIMPLER env: API, determinism, check_env, metrics, references and bad configuration."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs.errors import ConfigError
from envs.manipulation import gym_id
from envs.manipulation.env import ALL_TASKS, PersonalizedSimplerEnv, make_env
from envs.manipulation.objects import COLOURS, LIBRARY
from envs.manipulation.scene import project_to_image

SMALL = {"image_size": 64}


@pytest.mark.parametrize("task", sorted(ALL_TASKS))
def test_check_env_every_task_through_its_gym_id(task):
    env = gym.make(gym_id(task), **SMALL, privileged=True, references=False).unwrapped
    check_env(env, skip_render_check=True)
    env.close()


def test_observation_and_info_api():
    env = make_env("fractal_pick_my", {"image_size": 96, "privileged": True, "num_distractors": 3})
    obs, info = env.reset(seed=3)
    assert obs["image"].shape == (96, 96, 3) and obs["image"].dtype == np.uint8
    assert obs["ee_state"].shape == (6,) and obs["ee_state"].dtype == np.float32
    assert obs["depth"].dtype == np.float32 and obs["segmentation"].dtype == np.int32
    assert obs["instruction"] == f"pick up my {info['category']}"
    assert info["task"] == "fractal_pick_my" and LIBRARY[info["personal_object"]].split == "test"
    assert len(info["distractors"]) == 3
    target = LIBRARY[info["personal_object"]]
    dis = [LIBRARY[d] for d in info["distractors"]]
    assert all(d.category == target.category for d in dis)
    assert any(d.colour == target.colour or d.pattern == target.pattern for d in dis)  # a hard negative
    refs = info["reference_images"]
    assert len(refs) == 4 and all(r.shape == (96, 96, 3) and r.dtype == np.uint8 for r in refs)
    assert not any(np.array_equal(refs[0], r) for r in refs[1:])  # varied views
    assert not any(np.array_equal(obs["image"], r) for r in refs)
    # the oracle mask of the personal object is visible and sits where depth is on the table
    mask = obs["segmentation"] == env.unwrapped.personal_body_id
    assert mask.sum() > 15
    assert 0.3 < float(np.median(obs["depth"][mask])) < 1.5
    gripper_closed_cmd = obs["ee_state"][5]
    assert gripper_closed_cmd == 0.0 and 0.07 < obs["ee_state"][4] <= 0.081
    env.close()


def test_generic_instructions_name_unique_attributes():
    env = make_env("bridge_pick", {**SMALL, "split": "test"})
    styles = set()
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        attrs = info["target_attributes"]
        assert attrs["colour"] in COLOURS and attrs["colour"] in obs["instruction"]
        assert "my" not in obs["instruction"].split() and info["reference_images"] == []
        others = [LIBRARY[d] for d in info["distractors"]]
        assert others, "generic episodes have same-category look-alikes"
        if info["instruction_style"] == "colour":
            assert all(o.colour != attrs["colour"] for o in others)
        else:
            assert all((o.colour, o.pattern) != (attrs["colour"], attrs["pattern"]) for o in others)
        styles.add(info["instruction_style"])
    assert styles == {"colour", "colour_pattern"}
    env.close()


def test_same_seed_same_episode_and_different_seed_differs():
    env_a, env_b = make_env("bridge_put_my_on", SMALL), make_env("bridge_put_my_on", SMALL)
    rng = np.random.default_rng(0)
    actions = rng.uniform(env_a.action_space.low, env_a.action_space.high, (6, 7)).astype(np.float32)
    trajs = []
    for env in (env_a, env_b, env_a):
        obs, info = env.reset(seed=11)
        frames = [obs["image"]]
        for a in actions:
            obs, _, _, _, step_info = env.step(a)
            frames.append(obs["image"])
        state = env.unwrapped.privileged_state()
        trajs.append((info["personal_object"], np.stack(frames), np.stack([o["position"] for o in state["objects"]]),
                      step_info))
    for other in trajs[1:]:
        assert other[0] == trajs[0][0]
        assert np.array_equal(other[1], trajs[0][1])
        assert np.allclose(other[2], trajs[0][2], atol=1e-9)
        assert other[3] == trajs[0][3]
    obs2, info2 = env_a.reset(seed=12)
    assert not np.array_equal(obs2["image"], trajs[0][1][0])
    env_a.close()
    env_b.close()


def test_envs_in_one_process_do_not_interfere():
    a, b = make_env("fractal_pick_my", SMALL), make_env("fractal_pick_my", SMALL)
    obs_a, _ = a.reset(seed=2)
    b.reset(seed=7)
    for _ in range(3):
        b.step(b.action_space.sample())
    obs_a2, _ = a.reset(seed=2)
    assert np.array_equal(obs_a["image"], obs_a2["image"])
    assert a.unwrapped.scene.client != b.unwrapped.scene.client
    a.close()
    b.close()


def test_actions_move_the_gripper_as_documented():
    env = make_env("fractal_pick_my", SMALL)
    obs, _ = env.reset(seed=0)
    start = obs["ee_state"][:3].copy()
    for _ in range(3):
        obs, *_ = env.step(np.array([0.03, -0.03, 0.1, 0, 0, 0, 1.0], np.float32))  # dz clipped to 0.03
    moved = obs["ee_state"][:3] - start
    assert np.allclose(moved, [0.09, -0.09, 0.09], atol=0.015)
    assert obs["ee_state"][5] == 1.0 and obs["ee_state"][4] < 0.01  # gripper > 0 closes
    obs, *_ = env.step(np.array([0, 0, 0, 0, 0, 0.15, -1.0], np.float32))
    assert obs["ee_state"][4] > 0.05 and abs(obs["ee_state"][3] - 0.15) < 0.03
    env.close()


def test_truncation_and_random_policy_rarely_succeeds():
    env = make_env("fractal_pick_my", {**SMALL, "max_steps": 15, "references": False})
    env.action_space.seed(0)
    successes = 0
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(20):
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            if terminated or truncated:
                break
        assert truncated or terminated
        assert info["steps"] <= 15
        successes += info["success"]
    assert successes == 0
    env.close()


def test_user_texture_object(tmp_path):
    from PIL import Image

    img = np.zeros((64, 128, 3), np.uint8)
    img[:, :, 1] = 200
    img[20:44, 20:100] = (250, 0, 250)
    Image.fromarray(img).save(tmp_path / "my_mug.png")
    env = make_env("fractal_pick_my", {**SMALL, "personal_texture": str(tmp_path / "my_mug.png"),
                                       "personal_category": "mug", "reference_count": 3})
    obs, info = env.reset(seed=0)
    assert info["category"] == "mug" and info["personal_object"].startswith("user_mug_")
    assert len(info["reference_images"]) == 3 + 16  # 3 phone-like renders + 16 from the robot cameras' elevation
    magenta = (info["reference_images"][0][..., 0] > 150) & (info["reference_images"][0][..., 1] < 80)
    assert magenta.sum() > 20  # the user's print is visible in the reference photos
    env.close()
    env = make_env("fractal_pick_my", {**SMALL, "personal_texture": str(tmp_path / "my_mug.png"),
                                       "personal_category": "mug", "reference_count": 3, "reference_views": 0})
    _, info_plain = env.reset(seed=0)
    assert len(info_plain["reference_images"]) == 3
    first = info["reference_images"][:3]
    assert all(np.array_equal(a, b) for a, b in zip(info_plain["reference_images"], first, strict=True))
    env.close()


def test_user_photos_replace_the_rendered_references(tmp_path):
    from PIL import Image

    tex = np.zeros((64, 128, 3), np.uint8)
    tex[:, :, 1] = 200
    Image.fromarray(tex).save(tmp_path / "print.png")
    photo = np.full((90, 120, 3), 180, np.uint8)
    photo[30:70, 40:80] = (250, 0, 250)
    Image.fromarray(photo).save(tmp_path / "a.png")
    Image.fromarray(photo[:, ::-1]).save(tmp_path / "b.jpg")
    opts = {**SMALL, "personal_texture": str(tmp_path / "print.png"), "personal_category": "mug"}
    env = make_env("fractal_pick_my", {**opts, "personal_references": f"{tmp_path / 'a.png'},{tmp_path / 'b.jpg'}",
                                       "reference_views": 2})
    _, info = env.reset(seed=0)
    refs = info["reference_images"]
    assert len(refs) == 2 + 2 and refs[0].shape == (48, 64, 3)  # photos first; longer side = image_size
    assert refs[0][24, 32, 0] > 200 and refs[0][24, 32, 1] < 60  # the photo itself, not a render of the print
    env.close()
    with pytest.raises(ConfigError, match="cannot read personal_references '/no/b.png'") as err:
        make_env("fractal_pick_my", {**opts, "personal_references": f"{tmp_path / 'a.png'},/no/b.png"})
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="personal_references needs personal_texture"):
        make_env("fractal_pick_my", {**SMALL, "personal_references": str(tmp_path / "a.png")})


def test_train_extended_split_draws_extra_designs_for_generic_tasks():
    from envs.manipulation.objects import EXTRA_TRAIN, find_instance

    env = make_env("fractal_pick", {**SMALL, "split": "train_extended"})
    seen = set()
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        ids = [info["personal_object"], *info["distractors"]]
        seen.update(ids)
        assert all(find_instance(i).split in ("train", "train_extra") for i in ids)
        assert find_instance(info["personal_object"]).colour in obs["instruction"]
    env.close()
    assert seen & set(EXTRA_TRAIN)  # most of the pool is extra designs


@pytest.mark.parametrize("options, message", [
    ({"split": "val"}, "unknown split 'val'"),
    ({"personal_category": "spoon"}, "unknown personal_category 'spoon'"),
    ({"personal_texture": "/nonexistent/x.png", "personal_category": "mug"}, "cannot read personal_texture"),
    ({"personal_texture": "x.png"}, "needs personal_category"),
    ({"max_steps": 500}, "max_steps"),
    ({"reference_views": 17}, r"reference_views must be in \[0, 16\], got 17"),
    ({"colour": "red"}, "unknown option for personalized_simpler env 'colour'; valid: image_size"),
    ({"image_size": "abc"}, "image_size must be an integer, got 'abc'"),
    ({"max_steps": 40.5}, "max_steps must be an integer"),
    ({"num_distractors": True}, "num_distractors must be an integer"),
    ({"privileged": 1}, "privileged must be true or false"),
    ({"split": 3}, "unknown split '3'"),
])
def test_bad_configuration_is_a_one_line_config_error(options, message):
    with pytest.raises(ConfigError, match=message) as err:
        make_env("fractal_pick_my", options)
    assert "\n" not in str(err.value)


def test_unknown_task():
    with pytest.raises(ConfigError, match="unknown task 'fractal_fly'"):
        PersonalizedSimplerEnv("fractal_fly")


def test_gym_registration():
    env = gym.make(gym_id("bridge_put_my_on"), options={"image_size": 48, "references": False})
    obs, _ = env.reset(seed=0)
    assert obs["image"].shape == (48, 48, 3)
    env.close()


@pytest.mark.parametrize("task", ["fractal_pick", "bridge_put_on"])
def test_project_to_image_lands_on_the_rendered_object(task):
    """The camera model behind the memory heads' labels: a body's projected base lies at its mask's bottom."""
    env = make_env(task, {"image_size": 128, "privileged": True})
    obs, _ = env.reset(seed=4)
    state = env.unwrapped.privileged_state()
    checked = 0
    for obj in state["objects"]:
        mask = obs["segmentation"] == obj["body"]
        if mask.sum() < 30:  # hidden behind another object
            continue
        checked += 1
        u, v = (project_to_image(env.unwrapped.task.embodiment, np.asarray(obj["position"])[None])[0] + 1) / 2 * 128
        rows, cols = np.nonzero(mask)
        assert cols.min() - 2 <= u <= cols.max() + 2, (obj["instance_id"], u, cols.min(), cols.max())
        assert np.percentile(rows, 50) <= v <= rows.max() + 3, (obj["instance_id"], v, rows.min(), rows.max())
    assert checked >= 3  # the scene's objects were really compared, not all skipped
    env.close()
