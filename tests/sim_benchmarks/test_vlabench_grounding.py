"""The multi-view grounding study: paired per-view records, summaries with CIs, one-line errors for bad input."""

import json
import subprocess
import sys

import pytest

from sim_benchmarks.studies.vlabench import vlabench_grounding as vg


def test_summary_counts_and_paired_difference():
    rows = [{"left": True, "right": False, "front": True, "fused": True, "first_step_ms": 1.0},
            {"left": False, "right": False, "front": True, "fused": False, "first_step_ms": 3.0},
            {"left": True, "right": True, "front": False, "fused": True, "first_step_ms": 2.0}]
    s = vg.summarise(rows)
    assert s["episodes"] == 3 and s["fused"]["correct"] == 2 and s["right"]["correct"] == 1
    assert s["best_single_view"] in ("left", "front")  # both 2/3; fused − best is a paired mean over episodes
    assert s["fused_minus_best"]["mean"] == pytest.approx(0.0)
    lo, hi = s["fused"]["ci95"]
    assert 0 < lo < 2 / 3 < hi < 1
    assert s["first_step_ms_median"] == 2.0


@pytest.mark.slow
def test_one_episode_run_writes_every_view(tmp_path):
    out = tmp_path / "g"
    vg.run(["--episodes", "1", "--tracks", "personal", "--tasks", "select_my_pick", "--out", str(out)])
    result = json.loads((out / "grounding.json").read_text())
    row = result["tracks"]["personal"]["per_task"]["select_my_pick"]["rows"][0]
    assert set(vg.CHOICES) <= set(row) and row["seed"] == 0
    assert "| personal | select_my_pick | 1 |" in (out / "grounding.md").read_text()


@pytest.mark.parametrize("args, word", [(["--tracks", "in_distribution"], "in_distribution"),
                                        (["--tasks", "bogus"], "bogus"), (["--episodes", "0"], "--episodes")])
def test_bad_input_exits_2_with_one_line(tmp_path, args, word):
    proc = subprocess.run([sys.executable, "-m", "launch.study", "vlabench.vlabench_grounding",
                           "--out", str(tmp_path / "o"), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "pybullet build" not in ln]
    assert len(lines) == 1 and word in lines[0]
    assert not (tmp_path / "o").exists()
