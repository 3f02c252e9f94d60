"""Function-level checks of the claims experiment on a tiny configuration (seconds, not minutes)."""

import numpy as np

from sim_benchmarks.studies.next_token.next_token_claims import bounded_context, loglog_slope, regret_grid, wilson


def test_regret_grid_key_numbers():
    grid = regret_grid([100, 300, 1000], seeds=1, log=lambda _: None,
                       tasks=["rps_anti_model"], agents=["hedge", "best_response", "robust"])
    br = [r["avg_regret_mean"] for r in grid["rps_anti_model/best_response"]]
    rb = [r["avg_regret_mean"] for r in grid["rps_anti_model/robust"]]
    assert min(br) >= 0.5  # plain best response is exploited at every T
    assert -0.6 <= loglog_slope([100, 300, 1000], rb) <= -0.4  # robustified: ~ T^(-1/2)
    for r in grid["rps_anti_model/hedge"]:
        assert max(r["regret"]) <= r["hedge_bound"]


def test_bounded_context_every_windowed_rule_is_far_or_exploited():
    res = bounded_context([500, 2000], window=50, taus=[0.0, 8.0, 19.2], lams=[0.3], extended=[],
                          tv_rounds=1000, tv_episodes=150, adv_episodes=3, eps=0.1, seed=0, log=lambda _: None)
    rows = res["variants"]
    windowed = [v for v in rows.values() if v["family"] != "full"]
    assert len(windowed) == 4 and all(v["far"] or v["exploited"] for v in windowed)
    assert rows["trigger w=50 tau=0"]["tv_ci95"][0] > 0.9  # always leaning: Theta(1)-far
    assert rows["trigger w=50 tau=19.2"]["tv"] < 0.05 and rows["trigger w=50 tau=19.2"]["adv_avg_regret"][-1] > 0.08
    full = rows["full context (switch at tau_T)"]
    assert full["tv"] < 0.05 and not full["exploited"]
    assert full["adv_avg_regret"][1] < 0.8 * full["adv_avg_regret"][0]


def test_wilson_interval_contains_the_rate():
    lo, hi = wilson(3, 50)
    assert lo < 0.06 < hi and 0.0 < lo and hi < 0.2
    assert np.allclose(wilson(0, 100)[0], 0.0)
