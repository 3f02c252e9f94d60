"""D' (robustified next-token distribution) and the transformer trained on its samples (claim e)."""

import numpy as np
import torch

from agents.repeated_game import play_game
from envs.games import make_games_env, matching_pennies, rock_paper_scissors
from policies.next_token.dprime import (
    DPrimeConfig,
    HedgeMatching,
    LogitResponseAgent,
    RobustifiedPredictor,
    logit_response,
    sample_histories,
    train_dprime,
)
from policies.next_token.predictors import NGramPredictor


def test_hedge_matching_prediction_reproduces_the_hedge_strategy():
    rng = np.random.default_rng(0)
    for game in (rock_paper_scissors(), matching_pennies()):
        match = HedgeMatching(game.payoff, beta=300.0)
        for _ in range(20):
            z = rng.normal(0, 2, size=game.n_learner)
            p = match(z)
            assert p.min() >= 0 and abs(p.sum() - 1) < 1e-12
            q = logit_response(game.payoff, p, 300.0)
            want = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
            assert np.abs(q - want).max() < 1e-9


def test_dprime_switches_against_the_adversary_and_not_on_patterned_play():
    game = rock_paper_scissors()
    agent = LogitResponseAgent(RobustifiedPredictor(game.payoff, NGramPredictor(order=1)))
    base = play_game(make_games_env("rps_anti_model", rounds=400), LogitResponseAgent(NGramPredictor(order=1)), 0)
    robust = play_game(make_games_env("rps_anti_model", rounds=400), agent, 0)
    assert robust.info["switched"] and 0 < robust.info["switch_round"] < 200
    assert base.avg_regret > 0.25 and robust.avg_regret < 0.6 * base.avg_regret
    cyc = [play_game(make_games_env("rps_cyclic", rounds=400),
                     LogitResponseAgent(RobustifiedPredictor(game.payoff, NGramPredictor(order=1))), s)
           for s in range(6)]
    assert not any(c.info["switched"] for c in cyc)
    assert np.mean([c.avg_regret for c in cyc]) < -0.02  # the model's advantage on patterned play is kept


def test_histories_label_with_dprime_samples_and_training_fits_them():
    torch.set_num_threads(1)
    game = rock_paper_scissors()
    cfg = DPrimeConfig(rounds=96, histories=48, steps=40, batch=16, d_model=16, n_layers=1, n_heads=2)
    data = sample_histories(game, cfg, seed=1, count=8)
    # source "dprime": the label is the next token; adversarial sources switch, so D' != P there
    assert np.array_equal(data["inputs"][0], data["labels"][0])
    assert data["switched"][2] and not np.allclose(data["dprime"][2], data["base"][2])
    assert np.allclose(data["dprime"].sum(-1), 1.0)
    model, report = train_dprime(game, cfg, seed=0)
    assert report["final_loss"] < report["first_loss"]
    ho = report["held_out"]
    assert set(ho) == {"dprime", "D", "anti_model", "partly_adversarial"}
    assert all(0 <= v["mean_tv_model_vs_dprime"] < 0.5 for v in ho.values())
