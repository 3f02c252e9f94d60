"""Control steps per second of Personalized-SIMPLER on one core (physics substeps + one 224² render per step).

    python -m sim_benchmarks.studies.simpler.simpler_speed --steps 150 --repeats 3 --out results/simpler_speed.json

Runs the scripted expert on every personalized task in one process pinned to one CPU (where the OS allows) and
reports the median over repeats of (a) step-only throughput and (b) throughput including resets (scene build,
spawning and reference images). Prints a table and writes JSON.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from envs.manipulation.env import make_env
from envs.manipulation.tasks import PERSONALIZED_TASKS
from policies.manipulation.scripted_expert import ScriptedExpert
from sim_benchmarks.cli import ArgumentParser, main_guard


def time_expert_steps(env, expert, steps: int, seed: int = 0) -> tuple[float, float, int]:
    """Run ``steps`` control steps of a scripted ``expert``, resetting on episode ends: (seconds inside
    ``env.step``, total seconds including resets, episodes started)."""
    step_time, total_start, done, episode = 0.0, time.perf_counter(), 0, 0
    while done < steps:
        obs, info = env.reset(seed=seed + episode)
        expert.reset(obs["instruction"], info)
        while done < steps:
            action = expert.act(obs)
            t0 = time.perf_counter()
            obs, _, terminated, truncated, _ = env.step(action)
            step_time += time.perf_counter() - t0
            done += 1
            if terminated or truncated:
                break
        episode += 1
    return step_time, time.perf_counter() - total_start, episode


def measure(task: str, steps: int, image_size: int, privileged: bool, seed: int = 0) -> dict[str, float]:
    """Run ``steps`` control steps of the expert on ``task``; return step-only and with-reset rates."""
    env = make_env(task, {"image_size": image_size, "privileged": privileged})
    step_time, total, resets = time_expert_steps(env, ScriptedExpert(env), steps, seed)
    env.close()
    return {"steps_per_s": steps / step_time, "steps_per_s_with_resets": steps / total, "episodes": resets}


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point: prints and (with --out) saves the figures."""
    ap = ArgumentParser(prog="sim_benchmarks.studies.simpler.simpler_speed", description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=150, help="control steps per task and repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--privileged", action="store_true", help="also render depth + segmentation")
    ap.add_argument("--out", writes="file", type=Path, default=None, help="JSON output file")
    args = ap.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        except OSError:
            pass
    results: dict[str, dict[str, float]] = {}
    for task in PERSONALIZED_TASKS:
        runs = [measure(task, args.steps, args.image_size, args.privileged, seed=100 * r) for r in range(args.repeats)]
        results[task] = {k: statistics.median(r[k] for r in runs) for k in ("steps_per_s", "steps_per_s_with_resets")}
        print(f"{task:24s} {results[task]['steps_per_s']:6.1f} steps/s   "
              f"{results[task]['steps_per_s_with_resets']:6.1f} steps/s incl. resets", flush=True)
    out = {"benchmark": "simpler_speed", "image_size": args.image_size, "privileged": args.privileged,
           "steps": args.steps, "repeats": args.repeats, "cpu_count": os.cpu_count(),
           "load_avg": os.getloadavg() if hasattr(os, "getloadavg") else None, "tasks": results,
           "median_steps_per_s": statistics.median(r["steps_per_s"] for r in results.values())}
    print(f"median over tasks: {out['median_steps_per_s']:.1f} control steps/s at {args.image_size}²")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    main()
