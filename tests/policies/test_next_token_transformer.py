import math

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from policies.next_token.pretrained import checkpoint_path, default_model
from policies.next_token.transformer import (
    CausalTransformer,
    TrainConfig,
    TransformerConfig,
    TransformerPredictor,
    load_model,
    save_model,
    train_next_token,
)


def test_model_is_causal():
    torch.manual_seed(0)
    model = CausalTransformer(TransformerConfig(n_actions=3, context=16)).eval()
    x = torch.randint(0, 3, (1, 16))
    y = x.clone()
    y[0, 10:] = (y[0, 10:] + 1) % 3
    with torch.no_grad():
        assert torch.allclose(model(x)[0, :10], model(y)[0, :10], atol=1e-6)
        assert not torch.allclose(model(x)[0, 10:], model(y)[0, 10:])


def test_short_training_lowers_the_loss_below_uniform():
    torch.set_num_threads(1)
    logs = []
    _, losses = train_next_token(TransformerConfig(n_actions=3, context=16, d_model=16),
                                 TrainConfig(steps=80, batch=32, sequences=200, seq_len=40, log_every=20),
                                 seed=0, on_log=logs.append)
    assert [r["step"] for r in logs] == [20, 40, 60, 80]
    assert logs[-1]["loss"] < logs[0]["loss"] and logs[-1]["loss"] < math.log(3) - 0.1


def test_save_load_roundtrip_and_corruption(tmp_path):
    model = CausalTransformer(TransformerConfig(n_actions=2, context=8, d_model=8))
    path = tmp_path / "m.pt"
    save_model(model, path)
    loaded = load_model(path)
    x = torch.randint(0, 2, (2, 8))
    with torch.no_grad():
        assert torch.allclose(model.eval()(x), loaded(x))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ConfigError, match="sha256"):
        load_model(path)
    with pytest.raises(ConfigError, match="corrupt"):
        load_model(path, verify=False)
    with pytest.raises(ConfigError, match="not found"):
        load_model(tmp_path / "missing.pt")


@pytest.mark.parametrize("n", [2, 3])
def test_shipped_checkpoint_predicts_patterns(n):
    assert checkpoint_path(n).exists() and checkpoint_path(n).stat().st_size < 2_000_000
    pred = TransformerPredictor(default_model(n))
    pred.reset(n)
    pattern = [0, 1] if n == 2 else [0, 1, 2]
    for a in pattern * 8:
        pred.update(a)
    assert pred.predict()[0] > 0.8  # the cycle continues with action 0
    pred.reset(n)
    for a in [1] * 20:
        pred.update(a)
    assert int(np.argmax(pred.predict())) == 1


def test_distillation_targets_are_the_robust_agent_and_training_fits_them():
    from agents.repeated_game import play_game
    from envs.games import make_games_env, rock_paper_scissors
    from policies.next_token import NGramPredictor, RobustAgent
    from policies.next_token.distilled import DistillConfig, make_histories, train_distilled

    torch.set_num_threads(1)
    game = rock_paper_scissors()
    cfg = DistillConfig(rounds=60, histories=6, steps=1)
    feats, targets = make_histories(game, cfg, seed=1)
    assert feats.shape == (6, 60, 8) and targets.shape == (6, 60, 3)
    # history 1 is the anti-model against RobustAgent: its targets are the agent's strategies in that game
    traj = play_game(make_games_env("rps_anti_model", rounds=60), RobustAgent(NGramPredictor()), 1 * 100_000 + 1)
    assert np.allclose(targets[1], traj.mixed, atol=1e-6)
    _, report = train_distilled(game, DistillConfig(rounds=60, histories=60, steps=120, d_model=16), seed=0)
    assert report["val_mean_tv"] < 0.25


def test_evaluation_gets_an_error_not_a_training_run_for_a_missing_model():
    from envs.errors import ConfigError

    assert not checkpoint_path(7).exists()
    with pytest.raises(ConfigError, match="no next-token model for 7 opponent actions"):
        default_model(7, train=False)
