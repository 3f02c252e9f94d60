"""Smoke run of the RobuQ digits-DiT study (quick mode) and its results.json."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from policies.aux.training.robuq import allocate_bits
from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.robuq import (
    BUDGET,
    PARTS,
    VARIANTS,
    TinyDiT,
    frechet_distance,
    mean_bits,
    random_placement,
    summarise,
)

# The study's layer widths: per block qkv, proj, fc1 read 64 features, fc2 reads 256.
SIZES = {f"blocks.{b}.{n}": (256 if n == "fc2" else 64) for b in range(3) for n in ("qkv", "proj", "fc1", "fc2")}


def test_frechet_distance_zero_for_identical_and_grows_with_shift() -> None:
    a = np.random.default_rng(0).normal(size=(300, 4))
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
    assert frechet_distance(a, a + 2.0) == pytest.approx(16.0, rel=1e-6)


def test_dit_shapes() -> None:
    out = TinyDiT()(torch.randn(5, 64), torch.arange(5.0), torch.arange(5))
    assert out.shape == (5, 64)


def test_the_mixed_precision_budget_forces_a_trade_that_exactly_two_bits_did_not() -> None:
    # Errors shaped like the digits DiT's: 1 bit is catastrophic everywhere, layers differ in sensitivity. At an
    # average of exactly 2.0 bits over {1, 2, 3, 4} the knapsack can only pick 2 bits everywhere (= uniform A2);
    # at the study's budget some layers must get more bits than others, and AMPN chooses which.
    rng = np.random.default_rng(0)
    errors = {n: {b: float(s) * 4.0 ** -b + (10.0 if b == 1 else 0.0) for b in (1, 2, 3, 4)}
              for n, s in zip(SIZES, rng.uniform(0.5, 8.0, len(SIZES)), strict=True)}
    assert set(allocate_bits(errors, SIZES, 2.0).values()) == {2}
    ampn = allocate_bits(errors, SIZES, BUDGET)
    assert len(set(ampn.values())) > 1 and mean_bits(ampn, SIZES) <= BUDGET
    rand = random_placement(SIZES, BUDGET, seed=3)
    assert set(rand.values()) == {2, 3} and BUDGET - 64 / 1344 < mean_bits(rand, SIZES) <= BUDGET
    assert rand == random_placement(SIZES, BUDGET, seed=3) and rand != random_placement(SIZES, BUDGET, seed=4)


def test_rotation_is_judged_unrotated_against_rotated_at_a2_and_a3() -> None:
    pairs = {(base, method) for _, base, method in PARTS}
    assert {("W1.58A2", "W1.58A2+rot"), ("W1.58A3", "W1.58A3+rot")} <= pairs
    assert {v for pair in pairs for v in pair} <= set(VARIANTS)


def _rows(rot_gain: float, fp_fd: float, noise: float = 0.02, n: int = 5) -> list[dict]:
    rows = []
    for seed in range(n):
        wiggle = 1 + noise * (seed - 2)  # sample-draw noise of the baselines' FD
        row = {"seed": seed, "FP": {"fd": fp_fd, "class_acc": 0.95}, "layers": {}, "ampn_mean_bits": 2.48,
               "random_mean_bits": 2.48}
        for v in VARIANTS:
            base = 10.0 if "A2" in v else 6.0 if "A3" in v else 8.0
            fd = base * (1 - rot_gain) if v.endswith("+rot") and "2.5" not in v else base
            row[v] = {"fd": fd, "fd_redraw": fd * wiggle, "class_acc": 0.9}
        rows.append(row)
    return rows


def test_summarise_judges_against_the_redraw_noise_and_the_full_precision_ceiling() -> None:
    clear = summarise(_rows(rot_gain=0.3, fp_fd=2.0))
    assert clear.parts["rotation at W1.58A2"] == "yes" and clear.parts["rotation at W1.58A3"] == "yes"
    assert clear.parts["AMPN vs random placement at 2.5 bits"] == "no"  # equal FD: no gain beyond the noise
    assert clear.verdict == "partly" and clear.margin > 0 and clear.headroom.gap == pytest.approx(8.0)
    # A full-precision model no better than the quantised baseline leaves no room: inconclusive, never "no".
    ceiling = summarise(_rows(rot_gain=0.0, fp_fd=10.0))
    assert ceiling.parts["rotation at W1.58A2"] == "inconclusive"
    # One seed: the t-interval and the 2-SE margin both collapse to a point, which must not read as a verdict.
    single = summarise(_rows(rot_gain=0.3, fp_fd=2.0)[:1])
    assert set(single.parts.values()) == {"inconclusive"} and single.verdict == "inconclusive"


def test_margins_stay_fixed_as_seeds_are_added_so_more_seeds_can_meet_the_power_rule() -> None:
    # A gain just above the fixed A2 margin, with seed-to-seed spread: at 5 seeds the CI is wider than the margin;
    # at 40 seeds it is narrower, and the margin (unlike a 2-SE margin recomputed per run) has not moved.
    def rows(n: int) -> list[dict]:
        out = _rows(rot_gain=0.0, fp_fd=2.0, n=n)
        for r in out:
            gain = 0.12 + 0.15 * (-1) ** r["seed"]
            r["W1.58A2+rot"]["fd"] = r["W1.58A2"]["fd"] * (1 - gain)
        return out

    few, many = summarise(rows(5)).checks["parts"], summarise(rows(40)).checks["parts"]
    part = "rotation at W1.58A2"
    assert few[part]["margin"] == many[part]["margin"] == pytest.approx(0.063)
    assert not few[part]["powered"] and many[part]["powered"]
    assert few[part]["verdict"] == "inconclusive" and many[part]["verdict"] == "yes"
    assert many[part]["redraw_2se_this_run"] > 0  # each run still reports its own redraw noise


@pytest.mark.slow
def test_robuq_quick_run_writes_results(tmp_path) -> None:
    assert main(["robuq", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    seed = data["per_seed"][0]
    assert data["method"] == "robuq" and not data["synthetic"]
    for variant in ("FP", *VARIANTS):
        assert math.isfinite(seed[variant]["fd"]) and 0.0 <= seed[variant]["class_acc"] <= 1.0
    assert len(seed["layers"]) == 12 and set(seed["ampn_bits"].values()) <= {1, 2, 3, 4}
    assert seed["ampn_mean_bits"] <= BUDGET and seed["random_mean_bits"] <= BUDGET
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and set(data["parts"]) == {p for p, _, _ in PARTS}
