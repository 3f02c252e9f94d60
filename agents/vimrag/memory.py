"""The DAG memory: agent states and retrieved evidence as nodes, each linked to the step(s) it came from.

Node kinds: ``question`` (the root), ``think`` (one per agent step; parent = the previous step), ``text`` and
``image`` (evidence; parents = the step that retrieved it and, when it was reached by following a link, the
document it came from), ``hypothesis`` (a reading; parents = its step and the images it relied on) and ``answer``.
Parents always exist and have smaller ids, so the graph is acyclic by construction; :meth:`DagMemory.check`
verifies it anyway. The structure is immutable (every change returns a new memory), which is what a LangGraph
state channel and its checkpointer want.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

NodeKind = Literal["question", "think", "text", "image", "hypothesis", "answer"]
EVIDENCE_KINDS = ("text", "image", "hypothesis")


@dataclass(frozen=True)
class MemoryNode:
    """One node: its kind, the corpus item (or action/answer) it stands for, the step that made it, its parents."""

    node_id: int
    kind: NodeKind
    ref: str
    step: int
    parents: tuple[int, ...]
    score: float = 0.0  # retrieval score, or a hypothesis' confidence


@dataclass(frozen=True)
class DagMemory:
    """An append-only DAG of :class:`MemoryNode` (ids are 0..n-1 in creation order)."""

    nodes: tuple[MemoryNode, ...] = field(default_factory=tuple)

    # ------------------------------------------------------------------ building
    @classmethod
    def start(cls, question: str) -> DagMemory:
        """A memory holding only the question root."""
        return cls((MemoryNode(0, "question", question, 0, ()),))

    def add(self, kind: NodeKind, ref: str, step: int, parents: tuple[int, ...] | list[int],
            score: float = 0.0) -> tuple[DagMemory, int]:
        """Append a node; parents must exist. Returns (new memory, new id)."""
        parents = tuple(dict.fromkeys(int(p) for p in parents))
        n = len(self.nodes)
        for p in parents:
            if not 0 <= p < n:
                raise ValueError(f"parent {p} does not exist (memory has {n} nodes)")
        if kind != "question" and not parents:
            raise ValueError(f"a {kind} node needs at least one parent")
        node = MemoryNode(n, kind, ref, int(step), parents, float(score))
        return replace(self, nodes=(*self.nodes, node)), n

    # ------------------------------------------------------------------ queries
    def find(self, ref: str, kind: NodeKind | None = None) -> int | None:
        """The id of the node standing for ``ref`` (first one), or None."""
        for node in self.nodes:
            if node.ref == ref and (kind is None or node.kind == kind):
                return node.node_id
        return None

    def of_kind(self, kind: NodeKind) -> list[MemoryNode]:
        """All nodes of one kind, in creation order."""
        return [n for n in self.nodes if n.kind == kind]

    def children(self) -> dict[int, list[int]]:
        """Child lists of every node."""
        out: dict[int, list[int]] = {n.node_id: [] for n in self.nodes}
        for n in self.nodes:
            for p in n.parents:
                out[p].append(n.node_id)
        return out

    def ancestors(self, node_id: int) -> set[int]:
        """Every node with a path to ``node_id`` (not including it)."""
        seen: set[int] = set()
        stack = list(self.nodes[node_id].parents)
        while stack:
            p = stack.pop()
            if p not in seen:
                seen.add(p)
                stack.extend(self.nodes[p].parents)
        return seen

    def descendants(self, node_id: int) -> set[int]:
        """Every node reachable from ``node_id`` (not including it)."""
        kids = self.children()
        seen: set[int] = set()
        stack = list(kids[node_id])
        while stack:
            c = stack.pop()
            if c not in seen:
                seen.add(c)
                stack.extend(kids[c])
        return seen

    def check(self) -> None:
        """Raise ValueError unless ids are 0..n-1, parents exist, and the graph is acyclic (Kahn's algorithm)."""
        ids = [n.node_id for n in self.nodes]
        if ids != list(range(len(ids))):
            raise ValueError(f"node ids must be 0..n-1 in order, got {ids}")
        indeg = {n.node_id: 0 for n in self.nodes}
        for n in self.nodes:
            for p in n.parents:
                if p not in indeg:
                    raise ValueError(f"node {n.node_id} has a missing parent {p}")
                indeg[n.node_id] += 1
        kids = self.children()
        queue = [i for i, d in indeg.items() if d == 0]
        seen = 0
        while queue:
            i = queue.pop()
            seen += 1
            for c in kids[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    queue.append(c)
        if seen != len(self.nodes):
            raise ValueError("the memory graph has a cycle")

    # ------------------------------------------------------------------ pruning
    def prune_to(self, keep: set[int] | list[int]) -> tuple[DagMemory, dict[int, int]]:
        """Keep ``keep`` and all their ancestors (so every kept node stays reachable from the root); renumber.

        Returns (pruned memory, old id -> new id).
        """
        closure: set[int] = set()
        for k in keep:
            closure.add(int(k))
            closure |= self.ancestors(int(k))
        mapping = {old: new for new, old in enumerate(sorted(closure))}
        nodes = tuple(replace(n, node_id=mapping[n.node_id], parents=tuple(mapping[p] for p in n.parents))
                      for n in self.nodes if n.node_id in closure)
        return DagMemory(nodes), mapping

    def supporting_steps(self, node_id: int) -> set[int]:
        """Steps whose evidence (text, image, hypothesis) lies on a path to ``node_id``, plus its own step."""
        keep = self.ancestors(node_id) | {node_id}
        return {self.nodes[i].step for i in keep if self.nodes[i].kind in EVIDENCE_KINDS} | {self.nodes[node_id].step}

    # ------------------------------------------------------------------ topology features
    def text_ancestors(self, node_id: int) -> int:
        """How many documents lie on paths into this node (how much evidence chain supports it)."""
        return sum(1 for a in self.ancestors(node_id) if self.nodes[a].kind == "text")

    def best_hypothesis(self) -> MemoryNode | None:
        """The reading an answer should rest on: the best-supported hypothesis so far, or None.

        A hypothesis is supported when it rests on at least one image it actually saw (an image parent). A later
        reading that saw nothing (e.g. its read found the visual-token budget spent) is a question-only guess and
        must not override an earlier reading that saw evidence; among supported readings the most confident wins
        (the later one on ties). Without any supported reading, the latest hypothesis.
        """
        hyps = self.of_kind("hypothesis")
        supported = [h for h in hyps if any(self.nodes[p].kind == "image" for p in h.parents)]
        if not supported:
            return hyps[-1] if hyps else None
        return max(reversed(supported), key=lambda h: h.score)

    def latest(self, kind: NodeKind) -> MemoryNode | None:
        """The most recent node of a kind."""
        for n in reversed(self.nodes):
            if n.kind == kind:
                return n
        return None
