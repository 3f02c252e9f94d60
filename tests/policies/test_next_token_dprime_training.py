"""Claim (e), sample-then-best-reply D': the decision rule, the base model, the batched simulator, KL training."""

import numpy as np
import pytest
import torch

from agents.repeated_game import play_game
from envs.errors import ConfigError
from envs.games import make_games_env, random_game, rock_paper_scissors
from policies.next_token.dprime import (
    SAMPLE_BR_CONFIG,
    LogitResponseAgent,
    SampleBRMatching,
    base_predictor,
    exact_dprime,
    sample_br_response,
)
from policies.next_token.dprime_training import KL_SOURCES, KLTrainConfig, simulate, train_dprime_kl, tv_report
from policies.next_token.predictors import DiscountedBigramPredictor, NGramPredictor, SharpenedPredictor
from policies.next_token.transformer import CausalTransformer, TransformerConfig


def test_discounted_bigram_weighs_recent_transitions_and_sharpening_keeps_the_mode():
    seq = [0, 1, 0, 1, 0, 1, 0, 2, 0, 2, 0]  # after 0: three 1s, then two 2s
    pred = DiscountedBigramPredictor(decay=0.8)
    pred.reset(3)
    for a in seq:
        pred.update(a)
    p = pred.predict()
    assert np.argmax(p) == 2 and abs(p.sum() - 1) < 1e-12  # the recent 2s outweigh the older 1s
    flat = DiscountedBigramPredictor(decay=1.0)
    flat.reset(3)
    for a in seq:
        flat.update(a)
    assert np.argmax(flat.predict()) == 1  # undiscounted counts: 1 followed 0 three times
    sharp = SharpenedPredictor(NGramPredictor(order=1), 8.0)
    sharp.reset(3)
    for a in [0, 1, 0, 1, 0, 2, 0]:
        sharp.update(a)
    base = NGramPredictor(order=1)
    base.reset(3)
    for a in [0, 1, 0, 1, 0, 2, 0]:
        base.update(a)
    assert np.argmax(sharp.predict()) == np.argmax(base.predict()) and sharp.predict().max() > base.predict().max()


def test_sample_br_matching_pulls_hedge_back_through_the_best_reply():
    game = rock_paper_scissors()
    match = SampleBRMatching(game.payoff)
    z = np.array([0.3, -1.0, 2.0])
    q = sample_br_response(game.payoff, match(z))
    assert np.allclose(q, np.exp(z) / np.exp(z).sum())
    p = np.array([0.7, 0.2, 0.1])
    # a prediction error of TV eps moves the strategy by exactly TV eps (no amplifier)
    p2 = p + np.array([-0.05, 0.05, 0.0])
    diff = 0.5 * np.abs(sample_br_response(game.payoff, p) - sample_br_response(game.payoff, p2)).sum()
    assert abs(diff - 0.05) < 1e-12
    with pytest.raises(ConfigError):
        SampleBRMatching(random_game(3, 4, seed=0).payoff)


def test_sample_br_dprime_differs_from_the_base_after_the_switch_and_beats_plain_play():
    game, cfg = rock_paper_scissors(), SAMPLE_BR_CONFIG
    env = make_games_env("rps_anti_model", rounds=cfg.rounds)
    robust = play_game(env, LogitResponseAgent(exact_dprime(game, cfg), rule="sample_br"), 0)
    plain = play_game(env, LogitResponseAgent(base_predictor(cfg), rule="sample_br"), 0)
    assert robust.info["switched"] and plain.avg_regret > 0.3 and robust.avg_regret < 0.5 * plain.avg_regret
    data = simulate(game, cfg, np.array([2, 2]), seed=0)
    after = data["after_switch"]
    assert after.any() and not after[:, 0].any()
    tv = 0.5 * np.abs(data["base"] - data["dprime"]).sum(-1)
    assert tv[after].mean() > 0.2 and tv[~after].max() == 0.0  # O(1) apart after the switch, equal before


def test_batched_simulator_matches_the_predictor_on_every_source():
    game = rock_paper_scissors()
    cfg = SAMPLE_BR_CONFIG.__class__(**{**SAMPLE_BR_CONFIG.__dict__, "rounds": 90})
    model = CausalTransformer(TransformerConfig(n_actions=3, context=91, d_model=8, n_layers=1, n_heads=2))
    data = simulate(game, cfg, np.arange(12) % len(KL_SOURCES), seed=3, model=model)
    assert np.array_equal(simulate(game, cfg, np.arange(12) % len(KL_SOURCES), seed=3, model=model)["tokens"],
                          data["tokens"])  # seeded
    for h in range(12):
        pred = exact_dprime(game, cfg)
        pred.reset(3)
        for t in range(cfg.rounds):
            assert np.allclose(pred.predict(), data["dprime"][h, t], atol=1e-12)
            assert pred.switched == data["after_switch"][h, t]
            pred.update(int(data["tokens"][h, t]))
    assert data["after_switch"][data["source"] == KL_SOURCES.index("anti_model")].any()
    with pytest.raises(ConfigError):
        simulate(game, cfg, np.array([KL_SOURCES.index("on_policy")]), seed=0)


def test_kl_training_lowers_held_out_tv_and_keeps_the_best_model():
    torch.set_num_threads(1)
    game = rock_paper_scissors()
    cfg = SAMPLE_BR_CONFIG.__class__(**{**SAMPLE_BR_CONFIG.__dict__, "rounds": 40})
    train = KLTrainConfig(steps=60, batch=12, d_model=16, n_layers=1, n_heads=2, val_histories=10, eval_every=10,
                          on_policy_every=20, patience=10)
    model, report = train_dprime_kl(game, cfg, train, seed=0)
    tvs = [row["val_mean_tv"] for row in report["history"]]
    assert report["best_val_mean_tv"] == min(tvs) and min(tvs) < tvs[0]
    assert model.cfg.alibi and model.cfg.context == 41
    val = simulate(game, cfg, np.arange(10) % 5, seed=10_000_000)  # the held-out set training used
    assert abs(tv_report(model, val)["all"]["mean_tv"] - report["best_val_mean_tv"]) < 1e-6


def test_alibi_transformer_is_causal_and_learns_its_slopes():
    model = CausalTransformer(TransformerConfig(n_actions=3, context=50, d_model=16, n_layers=2, n_heads=2,
                                                alibi=True))
    x = torch.randint(0, 4, (3, 50))
    x2 = x.clone()
    x2[:, 30:] = 0
    assert torch.allclose(model(x)[:, :30], model(x2)[:, :30], atol=1e-5)
    model(x).sum().backward()
    assert model.log_slopes.grad is not None and model.log_slopes.grad.abs().sum() > 0
    train_out = model(x).detach()
    model.eval()
    with torch.no_grad():  # the inference path must compute the same function as training
        assert torch.allclose(model(x), train_out, atol=1e-5)
