"""Theseus study: the --quick smoke run writes a complete results.json."""

import json

import pytest

from sim_benchmarks.studies.aux.__main__ import main

pytest.importorskip("mlxtend")


@pytest.mark.slow
def test_theseus_quick_run_writes_results(tmp_path, capsys):
    assert main(["theseus", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema"] == "embodia.aux/2" and data["method"] == "theseus" and data["synthetic"] is False
    row = data["per_seed"][0]
    for key in ("none", "pad", "lstsq", "theseus", "oracle"):
        assert 0.0 <= row[key] <= 1.0
    # fine-tuning on the rotated digits must help the wide model, or the experiment measures nothing
    assert row["oracle"] > row["none"] + 0.2
    assert row["theseus_alpha"] in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    assert "theseus" in capsys.readouterr().out
    # judged like every other aux method: parts, a noise margin with its reason, and the oracle headroom
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and len(data["parts"]) == 2
    assert data["margin"] >= 0 and "standard errors" in data["margin_why"]
    assert data["headroom"]["best"] == pytest.approx(100 * row["oracle"])
