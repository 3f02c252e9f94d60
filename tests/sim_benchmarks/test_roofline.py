"""The roofline study reports every figure it names (structure only: timings are not asserted)."""

import json

from sim_benchmarks.studies.streaming import roofline


def test_roofline_reports_the_passes_the_fused_step_and_every_spr_gemm(tmp_path, capsys):
    assert roofline.main(["--repeats", "4", "--out", str(tmp_path / "r.json")]) == 0
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["parameters"] == 132_179 and res["fc128_weight"] == 128 * 1024  # MinAtar Breakout's network
    assert set(res["bandwidth"]) == {"read theta", "trace update z = d*z + g with L1", "ObGD step theta += a*z",
                                     "DRAM read of 64 MB"}
    assert all(v["gb_per_s"] > 0 for v in res["bandwidth"].values())
    assert len(res["stream_q_us"]) == 5 and all(v > 0 for v in res["stream_q_us"].values())
    assert res["fused_forward_gmac_per_s"] > 0 and set(res["stream_q_step_ms"]) == {"fused", "layered"}
    assert set(res["spr_step_ms"]) == {"fused update", "loss kernel + module steps"}
    assert all(v > 0 for v in res["spr_step_ms"].values())
    assert len(res["spr_gemms"]) == len(roofline.SPR_GEMMS) == 16
    assert sum("weight_once_loop_us" in r for r in res["spr_gemms"]) == 3  # the 5-row products with a weight
    assert res["spr_multiply_adds"] == sum(a[0] * a[1] * (b[0] if k == "nt" else b[1]) * n
                                           for _, k, a, b, n in roofline.SPR_GEMMS)
    assert "SPR update:" in capsys.readouterr().out
    assert roofline.main(["--repeats", "0"]) == 2
