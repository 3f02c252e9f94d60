"""Streaming-RL learning benchmark: games × agents × seeds, IQM ± stratified-bootstrap 95 % CI, curves.

    python -m sim_benchmarks.studies.streaming.streaming_learning --suite minatar \\
        --agents stream_q,stream_ac,stream_spr \\
        --seeds 1,42,999 --steps 200000 --workers 2 --out runs/streaming_learning

Every run is an ordinary ``launch.train`` run folder (``OUT/<env>/<agent>/seed<S>/``): a finished one is
skipped, an interrupted one resumes from its checkpoint, so rerunning the same command completes the table.
A run's score is its mean return over the last 100 episodes. Per game: IQM over seeds with a bootstrap CI.
Aggregate: each run's score normalised per game as (score − random) / (best run of that game − random), then
IQM over all games × seeds with a CI that resamples seeds within each game (rliable's stratified bootstrap).
Writes ``results.json``, ``leaderboard.md`` and ``curves.png``.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from envs.arcade import games, make_arcade_env
from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from envs.statistics import iqm, stratified_bootstrap_ci
from sim_benchmarks.cli import ArgumentParser, main_guard, parse_seeds


def run_dir(out: Path, env: str, agent: str, seed: int) -> Path:
    return out / env.replace(":", "_") / agent / f"seed{seed}"


def _one_run(job: tuple[str, str, int, int, str, dict]) -> dict[str, Any]:
    env, agent, seed, steps, out, options = job
    from sim_benchmarks.training.streaming import train

    d = run_dir(Path(out), env, agent, seed)
    summary_path = d / "summary.json"
    if summary_path.exists():
        done = json.loads(summary_path.read_text())
        if done.get("steps") == steps:
            return done
    resume = (d / "checkpoint.pt").exists()
    return train(env, agent, steps, seed, d, resume=resume, options=options)


def random_return(env_name: str, episodes: int, seed: int, env_options: dict[str, Any] | None = None) -> float:
    """Mean return of uniform random play over ``episodes`` seeded episodes (the normalisation floor), on the env
    built with the runs' own ``env_options`` (e.g. ``fire_reset`` changes what random play scores)."""
    env = make_arcade_env(env_name, env_options)
    rng = np.random.default_rng(seed)
    total = []
    for ep in range(episodes):
        env.reset(seed=seed * 10_000 + ep)
        ret, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
            ret += r
            done = term or trunc
        total.append(ret)
    return float(np.mean(total))


def aggregate(scores: dict[str, dict[str, list[float]]], randoms: dict[str, float], reps: int = 2000,
              seed: int = 0) -> dict[str, Any]:
    """Per-game IQM ± CI of raw scores and the normalised aggregate IQM ± CI per agent.

    ``scores[agent][env]`` is the list of per-seed scores.
    """
    envs = sorted({e for per in scores.values() for e in per})
    best = {e: max(max(per[e]) for per in scores.values() if e in per) for e in envs}
    out: dict[str, Any] = {}
    for agent, per in scores.items():
        row: dict[str, Any] = {"per_game": {}}
        for e in envs:
            if e not in per:
                continue
            est, lo, hi = stratified_bootstrap_ci({e: np.asarray(per[e])}, iqm, reps, seed=seed)
            row["per_game"][e] = {"iqm": est, "ci95": [lo, hi], "runs": len(per[e])}
        norm = {e: (np.asarray(per[e]) - randoms[e]) / max(best[e] - randoms[e], 1e-8) for e in envs if e in per}
        est, lo, hi = stratified_bootstrap_ci(norm, iqm, reps, seed=seed)
        row["normalised_iqm"] = {"iqm": est, "ci95": [lo, hi]}
        out[agent] = row
    return out


def render_markdown(table: dict[str, Any], randoms: dict[str, float], header: str) -> str:
    envs = sorted(randoms)
    lines = [header, "", "| agent | " + " | ".join(envs) + " | normalised IQM |",
             "|---" * (len(envs) + 2) + "|"]
    for agent, row in table.items():
        cells = []
        for e in envs:
            c = row["per_game"].get(e)
            cells.append(f"{c['iqm']:.2f} [{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}]" if c else "–")
        n = row["normalised_iqm"]
        cells.append(f"{n['iqm']:.2f} [{n['ci95'][0]:.2f}, {n['ci95'][1]:.2f}]")
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    lines.append("| random | " + " | ".join(f"{randoms[e]:.2f}" for e in envs) + " | 0 |")
    return "\n".join(lines) + "\n"


def _mean_ci(values: list[float], reps: int = 2000, seed: int = 0) -> dict[str, Any]:
    est, lo, hi = stratified_bootstrap_ci({"runs": np.asarray(values)}, np.mean, reps, seed=seed)
    return {"mean": est, "ci95": [lo, hi], "runs": len(values)}


