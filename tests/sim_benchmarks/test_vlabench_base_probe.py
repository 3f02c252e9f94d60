"""The VLABench base probe's summaries: gripper agreement at switch frames, memory sensitivity, bad input."""

import pytest

from envs.errors import ConfigError
from sim_benchmarks.studies.vlabench.vlabench_base_probe import run, sensitivity, switch_agreement


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


def test_sensitivity_reports_all_and_near_target_frames():
    rows = [{"sensitivity": 1.0, "to_target": [0.01, 0.0, 0.0]}, {"sensitivity": 0.0, "to_target": [0.2, 0.0, 0.0]},
            {"to_target": [0.0, 0.0, 0.0]}]  # after the grasp: no sensitivity recorded
    out = sensitivity(rows)
    assert out["frames"] == 2 and out["mean"] == 0.5 and out["near_frames"] == 1 and out["near_mean"] == 1.0
    assert sensitivity([{"to_target": [0, 0, 0]}]) == {"frames": 0}


def test_bad_input_is_a_config_error_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="--episodes"):
        run(["--episodes", "0", "--out", str(tmp_path / "x")])
    with pytest.raises(ConfigError, match="nope"):
        run(["--tasks", "nope", "--out", str(tmp_path / "y")])
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
