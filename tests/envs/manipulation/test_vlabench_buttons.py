"""Personalized-VLABench's button task: one sprung button in front of each object; only my object's may be pressed."""

import math

import numpy as np
import pytest

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from envs.manipulation.vlabench.env import BUTTON_HALF, BUTTON_PRESSED, make_env  # noqa: E402
from policies.manipulation.vlabench_expert import VLABenchExpert  # noqa: E402

FAST = {"image_size": 32, "references": False, "cameras": "front"}


def test_one_resting_button_in_front_of_each_object():
    env = make_env("select_my_button", FAST)
    try:
        for seed in range(5):
            _, info = env.reset(seed=seed)
            ps = env.privileged_state()
            buttons, objects = ps["buttons"], ps["objects"]
            assert info["buttons"] == len(buttons) == len(objects) >= 3
            assert "button in front of my " in info["instruction"]
            for b, o in zip(buttons, objects, strict=True):
                assert b["xy"][1] < o["position"][1] - o["radius"] * 0.5  # between the object and the robot
                assert abs(b["xy"][0] - o["position"][0]) < 1e-6
                assert abs(b["depth"]) < BUTTON_PRESSED / 3 and not b["pressed"]  # the spring holds the cap up
            xs = np.sort([b["xy"][0] for b in buttons])
            assert np.min(np.diff(xs)) > 2 * BUTTON_HALF
    finally:
        env.close()


def _press(env, obs, index: int, steps: int = 50):
    """Drive the closed hand over button ``index`` (turning it across the row step by step), then straight down."""
    info, above = {}, False
    for k in range(steps):
        b = env.privileged_state()["buttons"][index]
        tcp = obs["ee_pose"][:3]
        above = above or bool(np.linalg.norm(tcp[:2] - b["xy"]) < 0.005 and abs(tcp[2] - b["top"] - 0.12) < 0.01)
        goal = np.array([*b["xy"], b["top"] - 0.012 if above else b["top"] + 0.12])
        step = goal - tcp
        goal = tcp + step * min(1.0, 0.04 / max(np.linalg.norm(step), 1e-9))
        yaw = min(math.pi / 2, 0.3 * (k + 1))
        obs, _, terminated, truncated, info = env.step(np.array([*goal, math.pi, 0.0, yaw, 1.0], np.float32))
        if terminated or truncated:
            break
    return info


def test_pressing_another_button_is_the_wrong_object_and_no_success():
    env = make_env("select_my_button", {**FAST, "max_steps": 50})
    try:
        obs, _ = env.reset(seed=4)
        info = _press(env, obs, index=1)
        ps = env.privileged_state()
        assert ps["buttons"][1]["pressed"] and not ps["buttons"][0]["pressed"]
        assert info["wrong_object"] and not info["success"] and not info["correct_object"]
        assert info["progress_score"] == 0.0
    finally:
        env.close()


def test_standing_still_presses_nothing():
    env = make_env("select_my_button", {**FAST, "max_steps": 3})
    try:
        obs, _ = env.reset(seed=2)
        for _ in range(3):
            obs, reward, terminated, truncated, info = env.step(np.array([*obs["ee_pose"], 1.0], np.float32))
        assert truncated and reward == 0.0 and not info["success"] and not info["wrong_object"]
        assert not any(b["pressed"] for b in env.privileged_state()["buttons"])
    finally:
        env.close()


@pytest.mark.slow
def test_expert_presses_my_button_only():
    env = make_env("select_my_button", FAST)
    try:
        for seed in (3, 7):
            obs, info = env.reset(seed=seed)
            expert = VLABenchExpert(env)
            expert.reset(obs["instruction"], info)
            for _ in range(80):
                obs, reward, terminated, truncated, step = env.step(expert.act(obs))
                if terminated or truncated:
                    break
            assert terminated and reward == 1.0 and step["success"] and step["correct_object"]
            assert not step["wrong_object"] and step["progress_score"] == 1.0 and step["intention_score"] == 1.0
            pressed = [b["pressed"] for b in env.privileged_state()["buttons"]]
            assert pressed[0] and not any(pressed[1:])
    finally:
        env.close()
