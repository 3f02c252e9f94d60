"""Control steps per second of Personalized-VLABench on one core (100 physics substeps + four 224² views per step).

    python -m sim_benchmarks.studies.vlabench.vlabench_speed --steps 100 --repeats 3 --out results/vlabench_speed.json

Runs the scripted expert on every task in one process pinned to one CPU (where the OS allows) and reports the
median over repeats of (a) step-only throughput and (b) throughput including resets (scene compile, settle phase,
reference images), plus the mean render time per view. The machine's load average is recorded beside the numbers:
on a shared machine they are a lower bound.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from envs.errors import ConfigError
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.studies.simpler.simpler_speed import time_expert_steps


def measure(task: str, steps: int, image_size: int, cameras: tuple[str, ...], seed: int = 0) -> dict[str, float]:
    """Run ``steps`` control steps of the expert on ``task``; return step-only and with-reset rates."""
    from envs.manipulation.vlabench.env import make_env
    from policies.manipulation.vlabench_expert import VLABenchExpert

    env = make_env(task, {"image_size": image_size, "cameras": ",".join(cameras)})
    step_time, total, resets = time_expert_steps(env, VLABenchExpert(env), steps, seed)
    # Render cost alone: every configured view of the final state, 20 times.
    t0 = time.perf_counter()
    for _ in range(20):
        for cam in cameras:
            env.scene.render(cam)
    render_ms = (time.perf_counter() - t0) / (20 * len(cameras)) * 1000
    env.close()
    return {"steps_per_s": steps / step_time, "steps_per_s_with_resets": steps / total, "episodes": resets,
            "render_ms_per_view": render_ms}


def run(argv: list[str] | None = None) -> dict:
    """Parse ``argv``, measure every task, print a table, write JSON; returns the result dict."""
    from envs.manipulation.vlabench.scene import CAMERAS
    from envs.manipulation.vlabench.tasks import TASKS

    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100, help="control steps per task and repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--cameras", default=",".join(CAMERAS), help="comma-separated views to render")
    ap.add_argument("--out", writes="file", type=Path, default=None, help="JSON output file")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.repeats < 1:
        raise ConfigError(f"--steps and --repeats must be >= 1, got {args.steps} and {args.repeats}")
    cameras = tuple(c for c in args.cameras.split(",") if c)
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        except OSError:
            pass
    load_before = os.getloadavg()
    results: dict[str, dict[str, float]] = {}
    for task in TASKS:
        runs = [measure(task, args.steps, args.image_size, cameras, seed=100 * r) for r in range(args.repeats)]
        results[task] = {k: statistics.median(r[k] for r in runs)
                         for k in ("steps_per_s", "steps_per_s_with_resets", "render_ms_per_view")}
        print(f"{task:20s} {results[task]['steps_per_s']:6.1f} steps/s   "
              f"{results[task]['steps_per_s_with_resets']:6.1f} steps/s incl. resets   "
              f"{results[task]['render_ms_per_view']:5.1f} ms/view", flush=True)
    out = {"benchmark": "vlabench_speed", "image_size": args.image_size, "cameras": list(cameras),
           "steps": args.steps, "repeats": args.repeats, "cpu_count": os.cpu_count(),
           "load_avg_before": load_before, "load_avg_after": os.getloadavg(), "tasks": results,
           "median_steps_per_s": statistics.median(r["steps_per_s"] for r in results.values())}
    print(f"median over tasks: {out['median_steps_per_s']:.1f} control steps/s with {len(cameras)} views at "
          f"{args.image_size}² (load average {load_before[0]:.1f} → {out['load_avg_after'][0]:.1f})")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2))
    return out


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point: exit 0, or 2 with one line on bad input."""
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
