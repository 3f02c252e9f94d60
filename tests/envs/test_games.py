import math

import gymnasium as gym
import numpy as np
import pytest

from envs.errors import ConfigError
from envs.games import (
    TASKS,
    AntiModelOpponent,
    CyclicOpponent,
    MatrixGame,
    RepeatedGameEnv,
    SequenceOpponent,
    make_game,
    make_games_env,
    normalise_mixed,
    random_game,
    rock_paper_scissors,
    sample_sequences,
)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_passes_check_env_through_its_gym_id(task):
    from envs.registration import family_id
    from tests.envs.test_gym_ids import checked

    env = gym.make(family_id("Games", task), rounds=20)
    assert env.unwrapped.rounds == 20 and env.unwrapped.opponent_name in task
    checked(env)


def _opponent_moves(env, seed, rounds):
    env.reset(seed=seed)
    k = env.game.n_learner
    return [env.step(np.full(k, 1.0 / k, dtype=np.float32))[4]["opponent_action"] for _ in range(rounds)]


@pytest.mark.parametrize("task", ["rps_biased", "rps_markov", "rps_cyclic", "matching_pennies_block", "rps_D"])
def test_reset_seed_fixes_the_episode(task):
    env = make_games_env(task, rounds=60)
    a, b, c = _opponent_moves(env, 3, 60), _opponent_moves(env, 3, 60), _opponent_moves(env, 4, 60)
    assert a == b
    assert a != c


def test_rps_payoffs_and_regret_bookkeeping():
    game = rock_paper_scissors()
    assert game.payoff[1, 0] == 1.0 and game.payoff[0, 1] == 0.0 and game.payoff[2, 2] == 0.5  # paper beats rock
    seq = (0, 1, 1, 2, 0, 0, 1)
    env = RepeatedGameEnv(game, SequenceOpponent(seq), rounds=len(seq))
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    cum, learner = np.zeros(3), 0.0
    for j in seq:
        p = rng.dirichlet(np.ones(3))
        _, reward, term, trunc, info = env.step(p.astype(np.float32))
        p = p.astype(np.float32).astype(np.float64)
        p /= p.sum()
        cum += game.payoff[:, j]
        learner += p @ game.payoff[:, j]
        assert reward == pytest.approx(p @ game.payoff[:, j], abs=1e-6)
        assert info["regret"] == pytest.approx(cum.max() - learner, abs=1e-6)
    assert trunc and not term
    with pytest.raises(RuntimeError):
        env.step(np.ones(3, dtype=np.float32))


def test_anti_model_beats_a_pure_strategy_every_round():
    env = make_games_env("rps_anti_model", rounds=200)
    env.reset(seed=0)
    for _ in range(200):
        _, reward, _, _, info = env.step(np.array([1, 0, 0], dtype=np.float32))
        assert reward == 0.0 and info["opponent_action"] == 1  # paper beats rock
    assert info["avg_regret"] == pytest.approx(1.0)  # scissors would have won every round


def test_anti_model_minimises_expected_payoff_of_a_mixed_strategy():
    game = random_game(3, 4, seed=5)
    opp = AntiModelOpponent()
    opp.reset(4, np.random.default_rng(0))
    p = np.array([0.2, 0.5, 0.3])
    j = opp.act([], p, game)
    assert p @ game.payoff[:, j] == pytest.approx((p @ game.payoff).min())


def test_cyclic_without_noise_is_periodic():
    opp = CyclicOpponent(pattern=(2, 0, 1), noise=0.0)
    opp.reset(3, np.random.default_rng(0))
    hist = []
    for _ in range(12):
        hist.append(opp.act(hist, np.ones(3) / 3, rock_paper_scissors()))
    assert hist[:3] * 4 == hist and sorted(hist[:3]) == [0, 1, 2]


def test_sample_sequences_from_d_are_seeded_and_in_range():
    a = sample_sequences(3, 50, 8, seed=1)
    assert a.shape == (8, 50) and a.min() >= 0 and a.max() <= 2
    assert np.array_equal(a, sample_sequences(3, 50, 8, seed=1))
    assert not np.array_equal(a, sample_sequences(3, 50, 8, seed=2))
    with pytest.raises(ConfigError, match="anti_model"):
        sample_sequences(3, 5, 1, seed=0, opponent="anti_model")


def test_random_game_is_seeded_and_in_unit_interval():
    g1, g2, g3 = random_game(3, 3, 0), random_game(3, 3, 0), random_game(3, 3, 1)
    assert np.array_equal(g1.payoff, g2.payoff) and not np.array_equal(g1.payoff, g3.payoff)
    assert g1.payoff.min() >= 0 and g1.payoff.max() <= 1
    assert make_game("random4x2", 0).payoff.shape == (4, 2)


def test_bad_inputs_raise_config_errors_naming_valid_values():
    with pytest.raises(ConfigError, match="rps_anti_model"):
        make_games_env("rps_nope")
    with pytest.raises(ConfigError, match="matching_pennies"):
        make_game("chess")
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        MatrixGame("bad", np.array([[0.0, 2.0], [1.0, 0.0]]))
    with pytest.raises(ConfigError, match="rounds"):
        make_games_env("rps_D", rounds=0)


def test_normalise_mixed():
    assert np.allclose(normalise_mixed(np.zeros(4), 4), 0.25)
    assert np.allclose(normalise_mixed(np.array([2.0, -1.0, 2.0]), 3), [0.5, 0.0, 0.5])
    assert math.isclose(normalise_mixed(np.array([0.1, 0.3]), 2).sum(), 1.0)
