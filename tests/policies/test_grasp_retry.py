"""GraspRetry: reopen and rise after a grasp closed on nothing, a bounded number of times; otherwise pass through."""

import numpy as np
import pytest

from envs.errors import ConfigError
from policies.manipulation.grasp_retry import GraspRetry, GraspRetryConfig


class _Closer:
    """Always moves down and closes; records what it was asked."""

    def __init__(self):
        self.resets, self.acts = 0, 0

    def reset(self, instruction, info):
        self.resets += 1

    def act(self, obs):
        self.acts += 1
        return np.array([0.01, 0.0, -0.02, 0, 0, 0, 1.0], np.float32)

    def episode_info(self):
        return {"grounding_correct": True}


def _obs(opening, closed):
    return {"ee_state": np.array([0.5, 0.0, 0.05, 0.0, opening, float(closed)], np.float32)}


def test_passes_through_while_holding_and_retries_empty_grasps_a_bounded_number_of_times():
    base = _Closer()
    policy = GraspRetry(base, GraspRetryConfig(max_retries=1, settle_steps=2, open_steps=2))
    policy.reset("pick up the mug", {})
    held = policy.act(_obs(0.05, True))  # closed on an object 5 cm wide: the base's action
    assert np.array_equal(held, base.act(_obs(0, 0)))
    assert np.array_equal(policy.act(_obs(0.0, True)), held)  # one empty step: the fingers may still be closing
    first = policy.act(_obs(0.0, True))  # the second: open and rise, no xy motion
    assert first[6] < 0 and first[2] > 0 and not first[:2].any()
    assert policy.act(_obs(0.06, False))[6] < 0  # still reopening (open_steps = 2)
    assert policy.act(_obs(0.08, False))[6] > 0  # the base is back in control
    for _ in range(3):  # the one retry is spent: an empty grasp is now left to the base
        assert policy.act(_obs(0.0, True))[6] > 0
    assert policy.episode_info() == {"grounding_correct": True, "grasp_retries": 1}
    policy.reset("pick up the mug", {})
    assert policy.retries == 0 and base.resets == 2


def test_bad_config_is_a_config_error():
    with pytest.raises(ConfigError, match="max_retries"):
        GraspRetryConfig(max_retries=-1)
    with pytest.raises(ConfigError, match="empty_width"):
        GraspRetryConfig(empty_width=0.2)


def test_policy_option_is_validated_before_anything_loads():
    from sim_benchmarks import registry
    from sim_benchmarks.registry import PolicyContext

    factory = registry.policies()["generic"].factory
    for bad in ("two", -1, True, 1.5):  # a CLI string of digits is converted, so "2" is valid
        with pytest.raises(ConfigError, match="vla_grasp_retries must be an integer"):
            factory(PolicyContext("generic_simpler", "fractal_pick", "generic", 0, None, {"vla_grasp_retries": bad}))
