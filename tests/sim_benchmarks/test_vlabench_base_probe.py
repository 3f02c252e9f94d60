"""The VLABench base probe's summaries: gripper agreement at switch frames, memory sensitivity, bad input."""

import numpy as np
import pytest

from envs.errors import ConfigError
from sim_benchmarks.studies.generic_vla.memory_sensitivity import frame_row
from sim_benchmarks.studies.vlabench.vlabench_base_probe import (
    moved_target,
    run,
    sensitivity,
    switch_agreement,
    true_memory,
)


def _row(episode, expert, head, switch=None, **extra):
    return {"episode": episode, "expert_grip": expert, "head_grip": head, "switch": switch, **extra}


def test_switch_agreement_counts_exact_and_one_frame_late_decisions():
    rows = [_row("a", False, False), _row("a", True, False, "grasp"), _row("a", True, True),  # closes a step late
            _row("a", False, True, "release"), _row("a", False, True),  # never opens
            _row("b", False, False), _row("b", True, True, "grasp")]  # closes on time
    out = switch_agreement(rows)
    assert out["grasp"]["frames"] == 2 and out["grasp"]["agree"] == 1 and out["grasp"]["agree_within_1"] == 2
    assert out["release"]["agree"] == 0 and out["release"]["agree_within_1"] == 0
    assert out["all"]["frames"] == 3 and out["all"]["agree_rate"] == pytest.approx(1 / 3)
    assert [f["agree"] for f in out["frames_list"]] == [False, False, True]  # per switch frame, for pairing


def test_sensitivity_reports_all_near_and_unsaturated_frames():
    rows = [frame_row((1.0, 0.8), (1.0, 1.0), np.array([0.01, 0.0])),  # near, the expert follows fully
            frame_row((0.0, 0.2), (0.3, 0.1), np.array([0.2, 0.0])),  # far: the expert's step is saturated
            frame_row((0.4, 0.4), (1.0, 0.5), np.array([0.1, 0.0])),  # saturated on y only
            {"to_target": [0.0, 0.0, 0.0]}]  # after the grasp: no sensitivity recorded
    out = sensitivity(rows)
    assert out["frames"] == 3 and out["mean"] == pytest.approx(0.467, abs=1e-3)
    assert out["near_frames"] == 1 and out["near_mean"] == 0.9 and out["near_expert_mean"] == 1.0
    assert out["unsaturated"] == {"frames": 1, "mean": 0.9, "expert_mean": 1.0}
    assert out["expert_mean"] == pytest.approx(0.65)
    assert sensitivity([{"to_target": [0, 0, 0]}]) == {"frames": 0}


def test_moved_target_moves_the_target_in_the_memory_frame_only():
    ps = {"target": {"position": np.array([0.1, 0.2, 0.8])}, "tcp": np.zeros(3)}
    moved = moved_target(ps, np.array([0.01, 0.0]))  # base x = world +y
    assert np.allclose(moved["target"]["position"], [0.1, 0.21, 0.8])
    assert np.allclose(ps["target"]["position"], [0.1, 0.2, 0.8])  # the simulator's state is not touched


def test_bad_input_is_a_config_error_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="--episodes"):
        run(["--episodes", "0", "--out", str(tmp_path / "x")])
    with pytest.raises(ConfigError, match="nope"):
        run(["--tasks", "nope", "--out", str(tmp_path / "y")])
    with pytest.raises(ConfigError, match="vla_memory 'oracle'.*own, depth, perceived"):
        run(["--memory-source", "oracle", "--out", str(tmp_path / "z")])
    assert not any((tmp_path / d).exists() for d in "xyz")


def test_true_memory_holds_the_target_and_the_box_start_in_the_base_frame():
    import numpy as np

    from agents.manipulation.vlabench_demonstrations import to_base_frame
    from envs.manipulation.vlabench.env import make_env

    for task, has_goal in (("select_my_in_box", True), ("select_my_pick", False)):
        env = make_env(task, {"track": "in_distribution", "cameras": ("front",), "references": False,
                              "image_size": 64})
        try:
            env.reset(seed=3)
            ps = env.unwrapped.privileged_state()
            table = true_memory(env, 2)
            assert np.allclose(table[0], to_base_frame(np.asarray(ps["target"]["start"]))[:2], atol=1e-6)
            assert np.isfinite(table[1]).all() == has_goal  # NaN: the head keeps its own estimate
            if has_goal:
                box = np.array([*ps["fixture"]["xy"], ps["target"]["start"][2]])
                assert np.allclose(table[1], to_base_frame(box)[:2], atol=1e-6)
            assert true_memory(env, 1).shape == (1, 2)
        finally:
            env.close()
