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

``step_cost`` (0 by default, as the cached planners are trained) turns the reward into ``exact match - step_cost *
steps taken before the answer``: redundant steps then cost something, the best plan depends on the question (a
two-hop question should stop earlier than a three-hop one), and the two credits can lead to different policies.
With no cost a redundant step changes no reward, so zeroing its credit cannot change which policy is best.
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
from envs.config import Options
from envs.errors import ConfigError, choice_error
from envs.rag.corpus import Question, sample_by_type

CREDITS = ("ggpo", "trajectory")


@dataclass(frozen=True)
class TrainConfig(Options):
    """One training run: credit scheme, episode budget, group size and optimiser settings."""

    credit: str = "ggpo"
    episodes: int = 3072
    group: int = 8  # rollouts per question (the group of the normalised advantage)
    questions_per_batch: int = 8
    lr: float = 1e-2
    entropy: float = 0.01
    eval_every: int = 256  # episodes between dev evaluations
    seed: int = 0
    step_cost: float = 0.0  # reward = exact match - step_cost * steps before the answer (0: exact match only)
    # Floor of the group's reward spread in the advantage. With a step cost, a group that fails throughout still has
    # a small spread (its rollouts differ in length): divided by it, the shortest failure looks like a full success
    # and training collapses to answering at once. 0: plain (R - mean) / std, as the cached planners are trained.
    std_floor: float = 0.0

    def check(self) -> None:
        """Raise ConfigError on a bad value."""
        if self.credit not in CREDITS:
            raise choice_error("credit", self.credit, CREDITS)
        for name in ("episodes", "group", "questions_per_batch", "eval_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not (self.lr > 0 and self.step_cost >= 0 and self.entropy >= 0 and self.std_floor >= 0):
            raise ConfigError(f"lr must be > 0, step_cost, std_floor and entropy >= 0; got lr={self.lr}, "
                              f"step_cost={self.step_cost}, std_floor={self.std_floor}, entropy={self.entropy}")


def step_validity(memory: DagMemory) -> dict[int, bool]:
    """Per step: does any of its evidence survive pruning the memory to the answer's ancestors?"""
    answer = memory.latest("answer")
    if answer is None:
        raise ValueError("the memory has no answer node")
    supporting = memory.supporting_steps(answer.node_id)
    steps = {n.step for n in memory.nodes if n.kind == "think"}
    return {s: s in supporting for s in sorted(steps)}


def step_advantages(rewards: list[float], validity: list[dict[int, bool]], steps: list[list[int]],
                    credit: str, std_floor: float = 0.0) -> list[np.ndarray]:
    """Advantages for every decision of every rollout of one group (see the module docstring); the group's reward
    spread is taken as at least ``std_floor``."""
    r = np.asarray(rewards, np.float64)
    mean, std = r.mean(), max(r.std(), std_floor) + 1e-6
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


def episode_reward(final: dict, gold: str, step_cost: float = 0.0) -> float:
    """Exact match of the final answer, less ``step_cost`` per agent step taken before answering."""
    return float(final["answer"] == gold) - step_cost * int(final["step"])


def evaluate_detail(agent: VimragAgent, questions: list[Question], step_cost: float = 0.0) -> dict[str, float]:
    """Greedy planner on ``questions``: exact-match accuracy, mean steps before the answer, mean reward."""
    rng, hook = agent.rng, agent.on_decision
    agent.rng, agent.on_decision = None, None
    try:
        finals = [(agent.rollout(q.qid, q.text), q.answer) for q in questions]
    finally:
        agent.rng, agent.on_decision = rng, hook
    n = max(1, len(questions))
    return {"accuracy": sum(f["answer"] == a for f, a in finals) / n,
            "steps": sum(int(f["step"]) for f, _ in finals) / n,
            "reward": sum(episode_reward(f, a, step_cost) for f, a in finals) / n}


def evaluate(agent: VimragAgent, questions: list[Question]) -> float:
    """Exact-match accuracy of the greedy planner."""
    return evaluate_detail(agent, questions)["accuracy"]


@dataclass
class Group:
    """The ``group`` sampled rollouts of one question: per rollout its decisions, reward and step validity."""

    decisions: list[list[_Decision]]
    rewards: list[float]
    validity: list[dict[int, bool]]
    std_floor: float = 0.0

    def steps(self) -> list[list[int]]:
        """The step index of every decision, per rollout."""
        return [[d.step for d in decs] for decs in self.decisions]

    def advantages(self, credit: str) -> list[np.ndarray]:
        """Per-decision advantages under ``credit`` (:func:`step_advantages`)."""
        return step_advantages(self.rewards, self.validity, self.steps(), credit, self.std_floor)


def sample_groups(agent: VimragAgent, train: list[Question], cfg: TrainConfig,
                  rng: np.random.Generator) -> list[Group]:
    """One batch: ``cfg.questions_per_batch`` questions (types equally likely), ``cfg.group`` rollouts each, sampled
    from ``agent``'s planner with ``rng`` (which the agent also samples its actions from)."""
    decisions: list[_Decision] = []

    def record(state, action: str) -> None:
        decisions.append(_Decision(agent.tools.kb.question_emb[state["qid"]],
                                   state_features(state["memory"], state["expanded"], state["step"], agent.max_steps,
                                                  state["history"]),
                                   action_mask(state["memory"], state["expanded"]), ACTIONS.index(action),
                                   state["step"]))

    hook, agent.on_decision, agent.rng = agent.on_decision, record, rng
    groups = []
    try:
        for q in sample_by_type(train, rng, cfg.questions_per_batch):
            group = Group([], [], [], cfg.std_floor)
            for _ in range(cfg.group):
                decisions.clear()
                final = agent.rollout(q.qid, q.text)
                group.rewards.append(episode_reward(final, q.answer, cfg.step_cost))
                group.validity.append(step_validity(final["memory"]))
                group.decisions.append(list(decisions))
            groups.append(group)
    finally:
        agent.on_decision = hook
    return groups


def policy_loss(net: PolicyNet, groups: list[Group], credit: str, entropy: float) -> torch.Tensor:
    """Policy-gradient loss of one batch under ``credit``, with an entropy bonus (mean over decisions)."""
    batch: list[_Decision] = []
    advs: list[float] = []
    for g in groups:
        for decs, adv in zip(g.decisions, g.advantages(credit), strict=True):
            batch += decs
            advs += [float(a) for a in adv]
    logp = net(torch.from_numpy(np.stack([d.q for d in batch])), torch.from_numpy(np.stack([d.state for d in batch])),
               torch.from_numpy(np.stack([d.mask for d in batch])))
    chosen = logp[torch.arange(len(batch)), torch.tensor([d.action for d in batch])]
    adv = torch.tensor(np.asarray(advs), dtype=torch.float32)
    ent = -(logp.exp() * logp.clamp(min=-30)).sum(-1).mean()
    return -(adv * chosen).mean() - entropy * ent


def _eval_point(agent: VimragAgent, dev: list[Question], cfg: TrainConfig) -> dict:
    # Without a step cost the curve keeps its original keys (the cached planners' studies read them).
    if cfg.step_cost == 0:
        return {"dev_accuracy": evaluate(agent, dev)}
    d = evaluate_detail(agent, dev, cfg.step_cost)
    return {"dev_accuracy": d["accuracy"], "dev_steps": d["steps"], "dev_reward": d["reward"]}


def train_planner(agent: VimragAgent, train: list[Question], dev: list[Question], cfg: TrainConfig,
                  log: Callable[[dict], None] | None = None,
                  on_batch: Callable[[PolicyNet, list[Group]], None] | None = None,
                  ) -> tuple[LearnedPlanner, list[dict]]:
    """Train ``agent``'s planner in place (a fresh PolicyNet); returns it and the learning curve on ``dev``.

    ``on_batch`` sees the network and every sampled batch before the update (a diagnostic: it must not change
    either, nor draw from the training generator)."""
    cfg.check()
    rng = np.random.default_rng(cfg.seed)
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)  # inside fork_rng: no global RNG state leaks out
        net = PolicyNet()
    planner = LearnedPlanner(net)
    agent.planner, agent.rng = planner, rng
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    curve = [{"episodes": 0, **_eval_point(agent, dev, cfg)}]
    if log:
        log(curve[-1])
    done, t0, next_eval = 0, time.perf_counter(), cfg.eval_every
    while done < cfg.episodes:
        net.train()
        groups = sample_groups(agent, train, cfg, rng)
        done += cfg.group * len(groups)
        if on_batch is not None:
            on_batch(net, groups)
        loss = policy_loss(net, groups, cfg.credit, cfg.entropy)
        opt.zero_grad()
        loss.backward()
        opt.step()
        net.eval()
        if done >= next_eval or done >= cfg.episodes:
            next_eval += cfg.eval_every
            curve.append({"episodes": done, **_eval_point(agent, dev, cfg),
                          "train_reward": float(np.mean([r for g in groups for r in g.rewards])),
                          "elapsed_s": time.perf_counter() - t0})
            if log:
                log(curve[-1])
    agent.on_decision, agent.rng = None, None
    return planner, curve
