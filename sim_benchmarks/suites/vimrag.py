"""Registers the ``vimrag`` suite: multimodal multi-hop questions over a simulator-built corpus, one per episode.

Tasks are the question types; episode ``i`` of a task is test question ``i`` of that type; ``success`` is
exact-match correctness. Policies share the tools, the reader and the GGPO-trained planner and differ in memory
and visual-token allocation (see :mod:`agents.vimrag.agent`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents.vimrag.options import VimragOptions
from envs.config import Options
from envs.rag.corpus import QUESTION_TYPES, SPLITS, load_corpus
from envs.rag.env import QuestionEnv
from sim_benchmarks.registry import PolicyContext, PolicySpec, SuiteSpec, register_policy, register_suite

SUITE = "vimrag"


@dataclass(frozen=True)
class VimragEnvOptions(Options):
    """Env options of the vimrag suite (``--env-option key=value``)."""

    title = "vimrag env options"
    corpus_seed: int = dataclasses.field(default=0, metadata={"help": "seed of the generated corpus"})
    corpus_dir: str | None = dataclasses.field(default=None, metadata={
        "help": "folder of a saved corpus (corpus.json + pixels.npz) instead of the generated one"})
    split: str = dataclasses.field(default="test", metadata={"help": "question split: train, dev or test"})

    def check(self) -> None:
        from envs.errors import choice_error

        if self.split not in SPLITS:
            raise choice_error("split", self.split, SPLITS)


def make_env(task: str, options: Mapping[str, Any]) -> QuestionEnv:
    """The question env of one type over the (cached) corpus."""
    opts = VimragEnvOptions.from_options(options)
    env = QuestionEnv(load_corpus(opts.corpus_seed, opts.corpus_dir), opts.split, task)
    env.corpus_folder = opts.corpus_dir
    return env


def question_count(task: str, options: Mapping[str, Any]) -> int:
    """How many questions of type ``task`` the split holds: the most episodes a run of that task can have."""
    opts = VimragEnvOptions.from_options(options)
    return len(load_corpus(opts.corpus_seed, opts.corpus_dir).split(opts.split, task))


def vimrag_episode_metrics(info: dict[str, Any], total_return: float, steps: int) -> dict[str, Any]:
    """Record of one question: exact-match success plus the agent's token and step accounting."""
    recall = info.get("evidence_recall", math.nan)
    return {
        "success": bool(info.get("success", False)),
        "correct_object": bool(info.get("success", False)),
        "wrong_object": False,
        "return": float(total_return),
        "visual_tokens": int(info.get("visual_tokens", 0)),
        "text_tokens": int(info.get("text_tokens", 0)),
        "agent_steps": int(info.get("agent_steps", 0)),
        "evidence_recall": None if recall != recall else float(recall),
    }


register_suite(SuiteSpec(
    name=SUITE,
    description="VimRAG: multi-hop questions over robot run logs, keyframes and catalogue photos (exact match)",
    tasks=QUESTION_TYPES,
    make_env=make_env,
    default_policies=("vimrag", "linear_rag", "uniform_budget", "oracle_evidence"),
    default_episodes=50,  # every type has at least this many test questions (drop_colour: 58 on seed 0)
    default_workers=2,
    episode_metrics=vimrag_episode_metrics,
    episode_count=question_count,
))


def _factory(mode: str):
    def build(ctx: PolicyContext):
        from agents.vimrag.agent import VimragAgent
        from agents.vimrag.stack import VimragPolicy, load_stack, make_reader, reader_backend, trained_planner

        opts = VimragOptions.from_options(ctx.options, strict=False)
        backend = reader_backend(opts)  # first: an unreachable endpoint fails before the stack is built
        corpus = ctx.env.unwrapped.corpus
        stack = load_stack(corpus.seed, getattr(ctx.env.unwrapped, "corpus_folder", None))
        if opts.planner == "smollm2":
            from agents.vimrag.planner import ConstrainedLMPlanner
            from perception.smollm2 import load_smollm2

            planner = ConstrainedLMPlanner(*load_smollm2(), stack.tools.payload)
        else:
            planner = trained_planner(stack, opts.credit, opts.planner_seed)
        gold = {q.qid: q for q in corpus.questions}
        agent = VimragAgent(stack.tools, make_reader(stack, opts, backend), planner, mode=mode, budget=opts.budget,
                            max_steps=opts.max_steps, gold=gold)
        return VimragPolicy(agent, opts.checkpoint_db)

    return build


POLICIES = {
    "vimrag": ("graph", "DAG memory; visual tokens by graph significance (pivotal 7x7, minor compressed, "
                        "trivial dropped), part held back for the reads that open leads still allow"),
    "linear_rag": ("linear", "ReAct-style linear history; images take full 7x7 grids in arrival order until the "
                             "budget is spent"),
    "uniform_budget": ("uniform", "DAG memory; the visual-token budget spread evenly over every image node"),
    "oracle_evidence": ("oracle", "upper bound: the gold evidence chain is put in memory, graph allocation"),
}

for _name, (_mode, _desc) in POLICIES.items():
    register_policy(PolicySpec(name=_name, description=_desc, factory=_factory(_mode), suites=(SUITE,),
                               options_type=VimragOptions))
