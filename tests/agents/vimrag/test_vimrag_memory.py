"""DAG memory invariants, the token allocators and GGPO step credit on hand-made graphs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from agents.vimrag.allocator import (
    UTILITY,
    allocate_graph,
    allocate_linear,
    allocate_uniform,
    graph_significance,
)
from agents.vimrag.ggpo import step_advantages, step_validity
from agents.vimrag.memory import DagMemory, MemoryNode
from envs.errors import ConfigError


def random_memory(rng: np.random.Generator, n: int = 30) -> DagMemory:
    mem = DagMemory.start("q")
    kinds = ["think", "text", "image", "hypothesis"]
    for i in range(n):
        k = len(mem.nodes)
        parents = rng.choice(k, size=min(k, int(rng.integers(1, 4))), replace=False)
        mem, _ = mem.add(kinds[int(rng.integers(4))], f"item{i}", i, [int(p) for p in parents])
    return mem


def test_memory_is_acyclic_with_existing_parents() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        mem = random_memory(rng)
        mem.check()
        for node in mem.nodes:
            assert all(p < node.node_id for p in node.parents)
            assert node.node_id == 0 or node.parents


def test_add_rejects_missing_parent_and_orphans() -> None:
    mem = DagMemory.start("q")
    with pytest.raises(ValueError, match="parent 3 does not exist"):
        mem.add("text", "doc", 0, [3])
    with pytest.raises(ValueError, match="needs at least one parent"):
        mem.add("image", "img", 0, [])


def test_check_detects_a_cycle_and_a_missing_parent() -> None:
    cyc = DagMemory((MemoryNode(0, "question", "q", 0, ()), MemoryNode(1, "think", "a", 0, (2,)),
                     MemoryNode(2, "text", "b", 0, (1,))))
    with pytest.raises(ValueError, match="cycle"):
        cyc.check()
    missing = DagMemory((MemoryNode(0, "question", "q", 0, ()), MemoryNode(1, "think", "a", 0, (7,))))
    with pytest.raises(ValueError, match="missing parent 7"):
        missing.check()


def test_pruning_keeps_reachability_of_kept_nodes() -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        mem = random_memory(rng)
        keep = {int(k) for k in rng.choice(len(mem.nodes), size=3, replace=False)}
        pruned, mapping = mem.prune_to(keep)
        pruned.check()
        assert set(mapping) == keep | set().union(*(mem.ancestors(k) for k in keep))
        assert 0 in mapping  # the root is an ancestor of everything
        for k in keep:  # every kept node is still reachable from the root inside the pruned graph
            assert mapping[k] == 0 or 0 in pruned.ancestors(mapping[k])
            assert pruned.nodes[mapping[k]].ref == mem.nodes[k].ref
        assert len(pruned.nodes) < len(mem.nodes) or set(mapping) == set(range(len(mem.nodes)))


@pytest.mark.parametrize("budget", [1, 3, 4, 5, 16, 20, 49, 53, 64, 100, 128, 256])
def test_allocators_never_exceed_the_budget(budget: int) -> None:
    rng = np.random.default_rng(budget)
    ids = [f"img{i}" for i in range(7)]
    sig = {i: float(rng.choice([0.0, 0.5, 1.0, 2.5])) for i in ids}
    for levels in (allocate_graph(sig, budget), allocate_uniform(ids, budget), allocate_linear(ids, budget)):
        assert sum(g * g for g in levels.values()) <= budget
        assert set(levels) == set(ids)


def test_graph_allocation_is_optimal_and_drops_insignificant_nodes() -> None:
    rng = np.random.default_rng(3)
    levels = (0, 1, 2, 4, 7)
    for _ in range(15):
        sig = {f"i{k}": float(rng.choice([0.0, 0.25, 1.0, 3.0])) for k in range(4)}
        budget = int(rng.integers(1, 120))
        got = allocate_graph(sig, budget)
        value = sum(sig[i] * UTILITY[g] for i, g in got.items())
        best = max(sum(sig[i] * UTILITY[g] for i, g in zip(sig, combo, strict=True))
                   for combo in itertools.product(levels, repeat=4)
                   if sum(g * g for g in combo) <= budget)
        assert value == pytest.approx(best)
        assert all(got[i] == 0 for i in sig if sig[i] == 0)


def test_allocation_policies_differ_as_documented() -> None:
    ids = ["a", "b", "c"]
    assert allocate_linear(ids, 64) == {"a": 7, "b": 2, "c": 2}  # 49 + 4 + 4 (a 4x4 no longer fits after 49)
    assert allocate_uniform(ids, 64) == {"a": 4, "b": 4, "c": 4}  # 64/3 = 21 -> 16 each
    assert allocate_graph({"a": 0.0, "b": 0.5, "c": 2.5}, 64) == {"a": 0, "b": 2, "c": 7}


@pytest.mark.parametrize("bad", [0, -4, 2.5])
def test_budget_must_be_positive_integer(bad) -> None:
    with pytest.raises(ConfigError, match="positive integer"):
        allocate_uniform(["a"], bad)
    with pytest.raises(ConfigError, match="positive integer"):
        allocate_graph({"a": 1.0}, bad)


def hand_made_trajectory() -> DagMemory:
    """Step 0 image search (distractors), 1 text search, 2 follow the log, 3 read, 4 answer."""
    m = DagMemory.start("What colour ...?")
    m, t0 = m.add("think", "search_images", 0, [0])
    m, _ = m.add("image", "calib:C-001", 0, [t0])
    m, _ = m.add("image", "stock:P-002", 0, [t0])
    m, t1 = m.add("think", "search_text", 1, [t0])
    m, log = m.add("text", "log:R-001", 1, [t1])
    m, _ = m.add("text", "log:R-777", 1, [t1])
    m, t2 = m.add("think", "follow_links", 2, [t1])
    m, kf0 = m.add("image", "kf:R-001:0", 2, [log, t2])
    m, kf1 = m.add("image", "kf:R-001:1", 2, [log, t2])
    m, t3 = m.add("think", "read", 3, [t2])
    m, hyp = m.add("hypothesis", "red", 3, [t3, kf1])
    m, t4 = m.add("think", "answer", 4, [t3])
    m, _ = m.add("answer", "red", 4, [hyp])
    return m


def test_ggpo_credit_on_a_hand_made_trajectory() -> None:
    mem = hand_made_trajectory()
    mem.check()
    validity = step_validity(mem)
    assert validity == {0: False, 1: True, 2: True, 3: True, 4: True}  # the image search was redundant
    pruned, _ = mem.prune_to([mem.latest("answer").node_id])
    assert {n.ref for n in pruned.nodes if n.kind == "image"} == {"kf:R-001:1"}
    # Group of two rollouts: this one correct (R=1), another wrong (R=0); both decided steps 0..3.
    steps = [[0, 1, 2, 3], [0, 1, 2, 3]]
    other = {0: True, 1: True, 2: True, 3: True}
    ggpo = step_advantages([1.0, 0.0], [validity, other], steps, "ggpo")
    traj = step_advantages([1.0, 0.0], [validity, other], steps, "trajectory")
    np.testing.assert_allclose(traj[0], [1.0, 1.0, 1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(ggpo[0], [0.0, 1.0, 1.0, 1.0], atol=1e-5)  # the redundant step is not rewarded
    np.testing.assert_allclose(ggpo[1], [-1.0] * 4, atol=1e-5)
    np.testing.assert_allclose(traj[1], [-1.0] * 4, atol=1e-5)


def test_graph_significance_follows_the_topology() -> None:
    sig = graph_significance(hand_made_trajectory())
    assert sig["calib:C-001"] == 0.0 and sig["stock:P-002"] == 0.0  # raw search, supports nothing
    assert sig["kf:R-001:1"] > sig["kf:R-001:0"] > 0.0  # on the hypothesis' support path vs only linked


def two_reads_memory() -> DagMemory:
    """Read the end keyframe (supported, 0.6), then read again with the budget spent: a question-only guess."""
    m = hand_made_trajectory()  # ends with hypothesis "red" (conf 0) on kf:R-001:1, then an answer node
    m = DagMemory(m.nodes[:-2])  # drop the answer step
    hyp = m.latest("hypothesis").node_id
    m = DagMemory(tuple(n if n.node_id != hyp else MemoryNode(n.node_id, n.kind, n.ref, n.step, n.parents, 0.6)
                        for n in m.nodes))
    m, t4 = m.add("think", "read", 4, [m.latest("think").node_id])
    m, _ = m.add("hypothesis", "blue", 4, [t4], 0.9)  # saw no image: confident prior, no evidence
    return m


def test_a_later_reading_that_saw_nothing_does_not_override_the_answer() -> None:
    from agents.vimrag.agent import VimragAgent

    m = two_reads_memory()
    assert m.best_hypothesis().ref == "red"
    agent = VimragAgent(None, None, None, mode="graph", budget=16)  # answer() needs no tools or reader
    out = agent.answer({"memory": m, "step": 5, "qid": "q", "question": "q"})
    assert out["answer"] == "red"
    answer = out["memory"].latest("answer")
    assert out["memory"].nodes[answer.parents[0]].ref == "red"
    # Among readings that saw evidence the more confident one wins; none supported -> the latest.
    m2, t5 = m.add("think", "read", 5, [m.latest("think").node_id])
    m2, _ = m2.add("hypothesis", "green", 5, [t5, m.find("kf:R-001:0")], 0.8)
    assert m2.best_hypothesis().ref == "green"
    bare = DagMemory.start("q")
    bare, t = bare.add("think", "read", 0, [0])
    bare, _ = bare.add("hypothesis", "a", 0, [t], 0.9)
    bare, _ = bare.add("hypothesis", "b", 1, [t], 0.1)
    assert bare.best_hypothesis().ref == "b"


def test_graph_allocator_reserves_tokens_for_expected_further_reads() -> None:
    from agents.vimrag.allocator import FULL_GRID, further_read_reserve

    m = DagMemory.start("q")
    m, t0 = m.add("think", "search_text", 0, [0])
    m, log = m.add("text", "log:R-001", 0, [t0], 0.9)
    m, other = m.add("text", "log:R-002", 0, [t0], 0.5)
    m, t1 = m.add("think", "follow_links", 1, [t0])
    m, kf = m.add("image", "kf:R-001:1", 1, [log, t1])
    m, t2 = m.add("think", "read", 2, [t1])
    m, _ = m.add("hypothesis", "?", 2, [t2, kf])
    # One open lead, a further read possible: part of the budget is held back, never all of it.
    r = further_read_reserve(m, [other], reads_left=1, budget=128)
    assert 0 < r < 128
    # The lead would bring an image on the support path behind one document: 2 + 0.5 = 2.5; the keyframe in
    # memory has 2 (support) + 0.5 (one document) + 0.25 (the hypothesis derives from it) = 2.75.
    assert r == int(128 * 2.5 / (2.5 + 2.75))
    # Keeping one full 7 x 7 grid for the current read (how the agent answers): 64 - 49 = 15 of the proportional
    # 30 may be held back, and under 49 tokens nothing is.
    assert further_read_reserve(m, [other], reads_left=1, budget=64) == int(64 * 2.5 / 5.25) == 30
    assert further_read_reserve(m, [other], reads_left=1, budget=64, keep=FULL_GRID) == 64 - FULL_GRID == 15
    assert further_read_reserve(m, [other], reads_left=1, budget=32, keep=FULL_GRID) == 0
    assert further_read_reserve(m, [other], reads_left=0, budget=128) == 0  # the step limit allows no more reads
    assert further_read_reserve(m, [], reads_left=2, budget=128) == 0  # nothing left to follow
