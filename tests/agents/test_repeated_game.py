import json
import math

import numpy as np
import pytest
import torch

from agents.episodic import run_episode
from agents.repeated_game import games_episode_metrics, play_game
from envs.errors import ConfigError
from envs.games import make_games_env
from policies.next_token import HedgeAgent, RobustAgent
from policies.next_token.predictors import NGramPredictor
from sim_benchmarks.registry import PolicyContext, policies_for, suites, trainer_for


def test_play_game_regret_curve_matches_env():
    env = make_games_env("rps_markov", rounds=300)
    traj = play_game(env, HedgeAgent(), env_seed=2)
    assert traj.regret.shape == (300,) and traj.mixed.shape == (300, 3)
    payoff = env.game.payoff
    cum = np.cumsum(payoff[:, traj.opponent].T, axis=0)
    learner = np.cumsum(np.einsum("tk,kt->t", traj.mixed, payoff[:, traj.opponent]))
    assert np.allclose(traj.regret, cum.max(axis=1) - learner, atol=1e-5)


def test_episode_metrics_success_is_hedge_bound():
    info = {"payoff": np.zeros((3, 3)), "round": 1000, "regret": 18.0}
    bound = math.sqrt(math.log(3) / 2000)  # 0.0234 per round
    m = games_episode_metrics(info, 400.0, 1000)
    assert m["success"] and m["avg_regret"] == pytest.approx(0.018) and 0.018 < bound
    assert not games_episode_metrics({**info, "regret": 25.0}, 400.0, 1000)["success"]
    assert m["correct_object"] is False and m["wrong_object"] is False and m["switched"] is False


def test_suite_runs_through_the_episodic_runner():
    spec = suites()["games"]
    assert {"rps_anti_model", "rps_cyclic", "matching_pennies_markov", "random3x3_biased"} <= set(spec.tasks)
    names = policies_for("games")
    assert {"hedge", "best_response", "robust", "robust_transformer"} <= set(names)
    from sim_benchmarks.registry import policies

    results = {}
    for name in ("hedge", "best_response", "robust"):
        env = spec.make_env("rps_anti_model", {"rounds": 400})
        pol = policies()[name].factory(PolicyContext("games", "rps_anti_model", name, 0, env, {}))
        out = run_episode(env, pol, env_seed=5, policy_seed=1, episode_metrics=spec.episode_metrics)
        assert out.steps == 400
        results[name] = out.metrics
    assert results["hedge"]["success"] and not results["best_response"]["success"]
    assert results["best_response"]["avg_regret"] >= 0.5
    assert results["robust"]["switched"] is True and results["hedge"]["switched"] is False
    assert results["robust"]["avg_regret"] < 0.25


def test_suite_rejects_bad_rounds():
    with pytest.raises(ConfigError, match="rounds"):
        suites()["games"].make_env("rps_D", {"rounds": "many"})


def test_robust_agent_ignores_the_none_observation():
    agent = RobustAgent(NGramPredictor())
    env = make_games_env("rps_D", rounds=5)
    obs, info = env.reset(seed=0)
    agent.reset("", info)
    agent.act(obs)
    agent.act(obs)  # "no round yet" twice: nothing recorded
    assert agent.t == 0 and agent.regret() == 0.0


def _train(tmp_path, name, steps, resume=False, stop_at=None):
    spec = trainer_for("games:rps")
    calls = {"n": 0}

    def progress(n):
        calls["n"] += n
        if stop_at is not None and calls["n"] >= stop_at:
            raise KeyboardInterrupt

    return spec.run(env="games:rps", agent="next_token", steps=steps, seed=3, out_dir=tmp_path / name,
                    resume=resume, on_progress=progress,
                    options={"log_every": 10, "sequences": 120, "context": 16, "d_model": 16, "eval_episodes": 2})


@pytest.mark.slow
def test_trainer_writes_contract_and_resumes_exactly(tmp_path):
    full = _train(tmp_path, "full", 30)
    assert full["schema"] == "embodia.train/1" and full["steps"] == 30 and full["agent"] == "next_token"
    for key in ("return_last100", "steps_per_second", "wall_s", "final_loss", "sha256"):
        assert key in full
    lines = [json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [10, 20, 30] and all(r["loss"] > 0 for r in lines)
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, "cut", 30, stop_at=25)  # killed after the step-20 checkpoint
    resumed = _train(tmp_path, "cut", 30, resume=True)
    lines2 = [json.loads(x) for x in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines2] == [10, 20, 30]
    a = torch.load(tmp_path / "full" / "model.pt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)["state_dict"]
    assert all(torch.allclose(a[k], b[k]) for k in a)
    assert resumed["final_loss"] == pytest.approx(full["final_loss"])


def test_trainer_rejects_unknown_agent_and_env(tmp_path):
    spec = trainer_for("games:rps")
    with pytest.raises(ConfigError, match="next_token"):
        spec.run(env="games:rps", agent="ppo", steps=1, seed=0, out_dir=tmp_path, resume=False, options={},
                 on_progress=None)
    with pytest.raises(ConfigError, match="games:rps"):
        spec.run(env="games:chess", agent="next_token", steps=1, seed=0, out_dir=tmp_path, resume=False, options={},
                 on_progress=None)
