"""``python -m launch.eval``: evaluate policies on a registered suite and write results + leaderboards.

    python -m launch.eval --env personalized_simpler                      # the main job, all defaults
    python -m launch.eval --env classic_control/cartpole --policy balancer,random --episodes 20 --seed 0
    python -m launch.eval --list
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from launch.cli import ArgumentParser, main_guard, parse_options
from sim_benchmarks import registry
from sim_benchmarks.evaluation import EvalConfig, run_evaluation
from sim_benchmarks.executors import EXECUTORS
from sim_benchmarks.progress import progress_bar


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="launch.eval", description="Evaluate policies on an Embodia suite.")
    p.add_argument("--env", default="personalized_simpler", help="SUITE, SUITE/TASK or SUITE:TASK")
    p.add_argument("--policy", default=None, help="comma-separated policy names (default: the suite's set)")
    p.add_argument("--episodes", type=int, default=None, help="episodes per task per policy")
    p.add_argument("--seed", type=int, default=0, help="base seed; episodes derive theirs from it")
    p.add_argument("--workers", type=int, default=None, help="parallel workers (default: the suite's)")
    p.add_argument("--executor", default=None, help=f"one of {', '.join(EXECUTORS)} (default: process when "
                   "workers > 1, else serial)")
    p.add_argument("--out", writes="folder", type=Path, default=None,
                   help="results folder (default runs/<timestamp>-<suite>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out, running only what is missing")
    p.add_argument("--video", type=int, default=0, metavar="N", help="record the first N episodes per cell as mp4")
    p.add_argument("--env-option", action="append", metavar="KEY=VALUE", help="suite option (repeatable)")
    p.add_argument("--policy-option", action="append", metavar="KEY=VALUE", help="policy option (repeatable)")
    p.add_argument("--list", action="store_true", help="list suites, tasks and policies, then exit")
    return p


def print_listing() -> None:
    """Every registered suite with its tasks and policies, one line of description each."""
    out = sys.stdout.write
    for name, suite in registry.suites().items():
        out(f"{name}: {suite.description}\n")
        for task, desc in suite.tasks.items():
            by_name = suite.default_tasks and task not in suite.default_tasks
            out(f"  task {name}/{task}: {desc}{' (runs when named)' if by_name else ''}\n")
        out(f"  policies: {', '.join(registry.policies_for(name))} (default: {', '.join(suite.default_policies)})\n")
        if suite.options_type is not None:
            for line in suite.options_type.describe():
                out(f"  --env-option {line}\n")
    out("policies:\n")
    for name, spec in registry.policies().items():
        where = ", ".join(spec.suites) if spec.suites else "all suites"
        out(f"  {name}: {spec.description} [{where}]\n")
        if spec.options_type is not None:
            for line in spec.options_type.describe():
                out(f"    --policy-option {line}\n")
        for suite_name, options_type in spec.extension_types:
            for line in options_type.describe():
                out(f"    --policy-option {line}  (on {suite_name})\n")
    trainers = registry.trainers()
    if trainers:
        out("training families (python -m launch.train):\n")
        for name, spec in trainers.items():
            out(f"  {name}: envs {', '.join(spec.env_prefixes)}; agents {', '.join(spec.agents)}\n")
    for name, why in registry.unavailable().items():
        out(f"unavailable suite module {name}: {why}\n")


def print_table(summary: dict[str, Any], out_dir: Path) -> None:
    """The leaderboard as a rich table on stdout."""
    from rich.console import Console
    from rich.table import Table

    tasks = list(summary["config"]["tasks"])
    table = Table(title=f"{summary['benchmark']} — success % [95 % CI]")
    for col in ["policy", *tasks, "overall", "correct obj", "episodes"]:
        table.add_column(col, justify="left" if col == "policy" else "right")

    def cell(e: dict[str, Any] | None) -> str:
        if not e or not e["episodes"]:
            return "–"
        lo, hi = e["success_ci95"]
        return f"{100 * e['success_rate']:.0f} [{100 * lo:.0f}–{100 * hi:.0f}]"

    for name, e in summary["policies"].items():
        table.add_row(name, *[cell(e["per_task"].get(t)) for t in tasks], cell(e),
                      f"{100 * e['correct_object_rate']:.0f}%", str(e["episodes"]))
    console = Console(width=200)
    console.print(table)
    console.print(f"results: {out_dir}/ (episodes.jsonl, summary.json, leaderboard.md/html/png)")


@main_guard
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        print_listing()
        return 0
    policies = [p.strip() for p in args.policy.split(",") if p.strip()] if args.policy else None
    cfg = EvalConfig(env=args.env, policies=policies, episodes=args.episodes, seed=args.seed, workers=args.workers,
                     executor=args.executor, out=args.out, resume=args.resume, video=args.video,
                     env_options=parse_options(args.env_option, "--env-option"),
                     policy_options=parse_options(args.policy_option, "--policy-option"))
    with progress_bar(None, f"eval {args.env}") as bar:
        # The total is known only after resume filtering, so the evaluation reports it through on_start.
        summary, out = run_evaluation(cfg, on_progress=bar, on_start=bar.set_total)
    print_table(summary, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
