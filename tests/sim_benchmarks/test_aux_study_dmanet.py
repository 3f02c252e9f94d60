"""Smoke run of the dmanet study (--quick): the results contract and its checks are filled in."""

import json

import pytest

from sim_benchmarks.studies.aux import methods
from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.results import VERDICTS


@pytest.mark.slow
def test_dmanet_quick_run_writes_results(tmp_path):
    assert "dmanet" in methods()
    assert main(["dmanet", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema"] == "embodia.aux/2" and data["method"] == "dmanet"
    assert data["seeds"] == [0] and len(data["per_seed"]) == 1
    assert data["verdict"] in VERDICTS and data["summary"]
    assert data["value"] == data["value"]  # not NaN


@pytest.mark.slow
def test_dmanet_quick_run_anti_aliasing_removes_folded_energy():
    result = methods()["dmanet"].run([0], quick=True)
    energy = result.checks["probe_folded_energy"]
    assert energy["dmanet"][0] < 0.1 * energy["plain"][0]


@pytest.mark.slow
def test_dmanet_is_judged_on_excess_mse_above_the_oracle_with_a_no_full_resolution_ablation():
    # Almost all of the probe's MSE is the unpredictable tone: the pass metric must be the learnable part.
    result = methods()["dmanet"].run([0, 1], quick=True)
    rows = result.per_seed
    excess = [100 * (1 - (r["probe/dmanet"] - r["probe/oracle"]) / (r["probe/plain"] - r["probe/oracle"]))
              for r in rows]
    assert result.value == pytest.approx(sum(excess) / 2)
    assert "excess" in result.metric
    assert {"probe/dmanet_nofull", "probe/plain_nofull"} <= set(rows[0])
    assert any("full-resolution" in part for part in result.parts)
    assert result.headroom.best == pytest.approx(sum(r["probe/oracle"] for r in rows) / 2)
    assert result.headroom.gap > 0 and result.margin is not None and result.margin_why
    assert result.verdict in ("yes", "partly", "no", "inconclusive")
