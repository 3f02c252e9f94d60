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
    assert data["checks"]["kl_ratio_to_best_mean_ci"][0] >= 1.0 - 1e-9  # no order beats the best one


@pytest.mark.slow
def test_pseudo_mallows_is_judged_on_posterior_marginals_against_mcmc_and_the_exact_posterior(tmp_path):
    # The verdict compares posterior marginals (TV to the enumerated posterior) paired over datasets, not a top-10
    # recall whose single differing item is 10 points.
    assert main(["pseudo_mallows", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    exact = [r for r in data["per_seed"] if "kl_chosen" in r]
    for r in exact:
        assert 0.0 <= r["tv_pm"] <= 1.0 and 0.0 < r["tv_mcmc"] <= 1.0
    diffs = [r["tv_pm"] - r["tv_mcmc"] for r in exact]
    assert data["value"] == pytest.approx(sum(diffs) / len(diffs))
    assert data["headroom"]["best"] == 0.0 and data["headroom"]["gap"] > 0
    assert data["margin"] > 0 and "MCMC" in data["margin_why"]
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and len(data["parts"]) == 3
