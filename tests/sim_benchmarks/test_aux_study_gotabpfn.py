"""Smoke run of the gotabpfn study (--quick): the results contract and its checks are filled in, with the shipped
prior-fitted transformer as one of the frozen heads."""

import json

import pytest

from sim_benchmarks.studies.aux import methods
from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.results import VERDICTS


@pytest.mark.slow
def test_gotabpfn_quick_run_writes_results(tmp_path):
    assert "gotabpfn" in methods()
    assert main(["gotabpfn", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema"] == "embodia.aux/2" and data["method"] == "gotabpfn"
    assert data["seeds"] == [0] and len(data["per_seed"]) == 1
    assert data["verdict"] in VERDICTS and data["summary"]
    assert data["value"] == data["value"]  # not NaN
    row = data["per_seed"][0]
    for order in ("go_lr", "random", "variance", "pca"):  # the frozen prior-fitted head scores every order
        assert 0.0 <= row[f"mnist/pfn/64/{order}"] <= 100.0
    assert "prior-fitted" in data["metric"]


@pytest.mark.slow
def test_gotabpfn_quick_run_order_follows_pixel_adjacency():
    result = methods()["gotabpfn"].run([0], quick=True)
    assert result.checks["mnist_adjacency"]["ratio"] >= 2.0
