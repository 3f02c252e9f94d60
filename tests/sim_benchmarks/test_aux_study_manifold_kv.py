"""Smoke run of the ManifoldKV study (loads SmolLM2 from its offline cache: slow)."""

import json

import pytest

from sim_benchmarks.studies.aux.__main__ import main


@pytest.mark.slow
def test_manifold_kv_quick_run_writes_results(tmp_path, capsys):
    assert main(["manifold_kv", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["method"] == "manifold_kv" and data["synthetic"] is True
    row = data["per_seed"][0]
    for key in ("acc3_manifold", "acc3_keydiff", "retention_50_manifold", "retention_25_keydiff"):
        assert 0.0 <= row[key] <= 100.0
    assert row["needle_tokens"] > 0
    assert "manifold_kv:" in capsys.readouterr().out
