"""VAP's chosen object as the object-memory base's remembered target: lifted with depth, installed by the option."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from policies.vap.chosen_memory import CameraPose, ChosenObjectMemory, lift_mask

torch.set_num_threads(1)


def _frame(task: str, seed: int):
    from sim_benchmarks import registry

    env = registry.suites()["personalized_simpler"].make_env(task, {"privileged": True})
    obs, _ = env.reset(seed=seed)
    u = env.unwrapped
    mask = (obs["segmentation"] & ((1 << 24) - 1)) == u.personal_body_id
    return env, obs, mask, u.privileged_state()["target"]["start"][:2]


@pytest.mark.parametrize("task", ["fractal_pick_my", "bridge_put_my_on"])
def test_a_mask_lifted_with_depth_lands_on_the_object(task):
    from sim_benchmarks.suites.vap_policies import MEMORY_BACK, _main_camera_pose

    env, obs, mask, true_xy = _frame(task, 5)
    camera = _main_camera_pose(env.unwrapped)
    near = lift_mask(mask, obs["depth"], camera)
    placed = lift_mask(mask, obs["depth"], camera, MEMORY_BACK)
    env.close()
    # the mask's mean is on the object's near side; moved back it sits within a few millimetres of the body's axis
    assert np.linalg.norm(placed - true_xy) < 0.008
    assert np.linalg.norm(placed - true_xy) < np.linalg.norm(near - true_xy)
    assert np.linalg.norm(placed - near) == pytest.approx(MEMORY_BACK, abs=1e-9)
    # a mask with no finite depth tells nothing: the head keeps its own estimate
    assert lift_mask(mask, np.full(mask.shape, np.nan), camera) is None


def test_the_refiner_fills_only_the_target_slot_and_forgets_between_episodes():
    camera = CameraPose.from_view(np.eye(4), 60.0)  # at the origin looking down -z
    mem = ChosenObjectMemory(camera)
    own = np.array([[0.5, 0.1], [0.6, -0.2]], np.float32)
    assert np.isnan(mem.place({}, own)).all()  # nothing chosen: the head's own
    mask = np.zeros((8, 8), bool)
    mask[3:5, 3:5] = True  # the centre of the image: straight ahead, 2 m away
    mem.see(mask, np.full((8, 8), 2.0))
    placed = mem.place({}, own)
    assert placed[0] == pytest.approx([0.0, 0.0], abs=1e-6) and np.isnan(placed[1]).all()
    mem.see(mask, None)  # no depth: nothing remembered
    assert np.isnan(mem.place({}, own)).all()
    mem.see(mask, np.full((8, 8), 2.0))
    mem.forget()
    assert np.isnan(mem.place({}, own)).all()
    user_only = ChosenObjectMemory(camera, user_objects_only=True)
    user_only.see(mask, np.full((8, 8), 2.0), user_object=False)  # a built-in design: the head keeps its own
    assert np.isnan(user_only.place({}, own)).all()
    user_only.see(mask, np.full((8, 8), 2.0), user_object=True)
    assert user_only.place({}, own)[0] == pytest.approx([0.0, 0.0], abs=1e-6)


def test_vap_memory_option_installs_the_chosen_object_in_the_generic_head():
    from sim_benchmarks import registry
    from sim_benchmarks.registry import PolicyContext
    from sim_benchmarks.studies.vap.vap_benchmark import generic_available

    suite = registry.suites()["personalized_simpler"]
    env = suite.make_env("fractal_pick_my", {"max_steps": 4})
    ctx = PolicyContext("personalized_simpler", "fractal_pick_my", "vap", 0, env,
                        {"vap_base": "scripted_expert", "vap_memory": "mask"})
    assert registry.policies()["vap"].factory(ctx).memory is None  # no object-memory head: nothing changes
    with pytest.raises(ConfigError, match="vap_memory"):
        registry.policies()["vap"].factory(PolicyContext("personalized_simpler", "fractal_pick_my", "vap", 0, env,
                                                         {"vap_memory": "true"}))
    if not generic_available():
        env.close()
        pytest.skip("the generic VLA checkpoint is not present")
    obs, info = env.reset(seed=5)
    true_xy = env.unwrapped.privileged_state()["target"]["start"][:2]
    remembered = {}
    for source in ("own", "mask", "auto"):
        policy = registry.policies()["oracle_mask"].factory(PolicyContext(
            "personalized_simpler", "fractal_pick_my", "oracle_mask", 0, env, {"vap_memory": source}))
        assert (policy.memory is None) is (source == "own")
        assert (policy.base.memory_refiner is None) is (source == "own")
        policy.reset(obs["instruction"], info)
        policy.act(obs)
        remembered[source] = policy.base._memory[0, 0, :2].numpy()
        if source == "mask":
            assert remembered[source] == pytest.approx(policy.memory.target, abs=1e-6)
            assert np.linalg.norm(policy.memory.target - true_xy) < 0.01
        if source == "auto":  # a built-in design (4 references): the head's own memory, as with "own"
            assert policy.memory is not None and policy.memory.target is None
    env.close()
    assert not np.allclose(remembered["own"], remembered["mask"])
    assert remembered["auto"] == pytest.approx(remembered["own"], abs=1e-6)
