"""The profile-driven choice: per-mode cost estimates and the predicted-latency rule."""

from __future__ import annotations

import pytest

from policies.toolpro.profile import ServiceProfile


def test_predictions_follow_the_cost_model_with_separate_per_call_costs():
    p = ServiceProfile()
    p.calibrate([0.010, 0.012, 0.011], [0.030, 0.031, 0.029])  # medians: ping 11 ms, empty program 30 ms
    assert p.ping_s == pytest.approx(0.011) and p.program_s == pytest.approx(0.019)
    p.observe_stepwise(latency_s=10 * (0.011 + 0.002), calls=10)  # 2 ms per call beyond the round trip
    p.observe_program(latency_s=0.011 + 0.019 + 0.040, calls=10, server_call_s=0.040)  # 4 ms per call in a program
    assert p.step_call_s == pytest.approx(0.002) and p.program_call_s == pytest.approx(0.004)
    assert p.predict_stepwise(5) == pytest.approx(5 * 0.013)
    assert p.predict_program(5) == pytest.approx(0.011 + p.program_s + 5 * 0.004)
    assert p.choose(1) == "stepwise"  # one call can never repay a program's fixed cost
    assert p.choose(50) == "program"


def test_a_new_observation_moves_the_estimate_by_alpha():
    p = ServiceProfile(alpha=0.5)
    p.observe_stepwise(0.10, 10)
    p.observe_stepwise(0.30, 10)
    assert p.step_call_s == pytest.approx(0.5 * 0.01 + 0.5 * 0.03)
