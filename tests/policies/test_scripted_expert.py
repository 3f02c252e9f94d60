"""The privileged scripted expert solves every task on the correct object; DART noise keeps a clean label."""

import numpy as np
import pytest

from agents.episodic import run_episode
from envs.manipulation.env import ALL_TASKS, make_env
from policies.manipulation.scripted_expert import ScriptedExpert


@pytest.mark.parametrize("task", sorted(ALL_TASKS))
def test_expert_solves_each_task(task):
    env = make_env(task, {"image_size": 48, "references": False})
    expert = ScriptedExpert(env)
    out = run_episode(env, expert, env_seed=1, policy_seed=0)
    assert out.metrics["success"] and out.metrics["correct_object"] and not out.metrics["wrong_object"]
    assert out.steps <= 45
    env.close()


@pytest.mark.slow
def test_expert_success_rate_over_seeds():
    results = []
    for task in ("fractal_move_my_near", "bridge_put_my_on"):
        env = make_env(task, {"image_size": 48, "references": False})
        expert = ScriptedExpert(env)
        results += [run_episode(env, expert, env_seed=s, policy_seed=s).metrics for s in range(10, 15)]
        env.close()
    assert np.mean([r["success"] and r["correct_object"] for r in results]) >= 0.9


def test_noise_perturbs_execution_but_not_label():
    env = make_env("fractal_pick_my", {"image_size": 48, "references": False})
    noisy = ScriptedExpert(env, noise_std=0.01)
    obs, info = env.reset(seed=4)
    noisy.reset(obs["instruction"], {**info, "policy_seed": 3})
    executed = noisy.act(obs)
    clean = noisy.last_clean_action
    assert not np.allclose(executed[:3], clean[:3]) and executed[6] == clean[6]
    assert np.all(np.abs(executed[:3]) <= 0.03 + 1e-7)
    env.close()


def test_funnel_descent_solves_and_descends_while_still_aligning():
    from envs.errors import ConfigError
    from policies.manipulation.scripted_expert import HOVER

    env = make_env("fractal_pick", {"image_size": 48, "references": False})
    low_and_off = {}  # approach steps > 1 cm below the gated hover height while still > 8 mm off in xy
    for descent in ("gated", "funnel"):
        low_and_off[descent] = 0
        for seed in (1, 2, 3):  # with DART noise, so the xy error persists for a few steps
            expert = ScriptedExpert(env, descent=descent, noise_std=0.01, seed=seed)
            obs, info = env.reset(seed=seed)
            expert.reset(obs["instruction"], {**info, "policy_seed": seed})
            for _ in range(45):
                ps = env.unwrapped.privileged_state()
                t = ps["target"]
                d = np.linalg.norm(np.asarray(ps["ee_position"])[:2] - np.asarray(t["position"])[:2])
                hover_z = t["position"][2] + max(0.018, t["height"] - 0.03) + HOVER
                low_and_off[descent] += int(expert.phase == "approach" and d > 0.008
                                            and ps["ee_position"][2] < hover_z - 0.01)
                obs, _, terminated, truncated, step_info = env.step(expert.act(obs))
                if terminated or truncated:
                    break
            assert step_info["success"] and step_info["correct_object"], (descent, seed)
    assert low_and_off["funnel"] > 2 * low_and_off["gated"], low_and_off
    with pytest.raises(ConfigError, match="zigzag"):
        ScriptedExpert(env, descent="zigzag")
    env.close()


def test_coarse_descent_gates_at_2_5_cm_and_closes_only_within_1_cm():
    env = make_env("fractal_pick", {"image_size": 48, "references": False})
    for seed in (1, 2, 3):
        expert = ScriptedExpert(env, descent="coarse", noise_std=0.01, seed=seed)
        obs, info = env.reset(seed=seed)
        expert.reset(obs["instruction"], {**info, "policy_seed": seed})
        entry_offsets, close_offsets = [], []
        for _ in range(45):
            before = expert.phase
            action = expert.act(obs)
            ps = env.unwrapped.privileged_state()
            d = float(np.linalg.norm(np.asarray(ps["ee_position"])[:2] - np.asarray(ps["target"]["position"])[:2]))
            if before == "approach" and expert.phase != "approach":
                entry_offsets.append(d)
            if before == "descend" and expert.phase == "close":
                close_offsets.append(d)
            obs, _, terminated, truncated, step_info = env.step(action)
            if terminated or truncated:
                break
        assert step_info["success"] and step_info["correct_object"], seed
        assert entry_offsets and entry_offsets[0] < 0.025 and close_offsets and close_offsets[0] < 0.01
    env.close()


def _run_with_drop(task: str, seed: int, max_regrasps: int) -> tuple[ScriptedExpert, dict]:
    """The expert's episode with the executed gripper forced open for 3 steps right after the lift begins."""
    env = make_env(task, {"image_size": 48, "references": False})
    expert = ScriptedExpert(env, max_regrasps=max_regrasps)
    obs, info = env.reset(seed=seed)
    expert.reset(obs["instruction"], {**info, "policy_seed": 0})
    forced, step_info = 0, {}
    for _ in range(80):
        action = expert.act(obs)
        if expert.phase == "lift" and forced < 3 and expert.regrasps == 0:
            action, forced = np.concatenate([action[:6], [-1.0]]).astype(np.float32), forced + 1
        obs, _, terminated, truncated, step_info = env.step(action)
        if terminated or truncated:
            break
    env.close()
    return expert, step_info


def test_expert_regrasps_an_object_it_lost():
    expert, info = _run_with_drop("bridge_put_my_on", seed=3, max_regrasps=1)
    assert expert.regrasps == 1 and info["success"] and info["correct_object"]
    assert expert.episode_info()["expert_regrasps"] == 1
    # without re-grasping (the default) the same drop is not recovered: the expert carries on empty-handed
    expert, info = _run_with_drop("bridge_put_my_on", seed=3, max_regrasps=0)
    assert expert.regrasps == 0 and not info["success"] and "expert_regrasps" not in expert.episode_info()


def test_expert_regrasps_must_be_non_negative():
    from envs.errors import ConfigError

    env = make_env("fractal_pick_my", {"image_size": 48, "references": False})
    with pytest.raises(ConfigError, match="re-grasps"):
        ScriptedExpert(env, max_regrasps=-1)
    env.close()
