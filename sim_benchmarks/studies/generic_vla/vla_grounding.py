"""Where does the generic VLA think the described object is? First-frame grounding of its head.

    python -m sim_benchmarks.studies.generic_vla.vla_grounding --episodes 30 --seed 10000 --out runs/vla_grounding

An object-memory head (the shipped one) localises the described object on the first frame and remembers its table
position; older heads have a training-only auxiliary output instead (the object's xy offset from the gripper).
Either way :meth:`GenericVLA.predict_target_offset` gives the offset. On the
first frame of each episode (nothing has moved yet) this benchmark adds that offset to the gripper position and
asks which object of the scene is nearest: the described target, a same-category look-alike (``distractor``),
another object (``clutter``, the anchor or receptacle). Run on train- and test-split instances side by side, it
separates "the policy looks at the wrong object" from "the policy looks at the right one but fails to grasp it",
without stepping the simulator. Wilson 95 % intervals on the target share.
"""

from __future__ import annotations

import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from envs.manipulation.env import make_env
from envs.manipulation.tasks import GENERIC_TASKS
from envs.statistics import wilson_ci
from policies.vla.checkpoint import DEFAULT_CHECKPOINT
from policies.vla.generic import GenericVLA
from sim_benchmarks.cli import ArgumentParser, main_guard

SPLITS = ("train", "test")


def first_frame_grounding(policy: GenericVLA, task: str, split: str, episodes: int, seed: int) -> dict[str, Any]:
    """Counts of the role of the object nearest the head's predicted target, over seeded first frames."""
    env = make_env(task, {"split": split})
    roles: Counter[str] = Counter()
    errors = []
    try:
        for i in range(episodes):
            obs, info = env.reset(seed=seed + i)
            policy.reset(obs["instruction"], info)
            offset = policy.predict_target_offset(obs)
            if offset is None:
                raise ConfigError("this checkpoint has neither an object memory nor an auxiliary target output; "
                                  "nothing to read")
            state = env.unwrapped.privileged_state()  # privileged: only to score the prediction
            guess = np.asarray(obs["ee_state"], float)[:2] + offset
            objects = [(float(np.linalg.norm(np.asarray(o["position"])[:2] - guess)), o["role"])
                       for o in state["objects"]]
            roles[min(objects)[1]] += 1
            errors.append(float(np.linalg.norm(np.asarray(state["target"]["position"])[:2] - guess)))
    finally:
        env.close()
    k = roles.get("target", 0)
    lo, hi = wilson_ci(k, episodes)
    return {"task": task, "split": split, "episodes": episodes, "nearest": dict(roles), "target": k,
            "target_share": k / episodes, "ci95": [lo, hi], "median_target_error_m": float(np.median(errors))}


def markdown(rows: list[dict[str, Any]]) -> str:
    """One row per (task, split)."""
    lines = ["| task | split | nearest = described object [95 % CI] | look-alike | other object | "
             "median error to the described object |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        n = r["episodes"]
        other = n - r["target"] - r["nearest"].get("distractor", 0)
        lines.append(f"| {r['task']} | {r['split']} | {r['target']}/{n} [{100 * r['ci95'][0]:.0f}–"
                     f"{100 * r['ci95'][1]:.0f} %] | {r['nearest'].get('distractor', 0)} | {other} | "
                     f"{100 * r['median_target_error_m']:.1f} cm |")
    return "\n".join(lines)


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.generic_vla.vla_grounding", description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=10000)
    p.add_argument("--tasks", default=",".join(GENERIC_TASKS))
    p.add_argument("--splits", default="train,test")
    p.add_argument("--out", writes="folder", type=Path, default=Path("runs/vla_grounding"))
    p.add_argument("--no-attributes", action="store_true",
                   help="ignore the checkpoint's attribute detectors (the head's own grounding alone)")
    args = p.parse_args(argv)
    try:
        if args.episodes < 1:
            raise ConfigError(f"--episodes must be a positive integer, got {args.episodes}")
        tasks = [t for t in args.tasks.split(",") if t]
        for t in tasks:
            if t not in GENERIC_TASKS:
                raise choice_error("generic task", t, sorted(GENERIC_TASKS))
        splits = [s for s in args.splits.split(",") if s]
        for s in splits:
            if s not in SPLITS:
                raise choice_error("split", s, SPLITS)
        torch.set_num_threads(1)
        policy = GenericVLA.from_checkpoint(args.checkpoint, attributes=not args.no_attributes)
        rows = [first_frame_grounding(policy, t, s, args.episodes, args.seed) for t in tasks for s in splits]
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python -m sim_benchmarks.studies.generic_vla.vla_grounding " + shlex.join(
        sys.argv[1:] if argv is None else argv)
    write_json_atomic(args.out / "vla_grounding.json", {"schema": "embodia.vla_grounding/1", "command": command,
                                                        "checkpoint": str(args.checkpoint),
                                                        "attributes": not args.no_attributes, "rows": rows})
    table = markdown(rows)
    (args.out / "vla_grounding.md").write_text(f"`{command}`\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
