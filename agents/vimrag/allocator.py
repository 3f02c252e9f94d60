"""Visual-token budgets: how many tokens (a ``g x g`` grid, g in 0/1/2/4/7) each image node keeps under one total.

* :func:`graph_significance` scores image nodes from their place in the DAG memory: on the support path of the
  current hypothesis, how many documents lead to them, whether anything was derived from them.
* :func:`allocate_graph` (VimRAG) maximises ``sum significance * utility(level)`` under the budget exactly
  (a knapsack over the five levels, solved by dynamic programming): pivotal evidence at high resolution, minor
  clues compressed, trivial nodes dropped.
* :func:`allocate_uniform` spreads the budget evenly over every image node; :func:`allocate_linear` is what a
  linear history does: images take the full grid in arrival order until the budget runs out.

All three return ``{image id: g}`` with ``sum(g*g) <= budget``.
"""

from __future__ import annotations

import numpy as np

from agents.vimrag.memory import DagMemory
from envs.errors import ConfigError
from perception.vimrag.visual_tokens import GRID_LEVELS

# Diminishing returns of resolution (what fraction of an image's information a grid keeps); concave on purpose.
UTILITY: dict[int, float] = {0: 0.0, 1: 0.2, 2: 0.45, 4: 0.75, 7: 1.0}
ON_SUPPORT, PER_DOCUMENT, HAS_DESCENDANT = 2.0, 0.5, 0.25
FULL_GRID = max(GRID_LEVELS) ** 2  # tokens of one image at full resolution (7 x 7)


def _check_budget(budget: int) -> int:
    if int(budget) != budget or budget <= 0:
        raise ConfigError(f"visual token budget must be a positive integer, got {budget!r}")
    return int(budget)


def graph_significance(memory: DagMemory) -> dict[str, float]:
    """Significance of every image node (by corpus id) from the DAG topology.

    ``ON_SUPPORT`` if it is a parent of the latest hypothesis node, ``PER_DOCUMENT`` per document on paths into it
    (at most two), ``HAS_DESCENDANT`` if later evidence was derived from it. Images reached only by a raw search
    and supporting nothing score 0 and are dropped.
    """
    hyp = memory.latest("hypothesis")
    support = set(hyp.parents) if hyp is not None else set()
    kids = memory.children()
    out: dict[str, float] = {}
    for node in memory.of_kind("image"):
        s = ON_SUPPORT * (node.node_id in support)
        s += PER_DOCUMENT * min(2, memory.text_ancestors(node.node_id))
        s += HAS_DESCENDANT * any(memory.nodes[c].kind != "think" for c in kids[node.node_id])
        out[node.ref] = float(s)
    return out


def further_read_reserve(memory: DagMemory, open_leads: list[int], reads_left: int, budget: int,
                         keep: int = 0) -> int:
    """Tokens a read should hold back for evidence that later reads are expected to bring (0 when none can).

    Each further read the step limit still allows (``reads_left``) is expected to follow one open lead (a document
    whose links were not followed yet, ``open_leads``) to an image that will be as significant as a linked image on
    the support path: ``ON_SUPPORT + PER_DOCUMENT * min(2, documents on the lead's path + 1)``. The current read
    gets the share of ``budget`` that the significance already in memory has of the expected total, the rest is
    reserved. Without such a reserve the value-maximising allocation spends everything on the first read and the
    read that sees the pivotal evidence finds nothing left. The reserve never leaves the current read less than
    ``keep`` tokens: the agent answers with ``keep = FULL_GRID`` (one full-resolution grid), because under a small
    budget splitting it across reads leaves every read too coarse to see anything.
    """
    budget = _check_budget(budget)
    if reads_left <= 0 or not open_leads:
        return 0
    future = sorted((ON_SUPPORT + PER_DOCUMENT * min(2, memory.text_ancestors(i) + 1) for i in open_leads),
                    reverse=True)[:reads_left]
    now = sum(graph_significance(memory).values())
    return min(int(budget * sum(future) / (now + sum(future))), max(0, budget - keep))


def allocate_graph(significance: dict[str, float], budget: int) -> dict[str, int]:
    """Levels maximising ``sum(sig * UTILITY[g])`` subject to ``sum(g*g) <= budget`` (exact DP; ties: fewer tokens)."""
    budget = _check_budget(budget)
    ids = list(significance)
    levels = [g for g in GRID_LEVELS]
    neg = -1e18
    best = np.full(budget + 1, neg)
    best[0] = 0.0
    choice = np.zeros((len(ids), budget + 1), np.int64)
    for i, image_id in enumerate(ids):
        sig = max(0.0, float(significance[image_id]))
        new = np.full(budget + 1, neg)
        arg = np.zeros(budget + 1, np.int64)
        for li, g in enumerate(levels):
            cost = g * g
            if cost > budget or (g > 0 and sig <= 0):
                continue
            cand = np.full(budget + 1, neg)
            cand[cost:] = best[:budget + 1 - cost] + sig * UTILITY[g]
            better = cand > new + 1e-12
            new = np.where(better, cand, new)
            arg = np.where(better, li, arg)
        best, choice[i] = new, arg
    # Highest value; among equal values the smallest spend.
    top = best.max()
    b = int(np.flatnonzero(best >= top - 1e-9)[0])
    out: dict[str, int] = {}
    for i in range(len(ids) - 1, -1, -1):
        g = levels[int(choice[i, b])]
        out[ids[i]] = g
        b -= g * g
    return {i: out[i] for i in ids}


def allocate_uniform(image_ids: list[str], budget: int) -> dict[str, int]:
    """Every image the largest grid with ``g*g <= budget / n``."""
    budget = _check_budget(budget)
    if not image_ids:
        return {}
    share = budget / len(image_ids)
    g = max(x for x in GRID_LEVELS if x * x <= share)
    return {i: g for i in image_ids}


def allocate_linear(image_ids: list[str], budget: int) -> dict[str, int]:
    """Arrival order: each image the largest grid that still fits the remaining budget (full 7x7 while it lasts)."""
    remaining = _check_budget(budget)
    out = {}
    for i in image_ids:
        g = max(x for x in GRID_LEVELS if x * x <= remaining)
        out[i] = g
        remaining -= g * g
    return out
