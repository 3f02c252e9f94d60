"""Smoke run of the RobuQ digits-DiT study (quick mode) and its results.json."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.robuq import VARIANTS, TinyDiT, frechet_distance


def test_frechet_distance_zero_for_identical_and_grows_with_shift() -> None:
    a = np.random.default_rng(0).normal(size=(300, 4))
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
    assert frechet_distance(a, a + 2.0) == pytest.approx(16.0, rel=1e-6)


def test_dit_shapes() -> None:
    out = TinyDiT()(torch.randn(5, 64), torch.arange(5.0), torch.arange(5))
    assert out.shape == (5, 64)


@pytest.mark.slow
def test_robuq_quick_run_writes_results(tmp_path) -> None:
    assert main(["robuq", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    seed = data["per_seed"][0]
    assert data["method"] == "robuq" and not data["synthetic"]
    for variant in ("FP", *VARIANTS):
        assert math.isfinite(seed[variant]["fd"]) and 0.0 <= seed[variant]["class_acc"] <= 1.0
    assert len(seed["layers"]) == 12 and set(seed["ampn_bits"].values()) <= {1, 2, 3, 4}
