"""Smoke run of the HAMU digits study (quick mode) and its results.json."""

from __future__ import annotations

import json
import math

import pytest

from sim_benchmarks.studies.aux.__main__ import main


@pytest.mark.slow
def test_hamu_quick_run_writes_results(tmp_path) -> None:
    assert main(["hamu", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["method"] == "hamu" and data["seeds"] == [0] and not data["synthetic"]
    seed = data["per_seed"][0]
    for key in ("easy/hamu", "easy/graddiff", "easy/grad_ascent", "easy/neggrad_plus", "hard/hamu"):
        assert 0.0 <= seed[key]["retain_acc"] <= 1.0
        assert math.isfinite(seed[key]["retain_drop_pts"])
    assert data["checks"]["stop_rule_fires_hard"].endswith("/1")
