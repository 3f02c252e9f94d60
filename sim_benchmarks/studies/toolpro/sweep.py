"""Latency and client-side traffic of program vs stepwise execution over round-trip time × workflow length.

    python -m launch.study toolpro.sweep --rtt 0,50,200 --length 2,10,50 --reps 3 --seed 0
    python -m launch.study toolpro.sweep --rtt 0,5,20 --tasks comment_ticket_7,ship_paid_1 --reps 5 --name policy

Workflow: ``ship_paid_{L-1}`` (one list call, then L-1 shipments: exactly L tool calls), or the named ``--tasks``.
For every cell each of ``stepwise``, ``program_only`` and ``toolpro`` (profile-driven) runs one unrecorded warm-up
episode, then ``reps`` episodes, the modes taking turns, on freshly seeded databases over a real MCP stdio
connection; latency is wall-clock with the round-trip time injected as real sleeps. Writes ``NAME.json`` and
``NAME.png`` (``--name``, default ``sweep``).
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.toolpro import connection
from agents.toolpro.graph import ToolProPolicy
from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from envs.services.env import WorkflowEnv, WorkflowEnvOptions
from envs.services.workflows import get_task
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.studies.aux.results import mean_ci

MODES = {"stepwise": "stepwise", "program_only": "program", "toolpro": "auto"}


NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")  # output files NAME.json and NAME.png inside --out


def parse_numbers(text: str, what: str, cast: type = int, minimum: float = 0, maximum: float = 5000) -> list[Any]:
    """``"0,50,200"`` → [0, 50, 200]; ConfigError (exit 2, one line) unless every value is a finite number in
    ``minimum..maximum``."""
    try:
        values = [cast(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) and minimum <= v <= maximum for v in values):
        raise ConfigError(f"{what} must be comma-separated {cast.__name__}s in {minimum:g}..{maximum:g}, got "
                          f"{text!r}")
    return values


def run_cell(rtt: float, length: int, reps: int, seed: int, task: str | None = None) -> dict[str, Any]:
    """One (RTT, workflow) cell: ``task``, or ``ship_paid_{length-1}`` when none is named."""
    task = task or f"ship_paid_{length - 1}"
    env = WorkflowEnv(task, WorkflowEnvOptions(rtt_ms=rtt))
    out: dict[str, Any] = {"rtt_ms": rtt, "length": length, "task": task}
    policies = {name: ToolProPolicy(mode) for name, mode in MODES.items()}  # type: ignore[arg-type]
    episodes: dict[str, list[dict[str, Any]]] = {name: [] for name in MODES}

    def episode(name: str, db_seed: int, run_id: str) -> dict[str, Any]:
        obs, _ = env.reset(seed=db_seed)
        obs["run_id"] = run_id
        answer = policies[name].act(obs)
        _, _, _, _, info = env.step(answer)
        return {**policies[name].episode_info(), "success": info["success"]}

    try:
        # One unrecorded episode per mode first: a freshly started site is slow for its first calls, and whichever
        # mode ran first would pay for it. Then the modes take turns, so load drift on the machine hits all alike.
        for name in MODES:
            episode(name, seed * 1000 + reps, f"warmup-{name}-{rtt}-{task}")
        for r in range(reps):
            for name in MODES:
                episodes[name].append(episode(name, seed * 1000 + r, f"{name}-{rtt}-{task}-{r}"))
        for name, rows in episodes.items():
            lat = [x["latency_s"] for x in rows]
            out[name] = {"latency_s": mean_ci(lat), "bytes": float(np.mean([x["bytes"] for x in rows])),
                         "round_trips": float(np.mean([x["round_trips"] for x in rows])),
                         "success": float(np.mean([x["success"] for x in rows])),
                         "program_share": float(np.mean([x["program"] for x in rows])), "episodes": rows}
    finally:
        env.close()
    s, p = out["stepwise"], out["program_only"]
    out["latency_reduction"] = 1 - p["latency_s"][0] / s["latency_s"][0]
    out["traffic_reduction"] = 1 - p["bytes"] / s["bytes"]
    best = min(s["latency_s"][0], p["latency_s"][0])
    out["toolpro_vs_best"] = out["toolpro"]["latency_s"][0] / best - 1
    return out


def plot(cells: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rtts = sorted({c["rtt_ms"] for c in cells})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for rtt in rtts:
        row = sorted((c for c in cells if c["rtt_ms"] == rtt), key=lambda c: c["length"])
        xs = [c["length"] for c in row]
        for name, style in (("stepwise", "--"), ("toolpro", "-")):
            axes[0].plot(xs, [c[name]["latency_s"][0] for c in row], style, marker="o", label=f"{name} rtt={rtt:g}")
            axes[1].plot(xs, [c[name]["bytes"] / 1024 for c in row], style, marker="o", label=f"{name} rtt={rtt:g}")
    axes[0].set(xlabel="workflow length (tool calls)", ylabel="end-to-end latency (s)", yscale="log")
    axes[1].set(xlabel="workflow length (tool calls)", ylabel="client-side traffic (KiB)", yscale="log")
    axes[0].legend(fontsize=7)
    fig.suptitle("ToolPro vs stepwise over MCP stdio (real sleeps for RTT); means of the reps")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.toolpro.sweep", description=__doc__)
    p.add_argument("--rtt", default="0,50,200")
    p.add_argument("--length", default="2,10,50")
    p.add_argument("--reps", type=int, default=3, min=1, max=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tasks", default="", help="comma-separated workflow tasks instead of ship_paid_{length-1} "
                   "(their call counts replace --length)")
    p.add_argument("--name", default="sweep", help="output files NAME.json and NAME.png")
    p.add_argument("--out", writes="folder", type=Path, default=Path("docs/results/toolpro"))
    args = p.parse_args(argv)
    if not NAME.fullmatch(args.name):
        raise ConfigError(f"--name must be a plain file name (letters, digits, '_', '-', '.'; not starting with "
                          f"'.'), got {args.name!r}")
    rtts = parse_numbers(args.rtt, "--rtt", float)
    if args.tasks:
        workflows = [(get_task(t).calls_hint, get_task(t).name) for t in args.tasks.split(",")]
    else:
        workflows = [(n, f"ship_paid_{n - 1}") for n in parse_numbers(args.length, "--length", int, 2)]
        for _, name in workflows:
            get_task(name)  # a length without a ship_paid task is bad input: exit 2 naming the valid tasks
    t0 = time.perf_counter()
    cells = []
    try:
        for rtt in rtts:
            for length, task in workflows:
                cells.append(run_cell(rtt, length, args.reps, args.seed, task))
                c = cells[-1]
                print(f"rtt {rtt:g} ms {task} (L {length}): stepwise {c['stepwise']['latency_s'][0]:.3f}s "
                      f"program {c['program_only']['latency_s'][0]:.3f}s toolpro {c['toolpro']['latency_s'][0]:.3f}s "
                      f"(picked program {c['toolpro']['program_share']:.0%}); latency -{c['latency_reduction']:.1%} "
                      f"traffic -{c['traffic_reduction']:.1%}", flush=True)
    finally:
        connection.close_all()
    args.out.mkdir(parents=True, exist_ok=True)
    which = f"--tasks {args.tasks}" if args.tasks else f"--length {args.length}"
    write_json_atomic(args.out / f"{args.name}.json", {
        "command": f"python -m launch.study toolpro.sweep --rtt {args.rtt} {which} --reps {args.reps} "
                   f"--seed {args.seed}" + (f" --name {args.name}" if args.name != "sweep" else ""),
        "cells": cells, "wall_s": time.perf_counter() - t0})
    plot(cells, args.out / f"{args.name}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
