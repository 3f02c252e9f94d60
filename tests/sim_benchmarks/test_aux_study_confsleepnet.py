"""Smoke run of the confsleepnet study (--quick): the results contract and its checks are filled in."""

import json

import pytest

from sim_benchmarks.studies.aux import methods
from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.results import VERDICTS


@pytest.mark.slow
def test_confsleepnet_quick_run_writes_results(tmp_path):
    assert "confsleepnet" in methods()
    assert main(["confsleepnet", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema"] == "embodia.aux/2" and data["method"] == "confsleepnet"
    assert data["seeds"] == [0] and len(data["per_seed"]) == 1
    assert data["verdict"] in VERDICTS and data["summary"]
    assert data["value"] == data["value"]  # not NaN
