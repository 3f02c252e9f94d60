"""Smoke run of the ManifoldKV study (loads SmolLM2 from its offline cache: slow)."""

import json

import numpy as np
import pytest
import torch

from sim_benchmarks.studies.aux.__main__ import main


@pytest.mark.slow
def test_manifold_kv_quick_run_writes_results(tmp_path, capsys):
    assert main(["manifold_kv", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["method"] == "manifold_kv" and data["synthetic"] is True
    row = data["per_seed"][0]
    for key in ("acc3_50_manifold", "acc3_85_keydiff", "planted_acc3_85_manifold", "retention_50_manifold",
                "retention_85_keydiff"):
        assert 0.0 <= row[key] <= 100.0
    assert row["needle_tokens"] > 0
    assert "manifold_kv:" in capsys.readouterr().out


@pytest.mark.slow
def test_manifold_kv_is_judged_at_85_percent_with_planted_collisions_and_no_eviction_headroom(tmp_path):
    # At 50 % eviction every scorer sat at the no-eviction score: the verdict is taken where there is headroom, and
    # on planted needles that share the centroid's direction but not its norm (where L2 and cosine disagree).
    assert main(["manifoldkv", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0  # the README's spelling
    data = json.loads((tmp_path / "results.json").read_text())
    row = data["per_seed"][0]
    assert data["value"] == pytest.approx(row["acc3_85_manifold"] - row["acc3_85_keydiff"])
    assert data["headroom"]["best"] == pytest.approx(row["acc3_full"])
    assert data["headroom"]["baseline"] == pytest.approx(row["acc3_85_keydiff"])
    assert data["checks"]["headroom_planted"]["best"] == pytest.approx(row["planted_acc3_full"])
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and len(data["parts"]) == 3
    # Seeds run as separate processes merge into the same result.
    assert main(["manifold_kv", "--merge", str(tmp_path), "--out", str(tmp_path / "merged")]) == 0
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert merged["value"] == data["value"] and merged["parts"] == data["parts"] and merged["seeds"] == [0]
    assert main(["manifold_kv", "--merge", str(tmp_path), str(tmp_path), "--out", str(tmp_path / "m2")]) == 2


def test_planted_needle_keys_point_along_the_centroid_so_cosine_drops_them_and_l2_keeps_them():
    from policies.aux.lm_geometry.manifold_kv import keep_mask, keydiff_scores, manifold_scores
    from sim_benchmarks.studies.aux.manifold_kv import CTX, PLANT, collinear_plant, sample, train_recall

    torch.manual_seed(0)
    model, data = train_recall(0, steps=0)  # geometry only: an untrained model has keys too
    s = sample(8, np.random.default_rng(0))
    shift = collinear_plant(model, data, s, PLANT)
    x = data.embed(s["fill"], s["pos"], s["keys"], s["vals"], s["q_keys"])
    keys = model(embeds=x[:, :CTX], return_keys=True, key_shift=shift[:, :, :, :CTX]).keys
    needle = torch.zeros(8, CTX, dtype=torch.bool)
    needle[torch.arange(8)[:, None], s["pos"]] = True
    for k in keys:
        kept_l2 = keep_mask(manifold_scores(k), 19)[needle[:, None, :].expand(-1, k.shape[1], -1)]
        kept_cos = keep_mask(keydiff_scores(k), 19)[needle[:, None, :].expand(-1, k.shape[1], -1)]
        assert kept_l2.float().mean() > 0.9 and kept_cos.float().mean() < 0.1


def test_the_planted_condition_trains_its_own_model_with_the_plant_in_place():
    # A model trained on its own keys cannot read planted keys (no-eviction accuracy near 0), so the planted
    # condition has a model trained with the plant: its gradient steps see the shifted keys.
    from sim_benchmarks.studies.aux.manifold_kv import PLANT, train_recall

    plain, _ = train_recall(0, steps=2)
    planted, _ = train_recall(0, steps=2, plant=PLANT)
    again, _ = train_recall(0, steps=2, plant=PLANT)
    p, q, r = (dict(m.named_parameters()) for m in (plain, planted, again))
    assert any(not torch.equal(p[n], q[n]) for n in p)  # the plant changed the training
    assert all(torch.equal(q[n], r[n]) for n in q)  # and it is seeded


def test_a_baseline_at_zero_on_every_seed_does_not_make_the_margin_zero():
    from sim_benchmarks.studies.aux.manifold_kv import summarise

    rows = []
    for seed, full in enumerate((90.0, 94.0, 92.0, 96.0)):
        rows.append({"seed": seed, "eval_sequences": 100, "acc3_full": 99.0, "acc3_85_manifold": 95.0 + seed % 2,
                     "acc3_85_keydiff": 85.0 + seed, "acc1_85_manifold": 99.0, "acc1_85_keydiff": 95.0 + seed % 2,
                     "planted_acc3_full": full, "planted_acc3_85_manifold": full, "planted_acc3_85_keydiff": 0.0})
    result = summarise(rows)
    margin = result.checks["margins_points"]["planted_acc3"]
    assert margin == pytest.approx(2 * np.std([90, 94, 92, 96], ddof=1) / 2)  # the no-eviction noise
    assert result.verdict == "yes"