def render_ranks(rank_table: dict[str, dict[str, dict[str, Any]]], envs: list[str]) -> str:
    """Markdown: each agent's encoder effective rank per game (mean over seeds [95 % bootstrap CI])."""
    lines = ["", "Effective rank of the final encoder's features on 1,000 states of uniform random play (the same "
             "states for every agent of a seed; mean over seeds [95 % bootstrap CI]):", "",
             "| agent | " + " | ".join(envs) + " |", "|---" * (len(envs) + 1) + "|"]
    for agent, per in rank_table.items():
        cells = [f"{per[e]['mean']:.1f} [{per[e]['ci95'][0]:.1f}, {per[e]['ci95'][1]:.1f}]" if e in per else "–"
                 for e in envs]
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_curves(out: Path, envs: list[str], agents: list[str], seeds: list[int], steps: int) -> None:
    """Mean over seeds of the 100-episode moving return against env steps, one panel per game."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(envs), figsize=(3.2 * len(envs), 3), squeeze=False)
    grid = np.linspace(0, steps, 50)
    for ax, env in zip(axes[0], envs, strict=True):
        for agent in agents:
            curves = []
            for seed in seeds:
                path = run_dir(out, env, agent, seed) / "metrics.jsonl"
                if not path.exists():
                    continue
                recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
                if len(recs) < 2:
                    continue
                st = np.array([r["step"] for r in recs])
                ret = np.array([r["return"] for r in recs], dtype=float)
                w = min(100, len(ret))
                smooth = np.convolve(ret, np.ones(w) / w, mode="full")[: len(ret)] / np.minimum(
                    np.arange(1, len(ret) + 1), w) * w
                curves.append(np.interp(grid, st, smooth))
            if curves:
                ax.plot(grid, np.mean(curves, 0), label=agent)
        ax.set_title(env, fontsize=9)
        ax.set_xlabel("env steps", fontsize=8)
    axes[0][0].set_ylabel("return (100-ep. mean)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=100)
    plt.close(fig)


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.streaming.streaming_learning", description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="minatar", choices=["minatar", "atari", "octax"])
    p.add_argument("--games", default="", help="comma list (default: all 5 MinAtar games / required otherwise)")
    p.add_argument("--agents", default="stream_q,stream_ac,stream_spr")
    p.add_argument("--seeds", default="1,42,999")
    p.add_argument("--steps", type=int, default=200_000, min=1, max=10**9)
    p.add_argument("--workers", type=int, default=1, min=1, max=64)
    p.add_argument("--random-episodes", type=int, default=100, min=1, max=100_000)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="passed to every run")
    p.add_argument("--out", writes="folder", type=Path, default=Path("runs/streaming_learning"))
    args = p.parse_args(argv)
    try:
        game_list = [g for g in args.games.split(",") if g] or (games("minatar") if args.suite == "minatar" else [])
        if not game_list:
            raise ConfigError(f"--games is required for suite {args.suite}")
        envs = [f"{args.suite}:{g}" for g in game_list]
        agents = [a for a in args.agents.split(",") if a]
        seeds = parse_seeds(args.seeds)
        from sim_benchmarks.options import parse_options
        from sim_benchmarks.suites.arcade import AGENTS
        from sim_benchmarks.training.streaming import build_config, env_options

        bad = [a for a in agents or [""] if a not in AGENTS]
        if bad:
            raise ConfigError(f"unknown agent {bad[0]!r}; valid: {', '.join(AGENTS)}")
        options = parse_options(args.option, "--option")
        for a in agents:  # every agent option checked (unknown keys, bad values) before --out is made
            build_config(a, args.suite, args.steps, options)
        for e in envs:  # validates names and env options before hours of compute
            make_arcade_env(e, env_options(options)).close()
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(e, a, s, args.steps, str(args.out), options) for e in envs for a in agents for s in seeds]
    t0 = time.perf_counter()
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            summaries = list(pool.map(_one_run, jobs))
    else:
        summaries = [_one_run(j) for j in jobs]
    scores: dict[str, dict[str, list[float]]] = {}
    ranks: dict[str, dict[str, list[float]]] = {}
    for (e, a, _, _, _, _), s in zip(jobs, summaries, strict=True):
        scores.setdefault(a, {}).setdefault(e, []).append(float(s["return_last100"] or 0.0))
        if "representation" in s:  # runs finished before the probe existed have none
            ranks.setdefault(a, {}).setdefault(e, []).append(float(s["representation"]["effective_rank"]))
    randoms = {e: random_return(e, args.random_episodes, seed=0, env_options=env_options(options)) for e in envs}
    table = aggregate(scores, randoms)
    header = (f"Streaming RL on {args.suite}: {len(seeds)} seeds ({', '.join(map(str, seeds))}) × {args.steps:,} "
              f"env steps per run; score = mean return of the last 100 episodes; IQM [95 % CI]; normalised score = "
              f"(score − random) / (best run − random) per game, so 0 is random play and 1 the best run.")
    md = render_markdown(table, randoms, header)
    rank_table = {a: {e: _mean_ci(v) for e, v in per.items()} for a, per in ranks.items()}
    if rank_table:
        md += render_ranks(rank_table, envs)
    (args.out / "leaderboard.md").write_text(md)
    write_json_atomic(args.out / "results.json", {
        "suite": args.suite, "envs": envs, "agents": agents, "seeds": seeds, "steps": args.steps,
        "options": options, "random_return": randoms, "scores": scores, "table": table,
        "effective_rank": rank_table,
        "wall_s": time.perf_counter() - t0})
    plot_curves(args.out, envs, agents, seeds, args.steps)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
