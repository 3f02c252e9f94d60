import math

import numpy as np
import pytest

from agents.repeated_game import play_game
from envs.errors import ConfigError
from envs.games import RepeatedGameEnv, SequenceOpponent, make_games_env, random_game, rock_paper_scissors
from policies.next_token import (
    BestResponseAgent,
    HedgeAgent,
    HiddenBiasBayesPredictor,
    NGramPredictor,
    RobustAgent,
    WindowedRobustAgent,
    hedge_regret_bound,
    switch_probability_bound,
    tau_schedule,
)

T = 600


@pytest.mark.parametrize("task", ["rps_anti_model", "matching_pennies_anti_model", "random3x3_anti_model",
                                  "rps_D", "rps_block", "random3x3_markov"])
def test_hedge_regret_below_sqrt_T_lnK_over_2_over_seeds(task):
    env = make_games_env(task, rounds=T)
    bound = hedge_regret_bound(T, env.game.n_learner)
    regrets = [play_game(env, HedgeAgent(), seed).final_regret for seed in range(5)]
    assert max(regrets) <= bound
    if task.endswith("anti_model"):
        assert min(regrets) > 0.1 * bound  # the adversary does extract regret: the bound is not vacuous here


def test_hedge_bound_on_random_payoff_sequences():
    # Arbitrary (non-game) payoff vectors in [0, 1]: a K=5 "game" whose columns are random payoff vectors.
    rng = np.random.default_rng(0)
    game = random_game(5, 40, seed=3)
    seq = tuple(int(j) for j in rng.integers(0, 40, size=T))
    env = RepeatedGameEnv(game, SequenceOpponent(seq), rounds=T)
    assert play_game(env, HedgeAgent(), 0).final_regret <= hedge_regret_bound(T, 5)


@pytest.mark.parametrize("task", ["rps_anti_model", "matching_pennies_anti_model"])
def test_best_response_is_exploited_by_anti_model(task):
    env = make_games_env(task, rounds=T)
    for seed in range(3):
        assert play_game(env, BestResponseAgent(NGramPredictor()), seed).avg_regret >= 0.5


@pytest.mark.parametrize("tau", ["delta", "exp", 12.5])
@pytest.mark.parametrize("task", ["rps_anti_model", "random3x3_anti_model", "matching_pennies_anti_model"])
def test_robust_regret_bound_against_adversary(task, tau):
    env = make_games_env(task, rounds=T)
    k = env.game.n_learner
    for seed in range(2):
        agent = RobustAgent(NGramPredictor(), tau=tau)
        traj = play_game(env, agent, seed)
        assert traj.info["switched"]
        assert traj.regret.max() <= agent.tau + 1 + hedge_regret_bound(T, k)
    if not task.startswith("random"):  # in RPS / pennies best response loses every round; robust stops that early
        br = play_game(env, BestResponseAgent(NGramPredictor()), 1).final_regret
        assert traj.final_regret < 0.5 * br


def test_robust_keeps_the_model_advantage_on_patterned_opponents():
    env = make_games_env("rps_cyclic", rounds=T)
    avg = []
    for seed in range(6):
        br = play_game(env, BestResponseAgent(NGramPredictor()), seed)
        rob = play_game(env, RobustAgent(NGramPredictor()), seed)
        assert not rob.info["switched"]
        assert rob.final_regret == pytest.approx(br.final_regret)
        assert rob.avg_regret < 0.01  # a constant pattern leaves no advantage over the best fixed action
        avg.append(rob.avg_regret)
    assert np.mean(avg) < -0.1  # on average it beats every fixed action by a wide margin


def test_windowed_with_full_window_equals_unbounded():
    rng = np.random.default_rng(7)
    seq = tuple(int(j) for j in rng.integers(0, 3, size=400))
    envs = (RepeatedGameEnv(rock_paper_scissors(), SequenceOpponent(seq), 400), make_games_env("rps_anti_model", 400))
    for env in envs:
        a = play_game(env, RobustAgent(NGramPredictor(), tau=6.0), 1)
        b = play_game(env, WindowedRobustAgent(NGramPredictor(), window=10_000, tau=6.0), 1)
        assert np.array_equal(a.mixed, b.mixed) and a.info["switch_round"] == b.info["switch_round"]


def test_windowed_robust_forgets_its_switch():
    env = make_games_env("rps_anti_model", rounds=T)
    agent = WindowedRobustAgent(NGramPredictor(window=50), window=50, tau=5.0)
    traj = play_game(env, agent, 0)
    assert traj.info["switched"]
    assert 0 < traj.info["deviation_rounds"] < T  # it returns to best response once the trigger leaves the window


def _fresh_ngram(tokens, order=3):
    p = NGramPredictor(order=order)
    p.reset(3)
    for a in tokens:
        p.update(a)
    return p.predict()


def test_windowed_ngram_equals_ngram_on_the_window():
    rng = np.random.default_rng(0)
    seq = [int(a) for a in rng.choice(3, p=[0.6, 0.3, 0.1], size=300)]
    w = NGramPredictor(window=40)
    w.reset(3)
    for t, a in enumerate(seq):
        w.update(a)
        if t % 37 == 0:
            assert np.allclose(w.predict(), _fresh_ngram(seq[max(0, t - 39):t + 1]))


def test_ngram_learns_a_cycle():
    p = NGramPredictor()
    p.reset(3)
    for a in [0, 1, 2] * 10:
        p.update(a)
    assert p.predict()[0] > 0.8


def test_hidden_bias_posterior_predictive():
    eps = 0.1
    p = HiddenBiasBayesPredictor(eps=eps, window=5)
    p.reset(2)
    for a in [1, 1, 0, 1, 1, 1, 1]:
        p.update(a)
    n1, n0 = 4, 1  # last five actions: 0,1,1,1,1
    like_hi = (0.5 + eps) ** n1 * (0.5 - eps) ** n0
    like_lo = (0.5 - eps) ** n1 * (0.5 + eps) ** n0
    post = like_hi / (like_hi + like_lo)
    assert p.predict()[1] == pytest.approx(post * (0.5 + eps) + (1 - post) * (0.5 - eps))


def test_tau_schedules_and_switch_bound():
    assert tau_schedule("exp", 1000, 3) == pytest.approx(100.0)
    assert tau_schedule("delta", 1000, 3, delta=0.05) == pytest.approx(math.sqrt(2000 * math.log(60)))
    tau = tau_schedule("delta", 1000, 3, delta=0.05)
    assert switch_probability_bound(tau, 1000, 3) == pytest.approx(0.05)
    with pytest.raises(ConfigError, match="exp, delta"):
        tau_schedule("linear", 10, 2)
    with pytest.raises(ConfigError, match="delta"):
        tau_schedule("delta", 10, 2, delta=1.5)
