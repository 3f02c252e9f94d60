"""Smoke run of the LLR char-GPT study (quick mode) and its results.json."""

from __future__ import annotations

import json

import pytest

from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.llr import encode, load_text, steps_to


def test_text_and_target_search() -> None:
    ids, vocab = encode(load_text()[:5000])
    assert ids.min() == 0 and ids.max() == vocab - 1
    assert steps_to([(0, 4.0), (10, 3.0), (20, 2.5)], 3.0) == 10
    assert steps_to([(0, 4.0)], 3.0) is None


@pytest.mark.slow
def test_llr_quick_run_writes_results(tmp_path) -> None:
    assert main(["llr", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    seed = data["per_seed"][0]
    assert data["method"] == "llr" and not data["synthetic"]
    assert seed["uniform_final"] < 4.7 and seed["llr_final"] < 4.7  # below ln(vocab≈103): it learned something
    assert len(seed["llr_final_alphas"]) == 9 and all(a > 1 for a in seed["llr_final_alphas"])
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and data["headroom"]["what"]
    assert len(data["checks"]["lr_sweep_final_loss"]) == 5 and data["checks"]["longer_steps"] == 30


def _rows(uniform, llr, saved):
    return [{"seed": i, "uniform_final": u, "llr_final": v, "steps_saved_fraction": f}
            for i, (u, v, f) in enumerate(zip(uniform, llr, saved, strict=True))]


def _sweep(best_lr, longer):
    return {"lr_sweep_final_loss": {"0.001": 2.3, "0.01": 1.8, "0.04": 2.0}, "best_lr": best_lr,
            "longer_uniform_final": longer, "longer_steps": 900, "steps": 600, "eval_every": 25}


def test_llr_verdict_needs_an_interior_best_rate_and_loss_left_to_gain() -> None:
    from sim_benchmarks.studies.aux.llr import judge_runs

    uniform = [1.80, 1.82, 1.79, 1.81, 1.80]
    better = [u - 0.05 for u in uniform]
    saved = [0.25, 0.3, 0.2, 0.25, 0.3]
    result = judge_runs(_rows(uniform, better, saved), _sweep(0.01, 1.70))
    assert result.verdict == "yes" and result.value > result.margin > 0
    # The same gain with the best uniform rate at the grid's edge: a better uniform rate may lie outside.
    assert judge_runs(_rows(uniform, better, saved), _sweep(0.04, 1.70)).verdict == "inconclusive"
    # Training 1.5x longer gains nothing: the task has no room for a faster optimiser.
    assert judge_runs(_rows(uniform, better, saved), _sweep(0.01, 1.80)).verdict == "inconclusive"
    # Worse loss and never reaching the uniform loss: no.
    worse = [u + 0.05 for u in uniform]
    assert judge_runs(_rows(uniform, worse, [0.0] * 5), _sweep(0.01, 1.70)).verdict == "no"
