"""Pseudo-Mallows study: the --quick smoke run writes a complete results.json."""

import json

import numpy as np
import pytest

from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.pseudo_mallows import summarise


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


def _rows(tv_pm: float, tv_mcmc: float) -> list[dict]:
    rng = np.random.default_rng(0)
    exact = [{"n": 6, "seed": 600 + d, "kl_chosen": 0.7, "kl_median": 2.0 + rng.random(), "kl_best": 0.6,
              "chosen_rank_among_orders": 1, "mcmc_s": 0.5, "tv_pm": tv_pm + 0.01 * rng.random(),
              "tv_mcmc": tv_mcmc + 0.01 * rng.random()} for d in range(20)]
    speed = [{"n": 30, "seed": 10 * s + d, "pm_recall": 0.9, "mcmc_recall": 0.9, "pm_mcmc_overlap": 1.0,
              "pm_s": 1.0 + rng.random(), "mcmc_s": 10.0 + rng.random(), "time_ratio": 0.1,
              "top10_tv_pm_vs_mcmc": 0.02} for s in range(5) for d in range(2)]
    return exact + speed


def test_marginal_part_says_no_when_pseudo_mallows_is_further_from_the_exact_posterior_than_mcmc():
    # Lower TV is better: a Pseudo-Mallows TV far above MCMC's must not pass as "not worse".
    part = "posterior marginals as close to the exact posterior as MCMC's (n = 6-8)"
    assert summarise(_rows(tv_pm=0.17, tv_mcmc=0.03)).parts[part] == "no"
    assert summarise(_rows(tv_pm=0.02, tv_mcmc=0.03)).parts[part] == "yes"
    assert summarise(_rows(tv_pm=0.03, tv_mcmc=0.03)).seeds == [0, 1, 2, 3, 4]
