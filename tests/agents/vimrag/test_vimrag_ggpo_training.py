"""Planner RL on the tiny corpus: the step-cost reward, and that the per-batch diagnostic hook changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.vimrag.agent import VimragAgent
from agents.vimrag.ggpo import (
    Group,
    TrainConfig,
    episode_reward,
    evaluate_detail,
    step_advantages,
    train_planner,
)
from agents.vimrag.planner import ACTIONS, Q_DIM, STATE_DIM
from envs.errors import ConfigError

pytestmark = pytest.mark.slow
torch.set_num_threads(1)


def _agent(tiny_stack) -> VimragAgent:
    _, tools, reader, _ = tiny_stack
    return VimragAgent(tools, reader, None, mode="graph", read_floor=0)


def _questions(tiny_stack):
    corpus = tiny_stack[0].corpus
    return corpus.split("train")[:12], corpus.split("train")[12:20]


def test_step_cost_is_charged_per_step_before_the_answer() -> None:
    assert episode_reward({"answer": "red", "step": 3}, "red") == 1.0
    assert episode_reward({"answer": "red", "step": 3}, "red", 0.05) == pytest.approx(0.85)
    assert episode_reward({"answer": "blue", "step": 0}, "red", 0.05) == 0.0
    with pytest.raises(ConfigError, match="step_cost"):
        TrainConfig(step_cost=-0.1).check()


def test_credits_differ_only_on_redundant_steps_of_rewarded_rollouts() -> None:
    g = Group(decisions=[[], []], rewards=[0.9, 0.0], validity=[{0: False, 1: True}, {0: False, 1: True}])
    g.decisions = [[type("D", (), {"step": s})() for s in (0, 1)] for _ in range(2)]
    traj, ggpo = g.advantages("trajectory"), g.advantages("ggpo")
    np.testing.assert_allclose(traj[0], [1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(ggpo[0], [0.0, 1.0], atol=1e-5)  # redundant step 0 loses its positive credit
    np.testing.assert_allclose(ggpo[1], traj[1], atol=1e-5)  # a failure's blame is shared by every step


def test_the_spread_floor_keeps_a_failing_group_from_rewarding_its_shortest_failure() -> None:
    rewards = [-0.02, -0.04, -0.06, -0.08]  # all wrong, different lengths
    valid = [{0: True}] * 4
    steps = [[0]] * 4
    plain = step_advantages(rewards, valid, steps, "trajectory")
    floored = step_advantages(rewards, valid, steps, "trajectory", std_floor=0.25)
    assert plain[0][0] > 1.0  # the shortest failure looks like a success
    assert 0 < floored[0][0] < 0.15
    mixed = [1.0, 0.0, 0.0, 0.0]  # a real success: the floor (below this spread) changes nothing
    np.testing.assert_allclose(step_advantages(mixed, valid, steps, "ggpo", std_floor=0.25)[0],
                               step_advantages(mixed, valid, steps, "ggpo")[0])


def test_the_batch_hook_sees_every_batch_and_changes_no_weight(tiny_stack) -> None:
    train, dev = _questions(tiny_stack)
    cfg = TrainConfig(credit="ggpo", episodes=32, group=4, questions_per_batch=2, eval_every=16, seed=5,
                      step_cost=0.05, lr=3e-3)
    plain, curve = train_planner(_agent(tiny_stack), train, dev, cfg)
    seen = []

    def hook(net, groups):
        seen.append(sum(len(g.rewards) for g in groups))
        mask = torch.ones(1, len(ACTIONS), dtype=torch.bool)
        loss = sum(net(torch.zeros(1, Q_DIM), torch.zeros(1, STATE_DIM), mask).sum() for _ in groups)
        torch.autograd.grad(loss, list(net.parameters()))  # what the study's diagnostics do

    hooked, curve2 = train_planner(_agent(tiny_stack), train, dev, cfg, on_batch=hook)
    assert seen == [8, 8, 8, 8]
    for a, b in zip(plain.net.state_dict().values(), hooked.net.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    strip = [{k: v for k, v in p.items() if k != "elapsed_s"} for p in curve]
    assert strip == [{k: v for k, v in p.items() if k != "elapsed_s"} for p in curve2]
    # With a step cost the curve reports the reward the planner is trained for, and it is consistent.
    last = curve[-1]
    assert last["dev_reward"] == pytest.approx(last["dev_accuracy"] - 0.05 * last["dev_steps"])
    agent = _agent(tiny_stack)
    agent.planner = plain
    assert evaluate_detail(agent, dev, 0.05)["reward"] == pytest.approx(last["dev_reward"])


def test_without_a_step_cost_the_curve_keeps_its_original_keys(tiny_stack) -> None:
    train, dev = _questions(tiny_stack)
    cfg = TrainConfig(episodes=8, group=4, questions_per_batch=2, eval_every=8, seed=1)
    _, curve = train_planner(_agent(tiny_stack), train, dev, cfg)
    assert set(curve[0]) == {"episodes", "dev_accuracy"}
    assert set(curve[-1]) == {"episodes", "dev_accuracy", "train_reward", "elapsed_s"}
