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
