"""The memory-sensitivity probe of SIMPLER heads: the expert's own response defines the unsaturated frames."""

import json

import numpy as np
import pytest

from envs.errors import ConfigError
from sim_benchmarks.studies.generic_vla.memory_sensitivity import _MovedTarget, expert_response, run


def test_expert_response_is_one_where_the_label_follows_and_zero_where_it_is_clipped():
    follow = expert_response(lambda move: np.array([0.01, -0.02]) + move)
    assert follow == pytest.approx((1.0, 1.0))
    clipped = expert_response(lambda move: np.clip(np.array([0.05, 0.0]) + move, -0.03, 0.03))
    assert clipped == pytest.approx((0.0, 1.0))


def test_the_moved_target_is_seen_by_the_expert_only():
    class Env:
        def privileged_state(self):
            return {"target": {"position": np.array([0.1, 0.2, 0.0])}, "objects": [{"position": np.zeros(3)}]}

    ps = _MovedTarget(Env(), np.array([0.01, -0.01])).privileged_state()
    assert np.allclose(ps["target"]["position"], [0.11, 0.19, 0.0]) and ps["objects"][0] is ps["target"]
    assert np.allclose(Env().privileged_state()["target"]["position"], [0.1, 0.2, 0.0])


@pytest.mark.slow
def test_a_short_probe_of_the_shipped_simpler_head(tmp_path):
    out = run(["--episodes", "1", "--tasks", "bridge_pick", "--seed", "70000", "--out", str(tmp_path / "s")])
    sens = out["sensitivity"]
    assert sens["frames"] > 0 and np.isfinite(sens["mean"]) and 0.0 <= sens["expert_mean"] <= 1.0 + 1e-6
    assert sens["unsaturated"]["frames"] == 0 or sens["unsaturated"]["expert_mean"] == pytest.approx(1.0, abs=0.01)
    saved = json.loads((tmp_path / "s" / "sensitivity.json").read_text())
    assert len(saved["rows"]) == sens["frames"] and saved["command"].endswith("--out " + str(tmp_path / "s"))


def test_bad_input_is_a_config_error_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="--episodes"):
        run(["--episodes", "0", "--out", str(tmp_path / "x")])
    with pytest.raises(ConfigError, match="nope"):
        run(["--tasks", "nope", "--out", str(tmp_path / "y")])
    assert not any((tmp_path / d).exists() for d in "xy")
