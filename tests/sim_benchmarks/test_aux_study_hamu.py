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


@pytest.mark.slow
def test_hamu_damage_is_judged_on_held_out_retain_data(tmp_path) -> None:
    # The MLP fits its training set to ~100 %: a drop on the retain training set sits at a floor, so the verdict
    # uses test images of the retained classes.
    assert main(["hamu", "--seeds", "0,1", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    rows = data["per_seed"]
    diffs = [r["easy/graddiff"]["held_out_drop_pts"] - r["easy/hamu"]["held_out_drop_pts"] for r in rows]
    assert data["value"] == pytest.approx(sum(diffs) / 2)
    assert "held-out" in data["metric"] and data["headroom"]["best"] == 0.0
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and len(data["parts"]) == 3
