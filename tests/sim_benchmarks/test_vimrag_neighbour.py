"""The neighbour_category diagnostic's probe: it learns a rule that is there and not one that is not."""

from __future__ import annotations

import numpy as np


def test_linear_probe_of_the_neighbour_diagnostic_learns_a_separable_rule() -> None:
    from sim_benchmarks.studies.vimrag.neighbour import linear_probe

    rng = np.random.default_rng(0)
    centres = rng.normal(0, 3, (3, 5))
    y = rng.integers(0, 3, 300)
    x = centres[y] + rng.normal(0, 0.5, (300, 5))
    pred = linear_probe(x[:200], y[:200], x[200:], 3)
    assert (pred == y[200:]).mean() > 0.95
    shuffled = linear_probe(x[:200], rng.permutation(y[:200]), x[200:], 3)  # labels without signal: near chance
    assert (shuffled == y[200:]).mean() < 0.6
