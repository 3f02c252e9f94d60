"""Assembling the VimRAG stack: corpus + encodings, tools, reader, planner; the harness policy that runs the graph.

Everything derived from the corpus is cached next to it (encodings, the trained reader, the GGPO-trained planner)
and rebuilt deterministically from the seeds when missing.
"""

from __future__ import annotations

import fcntl
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.vimrag.agent import VimragAgent
from agents.vimrag.ggpo import TrainConfig, train_planner
from agents.vimrag.options import DEFAULT_BUDGET, VimragOptions
from agents.vimrag.planner import LearnedPlanner
from envs.rag.corpus import corpus_dir, fitting_half
from policies.vimrag.knowledge_base import KnowledgeBase, load_knowledge_base
from policies.vimrag.reader import VisualReader, load_or_train_reader
from policies.vimrag.tools import RetrievalTools


@dataclass(frozen=True)
class Stack:
    """The frozen parts shared by every policy: knowledge base, tools, reader, and where their cache lives."""

    kb: KnowledgeBase
    tools: RetrievalTools
    reader: VisualReader
    folder: Path
    reader_seed: int = 0


@functools.lru_cache(maxsize=4)
def load_stack(corpus_seed: int = 0, folder: str | None = None, reader_seed: int = 0) -> Stack:
    """Corpus, encodings, tools and reader for one corpus seed (built and cached on first use)."""
    kb = load_knowledge_base(corpus_seed, folder)
    where = Path(folder) if folder is not None else corpus_dir(corpus_seed)
    return Stack(kb, RetrievalTools(kb), load_or_train_reader(kb, where, reader_seed), where, int(reader_seed))


# Bumped whenever the agent a planner is trained in, or how the cached planner is chosen, changes, so that no planner
# cached by an earlier version is reused.
PLANNER_VERSION = 2
# Independent RL runs behind one cached planner; the one with the best final dev accuracy is kept. Single runs stop
# on plateaus (answering at once, or reading too little) in a large share of seeds, and which seed does so changes
# with the machine's floating point: the default stack must not rest on one run's luck.
PLANNER_RESTARTS = 4
RESTART_SEED_STRIDE = 1000  # run k trains with seed + 1000 k (run 0 is the GGPO study's run of the same seed)


def planner_path(stack: Stack, credit: str, seed: int) -> Path:
    """Cache file of a trained planner (a planner is trained with one reader, so the reader's seed is part of the
    name when it is not 0)."""
    reader = f"_reader{stack.reader_seed}" if stack.reader_seed else ""
    return stack.folder / f"planner_v{PLANNER_VERSION}_{credit}_seed{int(seed)}{reader}.pt"


