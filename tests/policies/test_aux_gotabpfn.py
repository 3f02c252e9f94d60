"""GO-LR: 2-opt never lengthens a path, exact MinLA on small graphs, the ordering recovers a hidden chain, pooling."""

import numpy as np
import pytest

from policies.aux.structured.gotabpfn import (
    BlockPooler,
    exact_minla,
    feature_similarity,
    graph_order,
    minla_cost,
    nearest_neighbour_path,
    neighbour_adjacency_rate,
    path_cost,
    two_opt,
)


def random_distances(p: int, seed: int) -> np.ndarray:
    pts = np.random.default_rng(seed).random((p, 2))
    return np.linalg.norm(pts[:, None] - pts[None], axis=-1)


@pytest.mark.parametrize("seed", range(10))
def test_two_opt_never_increases_the_path_cost(seed):
    dist = random_distances(30, seed)
    start = np.random.default_rng(seed).permutation(30)
    improved = two_opt(start, dist)
    assert sorted(improved) == list(range(30))
    assert path_cost(improved, dist) <= path_cost(start, dist) + 1e-12
    nn_path = nearest_neighbour_path(dist)
    assert path_cost(two_opt(nn_path, dist), dist) <= path_cost(nn_path, dist) + 1e-12


def test_two_opt_untangles_a_crossing():
    pts = np.array([[0.0, 0], [1, 1], [1, 0], [2, 1]])  # path 0-1-2-3 crosses itself; 0-2-1-3 does not
    dist = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    assert path_cost(two_opt(np.arange(4), dist), dist) < path_cost(np.arange(4), dist)


def test_exact_minla_on_a_path_graph_and_small_random_graphs():
    p = 7
    chain = np.zeros((p, p))
    hidden = np.random.default_rng(0).permutation(p)
    for a, b in zip(hidden[:-1], hidden[1:], strict=True):
        chain[a, b] = chain[b, a] = 1.0
    order, cost = exact_minla(chain)
    assert cost == pytest.approx(p - 1)  # a path laid out in its own order: every edge has length 1
    assert minla_cost(order, chain) == pytest.approx(cost)
    rng = np.random.default_rng(1)
    for _ in range(3):
        w = rng.random((6, 6))
        w = (w + w.T) / 2
        _, best = exact_minla(w)
        assert best <= min(minla_cost(rng.permutation(6), w) for _ in range(50)) + 1e-12
    with pytest.raises(ValueError, match="<= 8"):
        exact_minla(np.zeros((9, 9)))


def test_graph_order_recovers_a_hidden_feature_chain():
    # Features are a random walk along a hidden chain: neighbours in the chain are the most correlated.
    rng = np.random.default_rng(0)
    p, n = 8, 400
    base = np.cumsum(rng.standard_normal((n, p)), axis=1)
    hidden = rng.permutation(p)
    x = np.empty_like(base)
    x[:, hidden] = base
    order = graph_order(x)
    weights = feature_similarity(x)
    _, best = exact_minla(weights)
    assert minla_cost(order, weights) == pytest.approx(best, rel=1e-9)
    assert list(order) in (list(hidden), list(hidden[::-1]))


def test_block_pooler_shapes_signs_and_adjacency_rate():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((50, 1))
    x = np.hstack([z, -z, z + 0.01 * rng.standard_normal((50, 1)), rng.standard_normal((50, 3))])
    pooler = BlockPooler(np.arange(6), budget=2).fit(x)
    out = pooler.transform(x)
    assert out.shape == (50, 2)
    assert np.abs(np.corrcoef(out[:, 0], z[:, 0])[0, 1]) > 0.99  # the anti-correlated copy was flipped, not cancelled
    assert neighbour_adjacency_rate(np.array([0, 1, 2, 5]), {(0, 1), (1, 2)}) == pytest.approx(2 / 3)
