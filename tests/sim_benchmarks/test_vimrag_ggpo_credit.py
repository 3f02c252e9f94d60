"""The credit study's scoring, paired statistics and power analysis on hand-made runs (no training)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim_benchmarks.studies.vimrag.ggpo_credit import (
    detectable_effect,
    main,
    paired_bootstrap,
    report,
    run_scores,
    seeds_needed,
)

CFG = {"episodes": 64, "group": 4, "questions_per_batch": 2, "lr": 1e-3, "eval_every": 16, "step_cost": 0.02,
       "seed": 0, "entropy": 0.01}
DIAG = {"differ": 0.1, "mixed": 0.5, "cos_credits": 0.9, "cos_successive": 0.2, "decisions": 30.0, "updates": 8}


def _run(credit: str, seed: int, rewards: list[float]) -> dict:
    curve = [{"episodes": 16 * i, "dev_accuracy": r + 0.1, "dev_steps": 5.0, "dev_reward": r}
             for i, r in enumerate(rewards)]
    return {"credit": credit, "seed": seed, "config": CFG, "curve": curve, "diagnostics": DIAG}


def test_run_scores_use_the_whole_curve_and_the_last_evaluations() -> None:
    s = run_scores(_run("ggpo", 0, [0.0, 0.2, 0.4, 0.6, 0.8]), level=0.5, plateau=0.75, last=2)
    assert s["auc"] == pytest.approx(0.5)  # the start (before any update) is not scored
    assert s["last"] == pytest.approx(0.7) and s["escaped"]  # dev accuracy 0.8 > 0.75
    assert s["episodes_to_level"] == 48
    stuck = run_scores(_run("ggpo", 0, [0.0, 0.3, 0.3, 0.3, 0.3]), level=0.5, plateau=0.45, last=2)  # acc 0.4
    assert stuck["episodes_to_level"] is None and not stuck["escaped"]


def test_power_analysis_matches_the_paired_t_test() -> None:
    # Normal approximation: (1.96 + 0.84) * sd / sqrt(n) = 0.511 for sd 1, n 30; the t test needs a little more.
    assert detectable_effect(1.0, 30) == pytest.approx(0.53, abs=0.01)
    assert detectable_effect(1.0, 120) < detectable_effect(1.0, 30) / 1.9
    assert seeds_needed(1.0, 0.53) in (29, 30, 31)
    mean, lo, hi = paired_bootstrap(np.array([1.0, 1.0, 1.0]))
    assert (mean, lo, hi) == (1.0, 1.0, 1.0)


def test_report_pairs_by_seed_and_calls_a_consistent_gain(tmp_path) -> None:
    runs = []
    for seed in range(12):
        base = [0.0, 0.3, 0.35, 0.4, 0.4]
        runs.append(_run("trajectory", seed, base))
        runs.append(_run("ggpo", seed, [r + (0.1 + 0.01 * (seed % 3) if i else 0.0) for i, r in enumerate(base)]))
    md = report(runs, tmp_path, level=0.45, plateau=0.52, last=2, margin=0.03)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["paired"]["auc"]["verdict"] == "GGPO better"
    assert summary["paired"]["auc"]["mean"] == pytest.approx(0.11, abs=0.002)
    assert summary["credits"]["ggpo"]["escaped"] == 12 and summary["credits"]["trajectory"]["escaped"] == 0
    assert summary["paired"]["episodes_to_level"]["verdict"] == "GGPO better"  # fewer episodes
    assert "| ggpo |" in md and (tmp_path / "curves.png").stat().st_size > 0


def test_equal_credits_inside_the_margin_are_called_equivalent(tmp_path) -> None:
    runs = []
    for seed in range(20):
        noise = 0.004 * ((seed * 7) % 5 - 2)
        runs.append(_run("trajectory", seed, [0.0, 0.4, 0.5, 0.5]))
        runs.append(_run("ggpo", seed, [0.0, 0.4 + noise, 0.5 + noise, 0.5 + noise]))
    report(runs, tmp_path, level=0.45, plateau=0.45, last=2, margin=0.03)
    verdict = json.loads((tmp_path / "summary.json").read_text())["paired"]["auc"]["verdict"]
    assert verdict.startswith("no difference beyond")


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        return int(exc.code)


def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys) -> None:
    for argv in (["--credits", "ppo"], ["--updates", "0"], ["--step-cost", "-1"], ["--seeds", "x"], ["--lr", "no"],
                 ["--report"]):
        assert _exit_code([*argv, "--out", str(tmp_path / "study")]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
    assert not (tmp_path / "study").exists()  # nothing half-written
