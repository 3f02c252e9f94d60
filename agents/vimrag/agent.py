"""The VimRAG agent as a LangGraph ``StateGraph``: think -> retrieve | read | answer, reflect, with a DAG memory.

    START -> think --(search_*/follow_links/similar_images)--> retrieve --> reflect --> think ...
                   --(read)--> read --> reflect
                   --(answer)--> answer --> END            reflect --(step limit)--> answer

The state carries the :class:`~agents.vimrag.memory.DagMemory`; every node function is a plain function of the
state, so training rollouts (:meth:`VimragAgent.rollout`) call the very same functions in the order the graph's
router gives, without LangGraph's per-step overhead. ``build_graph(checkpointer=SqliteSaver(...))`` makes a run
resumable: an interrupted thread continues from its last completed node.

Memory modes differ only in how the visual-token budget is spent when reading:
``graph`` (VimRAG: significance from the DAG, holding part of the budget back while open leads and the step
limit still allow further reads), ``uniform`` (evenly over every image node), ``linear`` (arrival order, full
grids until the budget is gone) and ``oracle`` (the gold evidence is put in memory). Every mode answers with the
best-supported hypothesis (:meth:`~agents.vimrag.memory.DagMemory.best_hypothesis`): a later read that found the
budget spent and saw no image cannot override a reading that saw evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import numpy as np

from agents.vimrag.allocator import (
    FULL_GRID,
    allocate_graph,
    allocate_linear,
    allocate_uniform,
    further_read_reserve,
    graph_significance,
)
from agents.vimrag.memory import DagMemory
from agents.vimrag.planner import ACTIONS, RETRIEVE_ACTIONS, unexpanded_text
from envs.errors import ConfigError, choice_error
from envs.rag.corpus import Question
from policies.vimrag.knowledge_base import id_tokens
from policies.vimrag.reader import VisualReader
from policies.vimrag.tools import RetrievalTools

MODES = ("graph", "uniform", "linear", "oracle")
# The graph's control flow, written once: node -> the next node, or (router method, the nodes it may choose).
# build_graph hands it to LangGraph and rollout follows it, so the two cannot disagree.
FIRST, DONE = "think", "END"
EDGES: dict[str, str | tuple[str, tuple[str, ...]]] = {
    "think": ("after_think", ("retrieve", "read", "answer")),
    "retrieve": "reflect",
    "read": "reflect",
    "reflect": ("after_reflect", ("think", "answer")),
    "answer": DONE,
}
RELY_THRESHOLD = 0.2  # a reading relies on an image (hypothesis edge) when the reader weights it at least this much
TOP_K = 3


class AgentState(TypedDict, total=False):
    """LangGraph state of one question."""

    qid: str
    question: str
    memory: DagMemory
    expanded: list[int]  # text nodes whose links were followed
    step: int
    action: str
    history: list[str]
    answer: str
    confidence: float
    visual_tokens: int
    text_tokens: int


@dataclass
class StepRecord:
    """What a training rollout remembers of one planner decision."""

    step: int
    action: str
    features: Any = None


@dataclass
class VimragAgent:
    """Tools + reader + planner + memory mode + budget; node functions for the graph and for fast rollouts."""

    tools: RetrievalTools
    reader: VisualReader
    planner: Any
    mode: Literal["graph", "uniform", "linear", "oracle"] = "graph"
    budget: int = 64
    max_steps: int = 8
    gold: dict[str, Question] = field(default_factory=dict)  # oracle mode only
    rng: np.random.Generator | None = None  # sampling planner (training); None = greedy
    on_decision: Any = None  # training hook: called with (state, action) before each action
    reserve: bool = True  # graph mode: hold tokens back for further reads (allocator.further_read_reserve)
    # Tokens a read keeps however much it reserves: the agent answers with one full grid, so that a small budget is
    # not split into reads too coarse to see anything. Planners are trained with 0 (trained with the floor, more
    # runs ended on low plateaus: docs/results/vimrag.md).
    read_floor: int = FULL_GRID

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise choice_error("vimrag memory mode", self.mode, MODES)
        if int(self.budget) != self.budget or self.budget <= 0:
            raise ConfigError(f"visual token budget must be a positive integer, got {self.budget!r}")

    # ------------------------------------------------------------------ helpers
    def _q_emb(self, state: AgentState) -> np.ndarray:
        kb = self.tools.kb
        emb = kb.question_emb.get(state["qid"])
        if emb is None:
            raise ConfigError(f"unknown question id {state['qid']!r}")
        return emb

    def _think_id(self, memory: DagMemory) -> int:
        node = memory.latest("think")
        return node.node_id if node is not None else 0

    def _add_items(self, memory: DagMemory, hits: list[tuple[str, float]], parents: list[int],
                   step: int) -> DagMemory:
        kb = self.tools.kb
        for item_id, score in hits:
            if memory.find(item_id) is not None:
                continue  # re-retrieved: already in memory
            kind = "text" if item_id in kb.corpus.doc_by_id else "image"
            memory, _ = memory.add(kind, item_id, step, parents, score)
        return memory

    def _context(self, state: AgentState) -> set[str]:
        ids = id_tokens(state["question"])
        for n in state["memory"].of_kind("text"):
            ids |= self.tools.mentions(n.ref)
        return ids

    def _documents(self, memory: DagMemory) -> list[str]:
        """Texts of the documents in memory (an external VLM reads them; the trained reader uses their ids only)."""
        docs = self.tools.kb.corpus.doc_by_id
        return [docs[n.ref].text for n in memory.of_kind("text") if n.ref in docs]

    # ------------------------------------------------------------------ graph nodes
    def start(self, qid: str, question: str) -> AgentState:
        """The initial state of a question."""
        return {"qid": qid, "question": question, "memory": DagMemory.start(question), "expanded": [], "step": 0,
                "action": "", "history": [], "answer": "", "confidence": 0.0, "visual_tokens": 0,
                "text_tokens": self.tools.kb.question_tokens.get(qid, 0)}

    def think(self, state: AgentState) -> dict:
        """Choose the next action (the planner) and record the step as a think node."""
        memory, step = state["memory"], state["step"]
        if self.mode == "oracle":
            action = "oracle_retrieve" if step == 0 else ("read" if step == 1 else "answer")
        elif step >= self.max_steps - 1:
            action = "answer"
        else:
            action = self.planner.choose(self._q_emb(state), state["question"], memory, state["expanded"], step,
                                         self.max_steps, state["history"], self.rng)
            if action not in ACTIONS:
                raise ConfigError(f"planner chose unknown action {action!r}; valid: {', '.join(ACTIONS)}")
            if self.on_decision is not None:
                self.on_decision(state, action)
        memory, _ = memory.add("think", action, step, [self._think_id(memory)])
        return {"memory": memory, "action": action, "history": [*state["history"], action]}

    def retrieve(self, state: AgentState) -> dict:
        """Run a retrieval tool and attach its results to the step (and to the document they were linked from)."""
        tools, memory, step, action = self.tools, state["memory"], state["step"], state["action"]
        think = self._think_id(memory)
        expanded = list(state["expanded"])
        present = {n.ref for n in memory.nodes}
        if action == "search_text":
            hits = tools.search_text(self._q_emb(state), state["question"], TOP_K, present)
            memory = self._add_items(memory, [(h.item_id, h.score) for h in hits], [think], step)
        elif action == "search_images":
            hits = tools.search_images(self._q_emb(state), state["question"], TOP_K, present)
            memory = self._add_items(memory, [(h.item_id, h.score) for h in hits], [think], step)
        elif action == "follow_links":
            todo = unexpanded_text(memory, expanded)
            if todo:
                doc = memory.nodes[todo[0]]
                expanded.append(doc.node_id)
                memory = self._add_items(memory, [(i, doc.score) for i in tools.open(doc.ref)],
                                         [doc.node_id, think], step)
        elif action == "similar_images":
            last = memory.latest("image")
            if last is not None:
                hits = tools.similar_images(last.ref, TOP_K, present)
                memory = self._add_items(memory, [(h.item_id, h.score) for h in hits], [last.node_id, think], step)
        elif action == "oracle_retrieve":
            q = self.gold.get(state["qid"])
            if q is None:
                raise ConfigError(f"oracle_evidence has no gold evidence for question {state['qid']!r}")
            for item_id in q.gold:  # gold ids come in chain order: each is linked from the one before
                prev = memory.find(q.gold[q.gold.index(item_id) - 1]) if q.gold.index(item_id) else None
                parents = [think] if prev is None else [prev, think]
                memory = self._add_items(memory, [(item_id, 1.0)], parents, step)
        return {"memory": memory, "expanded": expanded}

    def read(self, state: AgentState) -> dict:
        """Allocate the remaining visual-token budget over image nodes, read, and add a hypothesis node."""
        memory, step = state["memory"], state["step"]
        images = [n.ref for n in memory.of_kind("image")]
        q_emb, context = self._q_emb(state), self._context(state)
        remaining = self.budget - state["visual_tokens"]
        think = self._think_id(memory)
        relevance = self.reader.relevance(q_emb, context, images)
        relied_ids = [i for i, w in relevance.items() if w >= RELY_THRESHOLD]
        relied = [memory.find(i, "image") for i in relied_ids]
        if remaining <= 0 or not images:
            levels = {i: 0 for i in images}
        elif self.mode in ("graph", "oracle"):
            # Hypothesis edges first (which images the reading will rest on), then significance from the graph.
            pending, _ = memory.add("hypothesis", "?", step, [think, *relied])
            spend = remaining
            if self.reserve and self.mode == "graph":
                # Steps left after this one, minus the forced answer, make room for (retrieve, read) pairs.
                reads_left = (self.max_steps - 2 - step) // 2
                spend -= further_read_reserve(pending, unexpanded_text(memory, state["expanded"]), reads_left,
                                              remaining, keep=self.read_floor)
            levels = (allocate_graph(graph_significance(pending), spend) if spend > 0
                      else {i: 0 for i in images})
        elif self.mode == "uniform":
            levels = allocate_uniform(images, remaining)
        else:
            levels = allocate_linear(images, remaining)
        reading = self.reader.read(q_emb, context, [(i, levels[i]) for i in images], question=state["question"],
                                   documents=self._documents(memory))
        # The reading rests on the relied-on images it actually saw (an external reader may leave out an image whose
        # cost exceeds its grant: only those in reading.relevance were read); one that saw none is a guess.
        seen = [n for n, i in zip(relied, relied_ids, strict=True) if levels[i] > 0 and i in reading.relevance]
        memory, _ = memory.add("hypothesis", reading.answer, step, [think, *seen], reading.confidence)
        captions = sum(self.tools.kb.text_tokens(i) for i in images if levels[i] > 0)
        texts = sum(self.tools.kb.text_tokens(n.ref) for n in memory.of_kind("text"))
        return {"memory": memory, "answer": reading.answer, "confidence": reading.confidence,
                "visual_tokens": state["visual_tokens"] + reading.visual_tokens,
                "text_tokens": state["text_tokens"] + captions + texts}

    def reflect(self, state: AgentState) -> dict:
        """Close the step (the router then decides between thinking again and answering at the step limit)."""
        return {"step": state["step"] + 1}

    def answer(self, state: AgentState) -> dict:
        """Answer with the best-supported hypothesis (a question-only guess when nothing was read)."""
        memory, step = state["memory"], state["step"]
        hyp = memory.best_hypothesis()
        if hyp is None:
            guess = self.reader.read(self._q_emb(state), self._context(state), [], question=state["question"],
                                     documents=self._documents(memory))
            answer, conf = guess.answer, guess.confidence
            parent = self._think_id(memory)
        else:
            answer, conf, parent = hyp.ref, hyp.score, hyp.node_id
        memory, _ = memory.add("answer", answer, step, [parent], conf)
        return {"memory": memory, "answer": answer, "confidence": conf}

    # ------------------------------------------------------------------ routing
    @staticmethod
    def after_think(state: AgentState) -> str:
        """Conditional edge out of think."""
        action = state["action"]
        if action in RETRIEVE_ACTIONS or action == "oracle_retrieve":
            return "retrieve"
        return "read" if action == "read" else "answer"

    def after_reflect(self, state: AgentState) -> str:
        """Conditional edge out of reflect: think again, or answer at the step limit."""
        return "answer" if state["step"] >= self.max_steps else "think"

    # ------------------------------------------------------------------ running
    def build_graph(self, checkpointer=None, interrupt_before: list[str] | None = None):
        """The compiled LangGraph ``StateGraph`` (pass a checkpointer, e.g. ``SqliteSaver``, to make runs resumable;
        ``interrupt_before`` stops a run before those nodes, as a killed process would)."""
        from langgraph.graph import END, START, StateGraph

        g = StateGraph(AgentState)
        for name in EDGES:
            g.add_node(name, getattr(self, name))
        g.add_edge(START, FIRST)
        for name, edge in EDGES.items():
            if isinstance(edge, tuple):
                router, choices = edge
                g.add_conditional_edges(name, getattr(self, router), list(choices))
            else:
                g.add_edge(name, END if edge == DONE else edge)
        return g.compile(checkpointer=checkpointer, interrupt_before=interrupt_before)

    def rollout(self, qid: str, question: str) -> AgentState:
        """Run one question by calling the node functions along :data:`EDGES` (same result as the compiled graph)."""
        state = self.start(qid, question)
        node = FIRST
        while node != DONE:
            state = {**state, **getattr(self, node)(state)}
            edge = EDGES[node]
            node = getattr(self, edge[0])(state) if isinstance(edge, tuple) else edge
        return state
