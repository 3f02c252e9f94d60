"""Assembling the VimRAG stack: corpus + encodings, tools, reader, planner; the harness policy that runs the graph.

The encodings are cached next to the corpus and rebuilt deterministically when missing. The trained reader and
planner of the default corpus ship in ``checkpoints/vimrag`` (:mod:`agents.vimrag.shipped`, made by
``python -m launch.train_vimrag``); others are cached next to their corpus. Studies train a missing part on first
use (``train=True``); evaluation never does (``train=False``: a missing part is a ConfigError naming the command).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.vimrag.agent import VimragAgent
from agents.vimrag.ggpo import TrainConfig, train_planner
from agents.vimrag.options import DEFAULT_BUDGET, VimragOptions
from agents.vimrag.planner import LearnedPlanner
from agents.vimrag.shipped import missing_part, shipped_part, train_command
from envs.cache_files import load_or_build
from envs.rag.corpus import corpus_dir, fitting_half
from policies.vimrag.knowledge_base import KnowledgeBase, load_knowledge_base
from policies.vimrag.reader import VisualReader, load_or_train_reader, load_reader, reader_path
from policies.vimrag.tools import RetrievalTools


@dataclass(frozen=True)
class Stack:
    """The frozen parts shared by every policy: knowledge base, tools, reader, and where their cache lives."""

    kb: KnowledgeBase
    tools: RetrievalTools
    reader: VisualReader
    folder: Path
    reader_seed: int = 0
    shipped: bool = False  # the default corpus: its trained parts may ship in checkpoints/vimrag


@functools.lru_cache(maxsize=4)
def load_stack(corpus_seed: int = 0, folder: str | None = None, reader_seed: int = 0, train: bool = True) -> Stack:
    """Corpus, encodings, tools and reader for one corpus seed (corpus and encodings built and cached on first use).

    The reader is the shipped one when there is one, else the corpus cache's; a missing reader is trained and cached
    when ``train``, a ConfigError otherwise."""
    kb = load_knowledge_base(corpus_seed, folder)
    where = Path(folder) if folder is not None else corpus_dir(corpus_seed)
    name = reader_path(Path("."), reader_seed).name
    shipped = shipped_part(name, corpus_seed) if folder is None else None
    if shipped is not None:
        reader = load_reader(kb, shipped)
    elif not train and not reader_path(where, reader_seed).exists():
        raise missing_part("reader", where, train_command(corpus_seed, folder, reader_seed))
    else:
        reader = load_or_train_reader(kb, where, reader_seed)
    return Stack(kb, RetrievalTools(kb), reader, where, int(reader_seed), folder is None)


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


def trained_planner(stack: Stack, credit: str = "ggpo", seed: int = 0, budget: int = DEFAULT_BUDGET,
                    train: bool = True) -> LearnedPlanner:
    """The planner for ``credit`` and ``seed``: the shipped one when there is one, else the cached one; when neither
    exists, trained by :func:`train_best_planner` and cached if ``train``, a ConfigError otherwise."""
    path = planner_path(stack, credit, seed)
    if getattr(stack, "shipped", False):
        shipped = shipped_part(path.name, stack.kb.corpus.seed)
        if shipped is not None:
            return LearnedPlanner.load(shipped)
    if not train and not path.exists():
        folder = None if getattr(stack, "shipped", False) else stack.folder
        raise missing_part(f"planner ({credit}, seed {seed})", stack.folder,
                           train_command(stack.kb.corpus.seed, folder, stack.reader_seed, seed, credit))

    def build() -> LearnedPlanner:
        planner, _ = train_best_planner(stack, credit, seed, budget)
        planner.save(path)
        return planner

    return load_or_build(stack.folder / ".planner.lock", lambda: LearnedPlanner.load(path) if path.exists() else None,
                         build)


def train_best_planner(stack: Stack, credit: str = "ggpo", seed: int = 0, budget: int = DEFAULT_BUDGET,
                       log=None, episodes: int | None = None) -> tuple[LearnedPlanner, list[list[dict]]]:
    """``PLANNER_RESTARTS`` runs of the default TrainConfig (seeds ``seed + RESTART_SEED_STRIDE * k``) on the
    planner's half of the train runs; the one with the highest final dev accuracy is kept (ties: the earlier run).
    The test split is never looked at. Returns the kept planner and every run's dev curve; ``log(k, point)``
    sees each curve point of run ``k``; ``episodes`` shortens each run (smoke tests; default: TrainConfig's)."""
    agent = VimragAgent(stack.tools, stack.reader, None, mode="graph", budget=budget, read_floor=0)
    corpus = stack.kb.corpus
    train, dev = fitting_half(corpus.split("train"), "planner"), corpus.split("dev")
    best: tuple[float, LearnedPlanner] | None = None
    curves = []
    for k in range(PLANNER_RESTARTS):
        cfg = TrainConfig(credit=credit, seed=int(seed) + RESTART_SEED_STRIDE * k)
        if episodes is not None:
            cfg = dataclasses.replace(cfg, episodes=int(episodes), eval_every=min(cfg.eval_every, int(episodes)))
        planner, curve = train_planner(agent, train, dev, cfg,
                                       log=None if log is None else functools.partial(log, k))
        curves.append(curve)
        if best is None or curve[-1]["dev_accuracy"] > best[0]:
            best = (curve[-1]["dev_accuracy"], planner)
    assert best is not None
    return best[1], curves


@functools.lru_cache(maxsize=2)
def _local_vlm(path: str, max_new_tokens: int):
    # One load per process: the harness rebuilds the policy for every (task, policy) cell.
    from perception.vimrag.external_vlm import LocalVLM

    return LocalVLM(path, max_new_tokens)


def reader_backend(opts: VimragOptions):
    """The external VLM ``opts.reader`` names (None for the trained reader): the endpoint is contacted, or the
    local model loaded, here, so an unreachable endpoint or a bad folder is a ConfigError before any question runs
    (call it before building the stack: that is the slow part)."""
    if opts.reader == "trained":
        return None
    if opts.reader == "openai":
        from perception.vimrag.external_vlm import connect_openai

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