def trained_planner(stack: Stack, credit: str = "ggpo", seed: int = 0, budget: int = DEFAULT_BUDGET) -> LearnedPlanner:
    """The planner for ``credit`` and ``seed``, trained and cached when missing: ``PLANNER_RESTARTS`` runs of the
    default TrainConfig (seeds ``seed + RESTART_SEED_STRIDE * k``) on the planner's half of the train runs, and the
    one with the highest final dev accuracy kept (ties: the earlier run). The test split is never looked at."""
    path = planner_path(stack, credit, seed)
    with open(stack.folder / ".planner.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return LearnedPlanner.load(path)
        agent = VimragAgent(stack.tools, stack.reader, None, mode="graph", budget=budget, read_floor=0)
        corpus = stack.kb.corpus
        train, dev = fitting_half(corpus.split("train"), "planner"), corpus.split("dev")
        best: tuple[float, LearnedPlanner] | None = None
        for k in range(PLANNER_RESTARTS):
            cfg = TrainConfig(credit=credit, seed=int(seed) + RESTART_SEED_STRIDE * k)
            planner, curve = train_planner(agent, train, dev, cfg)
            if best is None or curve[-1]["dev_accuracy"] > best[0]:
                best = (curve[-1]["dev_accuracy"], planner)
        best[1].save(path)
        return best[1]


@functools.lru_cache(maxsize=2)
def _local_vlm(path: str, max_new_tokens: int):
    # One load per process: the harness rebuilds the policy for every (task, policy) cell.
    from perception.external_vlm import LocalVLM

    return LocalVLM(path, max_new_tokens)


def reader_backend(opts: VimragOptions):
    """The external VLM ``opts.reader`` names (None for the trained reader): the endpoint is contacted, or the
    local model loaded, here, so an unreachable endpoint or a bad folder is a ConfigError before any question runs
    (call it before building the stack: that is the slow part)."""
    if opts.reader == "trained":
        return None
    if opts.reader == "openai":
        from perception.external_vlm import connect_openai

        return connect_openai(opts.reader_url, opts.reader_model, opts.reader_timeout_s, opts.reader_api_key_env,
                              opts.reader_max_tokens)
    return _local_vlm(str(Path(opts.reader_path).expanduser().resolve()), opts.reader_max_tokens)


def make_reader(stack: Stack, opts: VimragOptions, backend=None):
    """The reader ``opts.reader`` names: the stack's trained reader, or the external VLM ``backend`` (from
    :func:`reader_backend`) behind the same interface (:class:`~policies.vimrag.external_reader.ExternalReader`)."""
    if opts.reader == "trained":
        return stack.reader
    from policies.vimrag.external_reader import ExternalReader

    return ExternalReader(stack.kb, stack.reader, backend if backend is not None else reader_backend(opts),
                          opts.reader_patch_px)


class VimragPolicy:
    """Harness policy: ``act`` runs the compiled LangGraph agent on the observed question, returns its answer."""

    def __init__(self, agent: VimragAgent, checkpoint_db: str | None = None) -> None:
        self.agent = agent
        self.checkpointer = None
        if checkpoint_db:
            import sqlite3

            from langgraph.checkpoint.sqlite import SqliteSaver

            self.checkpointer = SqliteSaver(sqlite3.connect(checkpoint_db, check_same_thread=False))
        self.graph = agent.build_graph(self.checkpointer)
        self.last: dict[str, Any] = {}

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Nothing carries over between questions."""
        self.last = {}

    def act(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Answer one question; the action carries the token accounting for the record."""
        t0 = time.perf_counter()
        usage = self._reader_usage()
        config = {"configurable": {"thread_id": obs["qid"]}, "recursion_limit": 8 * self.agent.max_steps + 8}
        state = self.graph.invoke(self.agent.start(obs["qid"], obs["question"]), config)
        memory = state["memory"]
        gold = self.agent.gold.get(obs["qid"])
        refs = {n.ref for n in memory.nodes}
        recall = (sum(g in refs for g in gold.gold) / len(gold.gold)) if gold is not None else float("nan")
        self.last = {"answer": state["answer"], "visual_tokens": state["visual_tokens"],
                     "text_tokens": state["text_tokens"], "agent_steps": state["step"] + 1,
                     "evidence_recall": recall, "agent_latency_s": time.perf_counter() - t0}
        if usage is not None:
            after = self._reader_usage()
            self.last.update({f"reader_{k}": after[k] - usage[k] for k in usage})
        return dict(self.last)

    def _reader_usage(self) -> dict[str, int] | None:
        # External readers: VLM calls, and what an endpoint reported it consumed (its own token count).
        reader = self.agent.reader
        if not hasattr(reader, "backend"):
            return None
        return {"calls": reader.reads, **getattr(reader.backend, "usage", {})}

    def episode_info(self) -> dict[str, Any]:
        """Per-episode extras for the record: agent latency; with an external reader its calls (and the endpoint's
        reported token usage)."""
        return {"agent_latency_s": float(self.last.get("agent_latency_s", 0.0)),
                **{k: v for k, v in self.last.items() if k.startswith("reader_")}}
