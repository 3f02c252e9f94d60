"""The claim (e) study: noise injection, the opponent that measures the switched branch, and the CLI end to end."""

import json

import numpy as np

from envs.games import rock_paper_scissors
from policies.next_token.dprime import SAMPLE_BR_CONFIG, exact_dprime
from sim_benchmarks.studies.next_token.dprime_study import (
    NoisyPredictor,
    main,
    play_curve,
    uniform_after_switch,
)


def test_noisy_predictor_sits_at_the_requested_tv_and_only_after_the_switch_when_asked():
    game = rock_paper_scissors()
    for after_only in (False, True):
        noisy = NoisyPredictor(exact_dprime(game, SAMPLE_BR_CONFIG), 0.05, seed=0, after_switch_only=after_only)
        exact = exact_dprime(game, SAMPLE_BR_CONFIG)
        noisy.reset(3)
        exact.reset(3)
        rng = np.random.default_rng(0)
        for _ in range(60):
            tv = 0.5 * np.abs(noisy.predict() - exact.predict()).sum()
            assert abs(tv - (0.0 if after_only and not exact.switched else 0.05)) < 1e-9
            j = int(rng.integers(0, 3))
            noisy.update(j)
            exact.update(j)


def test_uniform_after_the_switch_is_caught_by_the_anti_then_biased_opponent_only():
    game, cfg = rock_paper_scissors(), SAMPLE_BR_CONFIG
    seeds = [0, 1, 2]
    res = {}
    for opp in ("anti_model", "anti_then_biased"):
        exact = play_curve(game, cfg, lambda s: exact_dprime(game, cfg), opp, seeds)
        unif = play_curve(game, cfg, lambda s: uniform_after_switch(game, cfg), opp, seeds)
        assert exact["switch_rate"] == 1.0
        res[opp] = unif["final"]["mean"] - exact["final"]["mean"]
    assert abs(res["anti_model"]) < 0.03  # the anti-model cannot tell Hedge from uniform in RPS
    assert res["anti_then_biased"] > 0.03  # after the hand-over only Hedge exploits the bias


def test_train_ship_evaluate_end_to_end(tmp_path):
    model = tmp_path / "m.pt"
    assert main(["train", "--seed", "0", "--steps", "3", "--rounds", "64", "--d-model", "8", "--n-layers", "1",
                 "--n-heads", "2", "--out", str(model)]) == 0
    assert (tmp_path / "m.pt.sha256").exists()
    dest = tmp_path / "ckpt" / "d.pt"
    assert main(["ship", "--model", str(model), "--dest", str(dest)]) == 0
    manifest = json.loads((dest.parent / "manifest.json").read_text())
    assert manifest["d.pt"]["sha256"] == (dest.parent / "d.pt.sha256").read_text().split()[0]
    assert "train --seed 0 --steps 3" in manifest["d.pt"]["training"]["command"]
    out = tmp_path / "ev"
    assert main(["evaluate", "--quick", "--seeds", "2", "--models", str(model), "--out", str(out)]) == 0
    res = json.loads((out / "dprime.json").read_text())
    row = res["sample_br"]["models"]["m.pt"]
    assert 0 <= row["held_out"]["all"]["mean_tv"] <= 1 and row["anti_model"]["final"]["n"] == 2
    assert res["verdict"]["verdict"] in {"yes", "partly", "no"}
    assert (out / "precision_curve.png").exists() and (out / "references.json").exists()


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["evaluate", "--models", str(tmp_path / "missing.pt"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.pt" in err[0]
    assert main(["train", "--steps", "0", "--out", str(tmp_path / "x.pt")]) == 2
    assert "--steps" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists()


def test_lockstep_model_games_are_the_ones_play_game_plays():
    import torch

    from policies.next_token.transformer import CausalTransformer, TransformerConfig, TransformerPredictor
    from sim_benchmarks.studies.next_token.dprime_study import ShadowedPredictor, model_curve

    torch.manual_seed(0)
    game = rock_paper_scissors()
    cfg = SAMPLE_BR_CONFIG.__class__(**{**SAMPLE_BR_CONFIG.__dict__, "rounds": 50})
    model = CausalTransformer(TransformerConfig(n_actions=3, context=51, d_model=16, n_layers=1, n_heads=2,
                                                alibi=True)).eval()
    for opp in ("anti_model", "D"):
        fast = model_curve(game, cfg, model, opp, [0, 1, 2])
        slow = play_curve(game, cfg, lambda s: ShadowedPredictor(TransformerPredictor(model), exact_dprime(game, cfg)),
                          opp, [0, 1, 2])
        assert np.allclose(fast["per_seed_final"], slow["per_seed_final"], atol=1e-6)
        assert abs(fast["tv_all"] - slow["tv_all"]) < 1e-6


def test_switched_branch_only_agent_plays_exact_dprime_until_the_switch():
    import torch

    from policies.next_token.transformer import CausalTransformer, TransformerConfig
    from sim_benchmarks.studies.next_token.dprime_study import model_curve

    torch.manual_seed(0)
    game = rock_paper_scissors()
    cfg = SAMPLE_BR_CONFIG.__class__(**{**SAMPLE_BR_CONFIG.__dict__, "rounds": 40})  # too short for a switch
    model = CausalTransformer(TransformerConfig(n_actions=3, context=41, d_model=8, n_layers=1, n_heads=2)).eval()
    hybrid = model_curve(game, cfg, model, "anti_model", [0, 1], after_switch_only=True)
    exact = play_curve(game, cfg, lambda s: exact_dprime(game, cfg), "anti_model", [0, 1])
    assert hybrid["switch_rate"] == 0.0 and hybrid["tv_after_switch"] is None
    assert np.allclose(hybrid["per_seed_final"], exact["per_seed_final"])
    plain_model = model_curve(game, cfg, model, "anti_model", [0, 1])
    assert not np.allclose(plain_model["per_seed_final"], exact["per_seed_final"])
