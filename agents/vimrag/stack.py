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
from agents.vimrag.options import DEFAULT_BUDGET
from agents.vimrag.planner import LearnedPlanner
from envs.rag.corpus import corpus_dir
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


@functools.lru_cache(maxsize=4)
def load_stack(corpus_seed: int = 0, folder: str | None = None, reader_seed: int = 0) -> Stack:
    """Corpus, encodings, tools and reader for one corpus seed (built and cached on first use)."""
    kb = load_knowledge_base(corpus_seed, folder)
    where = Path(folder) if folder is not None else corpus_dir(corpus_seed)
    return Stack(kb, RetrievalTools(kb), load_or_train_reader(kb, where, reader_seed), where)


def planner_path(stack: Stack, credit: str, seed: int) -> Path:
    """Cache file of a trained planner."""
    return stack.folder / f"planner_{credit}_seed{int(seed)}.pt"


def trained_planner(stack: Stack, credit: str = "ggpo", seed: int = 0, budget: int = DEFAULT_BUDGET) -> LearnedPlanner:
    """The planner trained with ``credit`` and ``seed`` (default TrainConfig), training and caching it if missing."""
    path = planner_path(stack, credit, seed)
    with open(stack.folder / ".planner.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return LearnedPlanner.load(path)
        agent = VimragAgent(stack.tools, stack.reader, None, mode="graph", budget=budget)
        corpus = stack.kb.corpus
        planner, _ = train_planner(agent, corpus.split("train"), corpus.split("dev"),
                                   TrainConfig(credit=credit, seed=seed))
        planner.save(path)
        return planner


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
        config = {"configurable": {"thread_id": obs["qid"]}, "recursion_limit": 8 * self.agent.max_steps + 8}
        state = self.graph.invoke(self.agent.start(obs["qid"], obs["question"]), config)
        memory = state["memory"]
        gold = self.agent.gold.get(obs["qid"])
        refs = {n.ref for n in memory.nodes}
        recall = (sum(g in refs for g in gold.gold) / len(gold.gold)) if gold is not None else float("nan")
        self.last = {"answer": state["answer"], "visual_tokens": state["visual_tokens"],
                     "text_tokens": state["text_tokens"], "agent_steps": state["step"] + 1,
                     "evidence_recall": recall, "agent_latency_s": time.perf_counter() - t0}
        return dict(self.last)

    def episode_info(self) -> dict[str, Any]:
        """Per-episode extras for the record: agent latency."""
        return {"agent_latency_s": float(self.last.get("agent_latency_s", 0.0))}
