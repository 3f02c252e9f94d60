"""Training the action policy with RL: graph-guided step credit (GGPO) or trajectory credit (GRPO-style).

Both run the same loop: groups of ``group`` sampled rollouts per training question, reward 1 for an exact-match
answer, advantage normalised within the group, policy gradient with an entropy bonus. They differ only in the
credit each step gets:

* ``trajectory``: every step of a rollout shares its advantage ``(R - mean) / std``.
* ``ggpo``: the rollout's DAG memory is pruned to the ancestors of the answer node; a step whose evidence
  survives (it lay on a path that produced the answer) keeps ``(R - mean) / std``; a redundant step (all its
  nodes pruned) gets no positive credit, ``min(0, (R - mean) / std)``: it is not rewarded for a success it did
  not contribute to, and still shares the blame of a failure. (Crediting redundant steps with reward 0, i.e. a
  negative advantage even in successful rollouts, was tried first: it pushed the policy to answer at once,
  since a lone answer step is never redundant.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from agents.vimrag.agent import VimragAgent
from agents.vimrag.memory import DagMemory
from agents.vimrag.planner import ACTIONS, LearnedPlanner, PolicyNet, action_mask, state_features
from envs.errors import ConfigError, choice_error
from envs.rag.corpus import Question, sample_by_type

CREDITS = ("ggpo", "trajectory")


@dataclass(frozen=True)
class TrainConfig:
    """One training run: credit scheme, episode budget, group size and optimiser settings."""

    credit: str = "ggpo"
    episodes: int = 3072
    group: int = 8  # rollouts per question (the group of the normalised advantage)
    questions_per_batch: int = 8
    lr: float = 1e-2
    entropy: float = 0.01
    eval_every: int = 256  # episodes between dev evaluations
    seed: int = 0

    def check(self) -> None:
        """Raise ConfigError on a bad value."""
        if self.credit not in CREDITS:
            raise choice_error("credit", self.credit, CREDITS)
        for name in ("episodes", "group", "questions_per_batch", "eval_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")


def step_validity(memory: DagMemory) -> dict[int, bool]:
    """Per step: does any of its evidence survive pruning the memory to the answer's ancestors?"""
    answer = memory.latest("answer")
    if answer is None:
        raise ValueError("the memory has no answer node")
    supporting = memory.supporting_steps(answer.node_id)
    steps = {n.step for n in memory.nodes if n.kind == "think"}
    return {s: s in supporting for s in sorted(steps)}


def step_advantages(rewards: list[float], validity: list[dict[int, bool]], steps: list[list[int]],
                    credit: str) -> list[np.ndarray]:
    """Advantages for every decision of every rollout of one group (see the module docstring)."""
    r = np.asarray(rewards, np.float64)
    mean, std = r.mean(), r.std() + 1e-6
    out = []
    for reward, valid, decided in zip(rewards, validity, steps, strict=True):
        if credit == "trajectory":
            out.append(np.full(len(decided), (reward - mean) / std))
        else:
            adv = (reward - mean) / std
            out.append(np.array([adv if valid.get(s, False) else min(0.0, adv) for s in decided]))
    return out


@dataclass
class _Decision:
    q: np.ndarray
    state: np.ndarray
    mask: np.ndarray
    action: int
    step: int


def evaluate(agent: VimragAgent, questions: list[Question]) -> float:
    """Exact-match accuracy of the greedy planner."""
    rng, hook = agent.rng, agent.on_decision
    agent.rng, agent.on_decision = None, None
    try:
        correct = sum(agent.rollout(q.qid, q.text)["answer"] == q.answer for q in questions)
    finally:
        agent.rng, agent.on_decision = rng, hook
    return correct / max(1, len(questions))


def train_planner(agent: VimragAgent, train: list[Question], dev: list[Question], cfg: TrainConfig,
                  log: Callable[[dict], None] | None = None) -> tuple[LearnedPlanner, list[dict]]:
    """Train ``agent``'s planner in place (a fresh PolicyNet); returns it and the learning curve on ``dev``."""
    cfg.check()
    rng = np.random.default_rng(cfg.seed)
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)  # inside fork_rng: no global RNG state leaks out
        net = PolicyNet()
    planner = LearnedPlanner(net)
    agent.planner, agent.rng = planner, rng
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    decisions: list[_Decision] = []

    def record(state, action: str) -> None:
        decisions.append(_Decision(agent.tools.kb.question_emb[state["qid"]],
                                   state_features(state["memory"], state["expanded"], state["step"], agent.max_steps,
                                                  state["history"]),
                                   action_mask(state["memory"], state["expanded"]), ACTIONS.index(action),
                                   state["step"]))

    agent.on_decision = record
    curve = [{"episodes": 0, "dev_accuracy": evaluate(agent, dev)}]
    if log:
        log(curve[-1])
    done, t0, next_eval = 0, time.perf_counter(), cfg.eval_every
    while done < cfg.episodes:
        net.train()
        batch_q, batch_s, batch_m, batch_a, batch_adv = [], [], [], [], []
        rewards_all = []
        for q in sample_by_type(train, rng, cfg.questions_per_batch):
            rewards, validity, steps, group = [], [], [], []
            for _ in range(cfg.group):
                decisions.clear()
                final = agent.rollout(q.qid, q.text)
                rewards.append(float(final["answer"] == q.answer))
                validity.append(step_validity(final["memory"]))
                steps.append([d.step for d in decisions])
                group.append(list(decisions))
            for decs, adv in zip(group, step_advantages(rewards, validity, steps, cfg.credit), strict=True):
                for d, a in zip(decs, adv, strict=True):
                    batch_q.append(d.q)
                    batch_s.append(d.state)
                    batch_m.append(d.mask)
                    batch_a.append(d.action)
                    batch_adv.append(a)
            rewards_all += rewards
            done += cfg.group
        logp = net(torch.from_numpy(np.stack(batch_q)), torch.from_numpy(np.stack(batch_s)),
                   torch.from_numpy(np.stack(batch_m)))
        chosen = logp[torch.arange(len(batch_a)), torch.tensor(batch_a)]
        adv = torch.tensor(np.asarray(batch_adv), dtype=torch.float32)
        entropy = -(logp.exp() * logp.clamp(min=-30)).sum(-1).mean()
        loss = -(adv * chosen).mean() - cfg.entropy * entropy
        opt.zero_grad()
        loss.backward()
        opt.step()
        net.eval()
        if done >= next_eval or done >= cfg.episodes:
            next_eval += cfg.eval_every
            curve.append({"episodes": done, "dev_accuracy": evaluate(agent, dev),
                          "train_reward": float(np.mean(rewards_all)), "elapsed_s": time.perf_counter() - t0})
            if log:
                log(curve[-1])
    agent.on_decision, agent.rng = None, None
    return planner, curve
