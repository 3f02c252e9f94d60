"""Pseudo-Mallows study: the --quick smoke run writes a complete results.json."""

import json

import pytest

from sim_benchmarks.studies.aux.__main__ import main


@pytest.mark.slow
def test_pseudo_mallows_quick_run_writes_results(tmp_path):
    assert main(["pseudo_mallows", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["method"] == "pseudo_mallows" and data["synthetic"] is True
    exact = [r for r in data["per_seed"] if "kl_chosen" in r]
    speed = [r for r in data["per_seed"] if "pm_recall" in r]
    assert len(exact) == 4 and len(speed) == 1
    for r in exact:  # KL is non-negative and no order beats the best one
        assert 0.0 <= r["kl_best"] <= r["kl_chosen"] + 1e-12
    assert 0.0 <= speed[0]["pm_recall"] <= 1.0 and speed[0]["pm_s"] > 0 and speed[0]["mcmc_s"] > 0
    assert data["value"] >= 1.0 - 1e-9  # the ratio to the best order cannot be below 1
