"""The modular VLABench base: reading the instruction, finding the painted object, and acting on what it perceived."""

import math

import numpy as np
import pytest

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from envs.errors import ConfigError  # noqa: E402
from perception.prompting import VisualPrompter  # noqa: E402
from perception.tabletop_cloud import tabletop_objects  # noqa: E402
from policies.manipulation.vlabench_modular import ModularVLABenchBase, colour_region  # noqa: E402
from sim_benchmarks import registry  # noqa: E402
from sim_benchmarks.registry import PolicyContext  # noqa: E402

SUITE = "personalized_vlabench"


def _base(goal: str = "pick") -> ModularVLABenchBase:
    return ModularVLABenchBase(lambda: {}, goal)


def test_the_instruction_gives_category_and_colour_whatever_the_goal_phrase_says():
    b = _base("in_box")
    b.reset("put the red box in the box", {})
    assert (b.category, b.colour) == ("box", "red")
    b.reset("please put my mug on the plate", {})  # the generic instruction: no colour, "my" dropped
    assert (b.category, b.colour, b.instruction) == ("mug", None, "please put the mug on the plate")
    b.reset("pick up the striped mug", {"category": "mug"})  # a pattern word is not a palette colour
    assert b.colour is None
    with pytest.raises(ConfigError, match="table-top goals"):
        _base("press_button")


def test_a_turned_square_box_is_grasped_across_its_faces_and_a_round_object_at_yaw_0():
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-0.03, 0.03, (2, 20000))  # a 6 × 6 cm box turned 53°: no principal axis
    yaw = math.radians(53)
    xy = np.c_[0.1 + a * math.cos(yaw) - b * math.sin(yaw), a * math.sin(yaw) + b * math.cos(yaw)]
    (square,) = tabletop_objects([np.c_[xy, np.full(len(xy), 0.06)]], 0.0)
    obs = {"ee_pose": np.array([0.0, -0.1, 0.3, 0.0, 0.0, 0.0])}
    for category, faceted in (("box", True), ("can", False)):
        base = _base()
        base.reset(f"pick up the {category}", {})
        base.scene = {"table_z": 0.0, "target": square, "fixture": None, "objects": [square]}
        grasp = base.grasp_yaw(base.state(obs)["target"])
        if faceted:  # fingers on two opposite faces: the box's yaw up to a quarter turn
            d = (grasp - yaw) % (math.pi / 2)
            assert min(d, math.pi / 2 - d) < math.radians(4)
        else:
            assert grasp == 0.0


def test_colour_region_is_the_largest_patch_of_the_named_hue():
    rng = np.random.default_rng(0)
    img = rng.integers(90, 140, (64, 64, 3)).astype(np.uint8)  # greyish clutter
    mask = np.zeros((64, 64), bool)
    mask[10:30, 20:34] = True
    painted = VisualPrompter().apply(img, mask, "purple")
    painted[50:53, 50:53] = (130, 45, 170)  # a small purple speck elsewhere
    found = colour_region(painted, (130, 45, 170))
    assert found[mask].mean() > 0.95 and not found[50:53, 50:53].any()
    assert not colour_region(img, (40, 160, 50)).any()


def test_a_prompted_pick_episode_succeeds_on_perceived_state_alone():
    """The env's own mask of my object is painted red (as oracle_mask would) and the base is told "the red ...":
    it must find, grasp and lift the right object from depth, camera poses and the painted image."""
    registry.load_all()
    env = registry.suites()[SUITE].make_env("select_my_pick", {"cameras": "front"})
    try:
        policy = registry.policies()["modular"].factory(PolicyContext(SUITE, "select_my_pick", "modular", 0, env, {}))
        obs, info = env.reset(seed=3)
        target = env.unwrapped.personal_body_id
        category = info["category"]
        policy.reset(f"pick up the red {category}", info)
        prompter = VisualPrompter()
        for _ in range(80):
            seg = env.unwrapped.camera_sensors(("front",))["segmentation"]["front"]
            image = prompter.apply(obs["image"], seg == target, "red")
            obs, _, term, trunc, info = env.step(policy.act({**obs, "image": image}))
            if term or trunc:
                break
        assert policy.episode_info()["modular_choice"] == "colour"
        assert info["success"] and info["correct_object"]
    finally:
        env.close()


def test_the_modular_base_refuses_the_shelf_task():
    registry.load_all()
    env = registry.suites()[SUITE].make_env("select_my_from_shelf", {"cameras": "front"})
    try:
        with pytest.raises(ConfigError, match="policy modular runs the tasks"):
            registry.policies()["modular"].factory(PolicyContext(SUITE, "select_my_from_shelf", "modular", 0, env, {}))
    finally:
        env.close()


def test_the_hard_prompt_baseline_tells_the_modular_base_my_objects_colour_and_the_soft_prompt_refuses_it():
    from perception.prompting import DEFAULT_COLOURS

    registry.load_all()
    env = registry.suites()[SUITE].make_env("select_my_pick", {"cameras": "front"})
    try:
        spec = registry.policies()
        policy = spec["hard_prompt"].factory(
            PolicyContext(SUITE, "select_my_pick", "hard_prompt", 0, env, {"prompt_base": "modular"}))
        assert isinstance(policy.base, ModularVLABenchBase)
        obs, info = env.reset(seed=3)
        policy.reset(obs["instruction"], info)
        said = policy.episode_info()  # scene 3: my can is mostly green, a colour the base looks for in the image
        assert said["prompt_colour"] in DEFAULT_COLOURS and said["prompt_colour"] in said["prompt_instruction"]
        assert "my" not in said["prompt_instruction"].split() and policy.base.colour == said["prompt_colour"]
        with pytest.raises(ConfigError, match="prompt_base"):
            spec["hard_prompt"].factory(
                PolicyContext(SUITE, "select_my_pick", "hard_prompt", 0, env, {"prompt_base": "bogus"}))
        with pytest.raises(ConfigError, match="instruction-embedding"):
            spec["soft_prompt"].factory(
                PolicyContext(SUITE, "select_my_pick", "soft_prompt", 0, env, {"prompt_base": "modular"}))
    finally:
        env.close()
