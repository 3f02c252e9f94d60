"""The leaderboard picture: the legend sits outside every bar, and bars follow the table's row order."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.patches import Rectangle  # noqa: E402

from sim_benchmarks.leaderboard import leaderboard_figure, render_markdown  # noqa: E402

TASKS = ["fractal_pick_my", "fractal_move_my_near", "bridge_pick_my", "bridge_put_my_on"]


def _summary() -> dict:
    policies = {}
    for i, name in enumerate(["generic", "hard_prompt", "soft_prompt", "vap", "oracle_mask", "scripted_expert"]):
        rate = [0.2, 0.5, 0.25, 0.7, 0.8, 0.98][i]  # high bars under the legend's old place (top right)
        per_task = {t: {"episodes": 50, "success_rate": rate, "success_ci95": [rate - 0.1, min(1, rate + 0.1)],
                        "correct_object_rate": rate} for t in TASKS}
        policies[name] = {"episodes": 200, "success_rate": rate, "success_ci95": [rate - 0.05, min(1, rate + 0.05)],
                          "correct_object_rate": rate, "wrong_object_rate": 0.0, "per_task": per_task}
    return {"benchmark": "personalized_simpler", "policies": policies, "config": {"seed": 0}}


def test_legend_does_not_cover_any_bar():
    fig = leaderboard_figure([_summary()])
    fig.canvas.draw()
    ax = fig.axes[0]
    legend_box = ax.get_legend().get_window_extent()
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    assert len(bars) == 6 * 5  # 6 policies x (4 tasks + overall)
    overlapping = [b for b in bars if b.get_window_extent().overlaps(legend_box)]
    assert overlapping == []
    assert legend_box.x0 >= ax.get_window_extent().x1  # outside the axes, not merely between bars


def test_bars_follow_the_table_order():
    summary = _summary()
    fig = leaderboard_figure([summary])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    table_rows = [line.split("|")[1].strip() for line in render_markdown([summary]).splitlines()[2:8]]
    assert labels == table_rows == ["scripted_expert", "oracle_mask", "vap", "hard_prompt", "soft_prompt", "generic"]
