import numpy as np
import pytest
import torch

from agents.repeated_game import play_game
from envs.games import RepeatedGameEnv, SequenceOpponent, make_games_env, random_game, rock_paper_scissors
from policies.next_token import NGramPredictor, RobustAgent, hedge_eta
from policies.next_token.explicit_layers import (
    ExplicitRobustAgent,
    RobustificationLayers,
    UniformCausalAttention,
    features_from_history,
)


def test_uniform_attention_is_a_causal_running_mean():
    torch.manual_seed(0)
    x = torch.randn(9, 4, dtype=torch.float64)
    att = UniformCausalAttention(torch.eye(4, dtype=torch.float64), torch.eye(4, dtype=torch.float64))
    expect = x + torch.cumsum(x, 0) / torch.arange(1, 10, dtype=torch.float64)[:, None]
    assert torch.allclose(att(x), expect)
    assert float(att.w_q.abs().sum() + att.w_k.abs().sum()) == 0.0


def _algorithmic(payoff, opponent, brs, tau):
    """RobustAgent's rule written out directly: best response until max regret > tau, then Hedge forever."""
    k = payoff.shape[0]
    eta = hedge_eta(len(brs), k)
    cum, learner, switched, out = np.zeros(k), 0.0, False, []
    for t, b in enumerate(brs):
        if t > 0:
            u = payoff[:, opponent[t - 1]]
            cum += u
            learner += u[brs[t - 1]]
        switched = switched or cum.max() - learner > tau
        z = np.exp(eta * cum - (eta * cum).max())
        out.append(z / z.sum() if switched else np.eye(k)[b])
    return np.array(out)


@pytest.mark.parametrize("k,n", [(2, 2), (3, 3), (4, 5)])
def test_explicit_layers_equal_the_algorithm_on_random_histories(k, n):
    rng = np.random.default_rng(k * 10 + n)
    switched_any = 0
    for trial in range(12):
        payoff = random_game(k, n, seed=trial).payoff
        length = int(rng.integers(20, 120))
        opponent = [int(j) for j in rng.integers(0, n, size=length)]
        brs = [int(b) for b in rng.integers(0, k, size=length)]  # arbitrary base-model best responses
        tau = float(rng.uniform(0.5, 8.0))
        layers = RobustificationLayers(k, tau, hedge_eta(length, k))
        feats = features_from_history(payoff, opponent, brs)
        got = layers(*feats).numpy()
        want = _algorithmic(payoff, opponent, brs, tau)
        assert np.allclose(got, want, atol=1e-12)
        switched_any += bool(layers.switched(*feats)[-1] > 0.5)
    assert 0 < switched_any < 12  # both branches of the gate were exercised


def test_explicit_agent_matches_robust_agent_in_play():
    torch.set_num_threads(1)
    rng = np.random.default_rng(3)
    seq = tuple(int(j) for j in rng.integers(0, 3, size=120))
    env = RepeatedGameEnv(rock_paper_scissors(), SequenceOpponent(seq), rounds=120)
    for tau in (3.0, "delta"):  # 3.0 and 5.0: regret hits tau exactly in RPS (half-integer payoffs)
        a = play_game(env, RobustAgent(NGramPredictor(), tau=tau), 0)
        b = play_game(env, ExplicitRobustAgent(NGramPredictor(), tau=tau), 0)
        assert np.allclose(a.mixed, b.mixed, atol=1e-6)
        assert a.info == b.info


def test_explicit_agent_is_low_regret_against_anti_model():
    torch.set_num_threads(1)
    env = make_games_env("matching_pennies_anti_model", rounds=200)
    traj = play_game(env, ExplicitRobustAgent(NGramPredictor()), 0)
    assert traj.info["switched"] and traj.final_regret <= traj.info["tau"] + 1 + np.sqrt(200 * np.log(2) / 2)
