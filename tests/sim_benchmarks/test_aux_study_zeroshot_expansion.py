"""Smoke run of the zeroshot_expansion study (--quick): the results contract and its checks are filled in."""

import json

import pytest

from sim_benchmarks.studies.aux import methods
from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.results import VERDICTS


@pytest.mark.slow
def test_zeroshot_expansion_quick_run_writes_results(tmp_path):
    assert "zeroshot_expansion" in methods()
    assert main(["zeroshot_expansion", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema"] == "embodia.aux/2" and data["method"] == "zeroshot_expansion"
    assert data["seeds"] == [0] and len(data["per_seed"]) == 1
    assert data["verdict"] in VERDICTS and data["summary"]
    assert data["value"] == data["value"]  # not NaN
