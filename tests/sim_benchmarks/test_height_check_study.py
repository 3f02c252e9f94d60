"""The height-check grounding study rejects bad input before it builds anything."""

import pytest

from envs.errors import ConfigError
from sim_benchmarks.studies.vap.height_check import OFF, markdown, run, summarise


@pytest.mark.parametrize("args, word", [
    (["--suite", "atari"], "suite"),
    (["--episodes", "0"], "--episodes"),
    (["--margins", "0.5"], "--margins"),
    (["--margins", "x"], "--margins"),
    (["--tasks", "fractal_pick_mine"], "fractal_pick_mine"),
])
def test_bad_input_is_one_config_error_and_writes_nothing(tmp_path, args, word):
    out = tmp_path / "res"
    with pytest.raises(ConfigError, match=word):
        run([*args, "--out", str(out)])
    assert not out.exists()


def test_summary_pairs_each_margin_with_no_check():
    rows = [{"flagged": 1, "margin 0.02 m": True, OFF: False}, {"flagged": 0, "margin 0.02 m": True, OFF: True},
            {"flagged": 1, "margin 0.02 m": False, OFF: False}]
    s = summarise(rows, ["margin 0.02 m", OFF])
    assert s["flagged_scenes"] == 2 and s["margin 0.02 m"]["correct"] == 2 and s[OFF]["correct"] == 1
    assert s["margin 0.02 m"]["minus_off"]["mean"] == pytest.approx(1 / 3)
    table = markdown({"variants": ["margin 0.02 m", OFF], "per_task": {"t": s}, "all": s})
    assert "+33.3" in table and table.count("\n") == 3
