"""Control steps per second of the ManiSkill3 backend on one core, per camera size (random actions).

    python -m launch.study maniskill.maniskill_speed --task PickCube-v1 --image-sizes 128,224 --steps 100
    python -m launch.study maniskill.maniskill_speed --task pick_my --image-sizes 224   # personalized_maniskill

One process, every thread pool capped at one thread before SAPIEN loads (recorded with the figures). A step is
one 20 Hz control step of CPU PhysX plus one lavapipe render of the base camera and Embodia's adapter (for the
personalized task the render also reads back depth and segmentation, as that env always does). Writes
``speed.json`` to ``--out`` and prints a markdown table.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.thread_pools import check_thread_pools, limit_threads


def time_steps(task: str, image_size: int, steps: int, warmup: int, repeats: int, seed: int) -> dict:
    """Median steps/s (and cores busy) over ``repeats`` blocks of ``steps`` random-action steps after a warm-up."""
    import numpy as np

    from envs.manipulation.maniskill import PERSONAL_TASKS
    from envs.manipulation.maniskill.env import ManiSkillEnv
    from envs.manipulation.maniskill.personalized import PersonalizedManiSkillEnv

    if task in PERSONAL_TASKS:
        env: ManiSkillEnv = PersonalizedManiSkillEnv(task, {"image_size": image_size, "max_steps": 1000})
    else:
        env = ManiSkillEnv(task, {"image_size": image_size, "max_steps": 10_000})
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    low, high = env.action_space.low, env.action_space.high

    def block(n: int) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            env.step(rng.uniform(low, high).astype(np.float32))
        wall = time.perf_counter() - t0
        return n / wall, (time.process_time() - c0) / wall

    block(warmup)
    runs = [block(steps) for _ in range(repeats)]
    env.close()
    return {"task": task, "image_size": image_size, "steps": steps, "repeats": [r for r, _ in runs],
            "steps_per_second": statistics.median(r for r, _ in runs),
            "cpu_per_wall": statistics.median(c for _, c in runs)}


@main_guard
def main(argv: list[str] | None = None) -> int:
    from envs.manipulation.maniskill import PERSONAL_TASKS, TASK_IDS

    p = ArgumentParser(prog="launch.study maniskill.maniskill_speed", description=__doc__.splitlines()[0])
    p.add_argument("--task", default="PickCube-v1", help="a maniskill task, or pick_my (personalized_maniskill)")
    p.add_argument("--image-sizes", default="128,224", help="comma-separated camera sizes (pixels)")
    p.add_argument("--steps", type=int, default=100, min=1, max=1_000_000, help="timed steps per repeat")
    p.add_argument("--warmup", type=int, default=10, min=0, max=1_000_000)
    p.add_argument("--repeats", type=int, default=3, min=1, max=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", writes="folder", type=Path, default=Path("runs/maniskill_speed"))
    args = p.parse_args(argv)
    if args.task not in TASK_IDS + PERSONAL_TASKS:
        raise choice_error("task", args.task, list(TASK_IDS + PERSONAL_TASKS))
    try:
        sizes = [int(s) for s in args.image_sizes.split(",") if s]
    except ValueError as exc:
        raise ConfigError(f"--image-sizes must be comma-separated integers, got {args.image_sizes!r}") from exc
    if not sizes or any(not 16 <= n <= 512 for n in sizes):
        raise ConfigError(f"--image-sizes must be integers in [16, 512], got {args.image_sizes!r}")
    limit_threads(1)
    load0 = os.getloadavg()
    rows = [time_steps(args.task, n, args.steps, args.warmup, args.repeats, args.seed) for n in sizes]
    pools = check_thread_pools(1)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "speed.json", {
        "rows": rows, "thread_pools": pools, "loadavg_start": load0, "loadavg_end": os.getloadavg(),
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} cores",
        "finished_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    print("| task | image | steps/s (median) | per repeat | cores busy |\n|---|---:|---:|---|---:|")
    for r in rows:
        print(f"| {r['task']} | {r['image_size']}² | {r['steps_per_second']:.1f} | "
              f"{' / '.join(f'{x:.1f}' for x in r['repeats'])} | {r['cpu_per_wall']:.2f} |")
    print(f"load average {load0[0]:.1f} → {os.getloadavg()[0]:.1f}; thread pools: "
          + ", ".join(f"{p['api']} {p['threads']}" for p in pools))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
