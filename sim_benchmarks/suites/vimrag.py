"""Declares the ``vimrag`` suite: multimodal multi-hop questions over a simulator-built corpus, one per episode.

Tasks are the question types; episode ``i`` of a task is test question ``i`` of that type; ``success`` is
exact-match correctness. Policies share the tools, the reader and the GGPO-trained planner and differ in memory
and visual-token allocation (see :mod:`agents.vimrag.agent`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.vimrag.options import VimragOptions
from envs.rag.corpus import QUESTION_TYPES, load_corpus
from envs.rag.env import QuestionEnv, QuestionEnvOptions, make_question_env
from sim_benchmarks.specs import PolicyContext, PolicySpec, Spec, SuiteSpec

SUITE = "vimrag"


# The suite's env options are the question env's (also the keywords of its gymnasium ids).
VimragEnvOptions = QuestionEnvOptions


def make_env(task: str, options: Mapping[str, Any]) -> QuestionEnv:
    """The question env of one type over the (cached) corpus."""
    announce_first_use(options)
    return make_question_env(task, options)


_ANNOUNCED: set[Path] = set()  # one line per corpus and process


def announce_first_use(options: Mapping[str, Any]) -> None:
    """One stderr line before the corpus or its encodings are built (the only parts evaluation builds itself), so a
    first run is not silent; nothing when both are cached."""
    import sys

    from envs.rag.corpus import corpus_dir

    opts = VimragEnvOptions.from_options(options)
    folder = Path(opts.corpus_dir) if opts.corpus_dir is not None else corpus_dir(opts.corpus_seed)
    if folder in _ANNOUNCED:
        return
    _ANNOUNCED.add(folder)
    if opts.corpus_dir is None and not (folder / "corpus.json").exists():
        print(f"vimrag: generating the corpus of seed {opts.corpus_seed} and its encodings on first use (about two "
              f"minutes of CPU, spread over the cores; cached in {folder})", file=sys.stderr, flush=True)
    elif (folder / "corpus.json").exists() and not (folder / "features.npz").exists():
        print(f"vimrag: encoding the corpus in {folder} on first use (about 80 s of CPU, in two processes where "
              f"there are two cores; cached there)", file=sys.stderr, flush=True)


def question_count(task: str, options: Mapping[str, Any]) -> int:
    """How many questions of type ``task`` the split holds: the most episodes a run of that task can have."""
    opts = VimragEnvOptions.from_options(options)
    announce_first_use(options)
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


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(SuiteSpec(
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
        # Evaluation never trains: the reader and planner are the shipped ones (or a corpus folder's own).
        stack = load_stack(corpus.seed, getattr(ctx.env.unwrapped, "corpus_folder", None), train=False)
        if opts.planner == "smollm2":
            from agents.vimrag.planner import ConstrainedLMPlanner
            from perception.smollm2 import load_smollm2

            planner = ConstrainedLMPlanner(*load_smollm2(), stack.tools.payload)
        else:
            planner = trained_planner(stack, opts.credit, opts.planner_seed, train=False)
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
    SPECS.append(PolicySpec(name=_name, description=_desc, factory=_factory(_mode), suites=(SUITE,),
                               options_type=VimragOptions))
