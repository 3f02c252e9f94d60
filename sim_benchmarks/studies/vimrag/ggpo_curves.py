"""GGPO vs trajectory credit: dev-accuracy learning curves of the action policy over seeds.

``python -m sim_benchmarks.studies.vimrag.ggpo_curves --seeds 0,1,2 --credits ggpo,trajectory --out DIR`` trains
one planner per (credit, seed) with the same episode budget and seed (same questions, same initial weights),
writes ``DIR/curves.json`` (appended per run, so a split or interrupted study resumes), and with ``--report``
the IQM-over-seeds curves with 95 % stratified-bootstrap intervals (``DIR/table.md``, ``DIR/curves.png``).
Runs are not cached: the default planner (``agents.vimrag.stack.trained_planner``) is the best on dev of four runs,
the first of which is this study's run of the same seed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from envs.errors import ConfigError
from sim_benchmarks.cli import ArgumentParser, main_guard, parse_seeds


def train_one(credit: str, seed: int, episodes: int, eval_every: int) -> dict:
    """Train one planner; returns its dev curve and its greedy test accuracy."""
    from agents.vimrag.agent import VimragAgent
    from agents.vimrag.ggpo import TrainConfig, evaluate, train_planner
    from agents.vimrag.stack import load_stack
    from envs.rag.corpus import fitting_half

    stack = load_stack(0)
    corpus = stack.kb.corpus
    agent = VimragAgent(stack.tools, stack.reader, None, mode="graph", read_floor=0)  # as trained_planner trains
    cfg = TrainConfig(credit=credit, seed=seed, episodes=episodes, eval_every=eval_every)
    t0 = time.perf_counter()
    planner, curve = train_planner(agent, fitting_half(corpus.split("train"), "planner"), corpus.split("dev"), cfg,
                                   log=lambda r: print(credit, seed, r, flush=True))
    agent.planner = planner
    test_acc = evaluate(agent, corpus.split("test"))
    return {"credit": credit, "seed": seed, "episodes": episodes, "curve": curve, "test_accuracy": test_acc,
            "train_s": time.perf_counter() - t0}


def report(runs: list[dict], out: Path) -> str:
    """IQM over seeds per checkpoint with stratified-bootstrap CIs; episodes for GGPO to reach the baseline."""
    from envs.statistics import iqm, stratified_bootstrap_ci

    by_credit: dict[str, list[dict]] = {}
    for r in runs:
        by_credit.setdefault(r["credit"], []).append(r)
    from sim_benchmarks.studies.aux.results import mean_ci, paired_diff_ci

    lines = ["| credit | seeds | final dev IQM [95 % CI] | test accuracy IQM [95 % CI] "
             "| test accuracy mean [95 % t CI] | dev curve IQM (episodes: acc) |",
             "|---|---|---|---|---|---|"]
    summary = {}
    for credit, rs in sorted(by_credit.items()):
        xs = [p["episodes"] for p in rs[0]["curve"]]
        mat = np.array([[p["dev_accuracy"] for p in r["curve"]] for r in rs])
        curve = [iqm(mat[:, i]) for i in range(len(xs))]
        final = stratified_bootstrap_ci({"dev": mat[:, -1]})
        test = stratified_bootstrap_ci({"test": np.array([r["test_accuracy"] for r in rs])})
        summary[credit] = {"x": xs, "iqm": curve, "final": final, "test": test,
                           "lo": [stratified_bootstrap_ci({"d": mat[:, i]})[1] for i in range(len(xs))],
                           "hi": [stratified_bootstrap_ci({"d": mat[:, i]})[2] for i in range(len(xs))]}
        pts = ", ".join(f"{x}: {100 * a:.0f}" for x, a in zip(xs, curve, strict=True))
        tmean = mean_ci([r["test_accuracy"] for r in rs])
        lines.append(f"| {credit} | {len(rs)} | {100 * final[0]:.1f} [{100 * final[1]:.1f}, {100 * final[2]:.1f}] | "
                     f"{100 * test[0]:.1f} [{100 * test[1]:.1f}, {100 * test[2]:.1f}] | "
                     f"{100 * tmean[0]:.1f} [{100 * tmean[1]:.1f}, {100 * tmean[2]:.1f}] | {pts} |")
    if {"ggpo", "trajectory"} <= set(summary):
        target = summary["trajectory"]["final"][0]
        reach = next((x for x, a in zip(summary["ggpo"]["x"], summary["ggpo"]["iqm"], strict=True) if a >= target),
                     None)
        base_reach = next((x for x, a in zip(summary["trajectory"]["x"], summary["trajectory"]["iqm"], strict=True)
                           if a >= target), None)
        # Same seed = same questions and initial weights in both arms: pair the runs by seed.
        seeds = sorted({r["seed"] for r in by_credit["ggpo"]} & {r["seed"] for r in by_credit["trajectory"]})
        pick = {c: {r["seed"]: r for r in by_credit[c]} for c in ("ggpo", "trajectory")}
        if seeds:
            for what, get in (("final dev", lambda r: r["curve"][-1]["dev_accuracy"]),
                              ("test", lambda r: r["test_accuracy"])):
                d = paired_diff_ci([get(pick["ggpo"][k]) for k in seeds], [get(pick["trajectory"][k]) for k in seeds])
                lines.append("")
                lines.append(f"GGPO − trajectory, {what} accuracy, paired by seed ({len(seeds)} seeds): "
                             f"{100 * d[0]:+.1f} points [95 % t CI {100 * d[1]:+.1f}, {100 * d[2]:+.1f}].")
        lines.append("")
        lines.append(f"GGPO's IQM curve first reaches the trajectory-credit final IQM ({100 * target:.1f} %) at "
                     f"{reach if reach is not None else 'never (within budget)'} episodes; trajectory credit at "
                     f"{base_reach} episodes.")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for credit, s in sorted(summary.items()):
        ax.plot(s["x"], s["iqm"], marker="o", label=f"{credit} (IQM)")
        ax.fill_between(s["x"], s["lo"], s["hi"], alpha=0.2)
    ax.set_xlabel("training episodes")
    ax.set_ylabel("dev exact match")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=120)
    plt.close(fig)
    md = "\n".join(lines)
    (out / "table.md").write_text(md + "\n")
    return md


CURVE_KEYS = ("credit", "seed", "episodes", "curve", "test_accuracy")


def read_curves(path: Path) -> list[dict]:
    """The runs ``curves.json`` holds; ConfigError naming the file when it is not the list of runs this study wrote."""
    try:
        runs = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{str(path)!r} is not readable JSON ({type(exc).__name__}); remove it or pass another "
                          "--out") from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and all(k in r for k in CURVE_KEYS) for r in runs):
        raise ConfigError(f"{str(path)!r} is not a list of runs with {', '.join(CURVE_KEYS)}; remove it or pass "
                          "another --out")
    return runs


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = ArgumentParser(prog="python -m sim_benchmarks.studies.vimrag.ggpo_curves",
                        description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--credits", default="ggpo,trajectory")
    ap.add_argument("--episodes", type=int, default=3072, min=1, max=1_000_000)
    ap.add_argument("--eval-every", type=int, default=256, min=1, max=1_000_000)
    ap.add_argument("--out", writes="folder", type=Path, required=True)
    ap.add_argument("--report", action="store_true", help="only (re)write the table and plot from curves.json")
    args = ap.parse_args(argv)
    seeds = [] if args.report else parse_seeds(args.seeds)
    credits = [c.strip() for c in args.credits.split(",") if c.strip()]
    for c in credits:
        if c not in ("ggpo", "trajectory"):
            raise ConfigError(f"unknown credit {c!r}; valid: ggpo, trajectory")
    path = args.out / "curves.json"
    runs = read_curves(path) if path.exists() else []
    if args.report and not runs:
        raise ConfigError(f"--report needs the runs in {str(path)!r}, and there are none; run without --report first")
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(1)
    for seed in seeds:
        for credit in credits:
            if any(r["credit"] == credit and r["seed"] == seed and r["episodes"] == args.episodes for r in runs):
                continue
            runs.append(train_one(credit, seed, args.episodes, args.eval_every))
            path.write_text(json.dumps(runs))
    print(report(runs, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
