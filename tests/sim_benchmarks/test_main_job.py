import json

import pytest

from sim_benchmarks import registry
from sim_benchmarks.evaluation import EvalConfig, run_evaluation

MAIN_POLICIES = ("generic", "hard_prompt", "soft_prompt", "vap", "oracle_mask", "scripted_expert")


def test_main_job_defaults_cover_the_six_policies_and_four_tasks():
    suite = registry.suites()["personalized_simpler"]
    assert suite.default_policies == MAIN_POLICIES
    assert set(suite.tasks) == {"fractal_pick_my", "fractal_move_my_near", "bridge_pick_my", "bridge_put_my_on"}
    offered = registry.policies_for("personalized_simpler")
    assert set(MAIN_POLICIES) <= set(offered)
    assert suite.default_workers == 2


@pytest.mark.slow
def test_every_main_job_policy_runs_an_episode_through_the_harness(tmp_path):
    # One episode per policy on one task, in one process: the main job's plumbing end to end.
    cfg = EvalConfig(env="personalized_simpler/bridge_pick_my", episodes=1, seed=7, workers=1, out=tmp_path / "m",
                     env_options={"max_steps": 12})
    summary, out = run_evaluation(cfg)
    assert list(summary["policies"]) == list(MAIN_POLICIES)
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["policy"] for r in records) == sorted(MAIN_POLICIES)
    by_policy = {r["policy"]: r for r in records}
    # VAP and its oracle report their grounding; the oracle's mask is the personal object by construction.
    assert "grounding_ok" in by_policy["vap"] and by_policy["oracle_mask"]["grounding_correct"] is True
    assert all(r["steps"] <= 12 for r in records)
