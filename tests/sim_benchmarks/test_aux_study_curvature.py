"""Statistics and probe machinery of the curvature study, plus a smoke run (loads SmolLM2 from its cache: slow)."""

import json

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from sim_benchmarks.studies.aux import curvature as study
from sim_benchmarks.studies.aux.__main__ import main


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 5, 200).astype(float), rng.normal(size=200)
    assert study.spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    cols = np.stack([x, -x, rng.normal(size=200)], axis=1)
    r = study._spearman_columns(cols, y)
    assert r[0] == pytest.approx(spearmanr(x, y).statistic, abs=1e-12) and r[1] == pytest.approx(-r[0])


def test_block_bootstrap_brackets_a_real_correlation_and_null_does_not():
    rng = np.random.default_rng(1)
    ent = [rng.normal(size=300) for _ in range(4)]
    curv = [np.stack([e + rng.normal(size=300), rng.normal(size=300)], axis=1) for e in ent]
    r, ci = study.block_bootstrap_r(curv, ent, reps=200, rng=np.random.default_rng(2))
    assert r[0] > 0.6 and ci[0, 0] > 0.5 and ci[0, 0] < r[0] < ci[1, 0]
    assert ci[0, 1] < 0 < ci[1, 1]  # the independent column's CI covers 0
    null = study.shifted_null_r([c[:, 0] for c in curv], ent, reps=200, rng=np.random.default_rng(3))
    assert abs(null.mean()) < 0.05 and np.quantile(null, 0.975) < r[0]


def test_blocks_stay_inside_chunks():
    blocks = study._blocks([100, 70])
    assert [len(b) for b in blocks] == [64, 36, 64, 6]
    assert blocks[1][-1] == 99 and blocks[2][0] == 100


def test_probe_mask_lets_each_copy_see_its_prefix_and_itself():
    mask = study.probe_mask(5, torch.tensor([2, 4]))[0, 0] == 0
    assert mask[:5, :5].equal(torch.ones(5, 5, dtype=torch.bool).tril())
    assert not mask[:5, 5:].any()
    assert mask[5].tolist() == [True, True, False, False, False, True, False]
    assert mask[6].tolist() == [True, True, True, True, False, False, True]
    # A floor copy forgets one context token and still sees the rest of its prefix and itself.
    forgot = study.probe_mask(5, torch.tensor([2, 4]), torch.tensor([-1, 1]))[0, 0] == 0
    assert forgot[5].tolist() == mask[5].tolist()
    assert forgot[6].tolist() == [True, False, True, True, False, False, True]


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    cfg._attn_implementation = "eager"
    return LlamaForCausalLM(cfg).eval()


def test_probe_copies_reproduce_unperturbed_entropy_and_alpha_zero_changes_nothing():
    model = _tiny_llama()
    ids = torch.randint(0, 50, (1, 100), generator=torch.Generator().manual_seed(1))
    _, _, hidden = study.smollm2_series(model, ids)
    assert len(hidden) == 4 and hidden[0].shape == (100, 32)
    cfg = study.CurvatureStudyConfig(n_probes=6)
    out = study.perturbation_effect(model, ids, hidden[2], 2, seed=0, cfg=cfg)
    assert out["probe_copy_max_abs_err"] < 1e-4
    assert out["dH_aligned"] > 0 and out["dH_misaligned"] > 0
    assert out["dH_floor"] > 1e-6  # forgetting a distant token changes the entropy a little, never exactly 0
    still = study.perturbation_effect(model, ids, hidden[2], 2, seed=0,
                                      cfg=study.CurvatureStudyConfig(n_probes=6, alpha=0.0))
    assert still["dH_aligned"] < 1e-5 and still["dH_misaligned"] < 1e-5
    assert still["dH_floor"] == pytest.approx(out["dH_floor"], abs=1e-6)  # the floor does not depend on alpha


def test_last_layer_series_is_the_block_output_not_the_final_norm():
    model = _tiny_llama()
    ids = torch.randint(0, 50, (1, 30), generator=torch.Generator().manual_seed(2))
    seen = []
    handle = model.model.layers[-1].register_forward_hook(lambda _m, _i, o: seen.append(o))
    _, _, hidden = study.smollm2_series(model, ids)
    handle.remove()
    assert torch.allclose(hidden[-1], seen[0][0])


@pytest.mark.slow
def test_curvature_quick_run_writes_results(tmp_path, capsys):
    assert main(["curvature", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["method"] == "curvature" and data["synthetic"] is False
    assert -1.0 <= data["value"] <= 1.0 and data["ci95"][0] <= data["value"] <= data["ci95"][1]
    checks = data["checks"]
    assert 1 <= checks["peak_layer"] <= 30 and len(checks["per_layer_r_all_chunks"]) == 31
    assert data["parts"]["r grows with training (tiny GPT)"] == "inconclusive"  # one seed: no CI over seeds
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and data["margin"] == pytest.approx(0.075)
    assert checks["margins"]["perturbation_floor_nats"] > 0
    sweep = checks["k_sensitivity_per_layer_r"]
    assert sorted(map(int, sweep)) == [1, 2, 4, 8, 16, 32] and all(len(v) == 31 for v in sweep.values())
    row = data["per_seed"][0]
    assert row["perturb_probe_copy_max_abs_err"] < 1e-3 and row["perturb_ratio"] > 0 and row["perturb_dH_floor"] > 0
    for name in ("init", "trained", "straight"):
        assert -1.0 <= row[f"tiny_{name}_r_blocks_mean"] <= 1.0
    assert "curvature:" in capsys.readouterr().out
