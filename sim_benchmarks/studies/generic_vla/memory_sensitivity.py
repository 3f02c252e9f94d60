"""How far an object-memory head's action follows its remembered target: one definition for every suite.

    python -m launch.study generic_vla.memory_sensitivity --checkpoint checkpoints/generic_vla --episodes 3 \\
        --seed 70000 --out runs/sens_simpler

The scripted expert drives generic Personalized-SIMPLER episodes; at every frame before the expert first closes the
gripper the remembered target (the head's own first-frame estimate) is moved by ``SHIFT`` (1 cm) along x and
along y, and the head's first predicted step is read again: the **sensitivity** is the mean of the x step's change
for the x move and the y step's change for the y move, divided by 1 cm (1.0 = the action follows the move fully).

An expert's step is clipped (SIMPLER: 3 cm per axis; VLABench: a 5 cm step along the 3-D way to its waypoint), so
far from the target even the expert's label barely moves when the target does: a perfect imitator scores below 1 on
such frames. The same move is therefore applied to the expert (a copy of its phase machine reading the moved target)
and each frame also gets the **expert's sensitivity**. Summaries (:func:`summarise`, shared with
``vlabench.vlabench_base_probe``): the mean over all pre-grasp frames, over frames within ``NEAR`` of the target, and
over the *unsaturated* frames — those where the expert's label follows the move fully on both axes (expert
sensitivity ≥ ``FOLLOWS``), where a perfect imitator scores 1 whatever the suite's clip — with the expert's own mean
beside each. Writes ``sensitivity.json``.
"""

from __future__ import annotations

import copy
import shlex
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.results_folder import check_out_dir

SHIFT = 0.01  # metres: the remembered target's move
NEAR = 0.05  # metres: frames whose target is this close to the hand (xy) are reported apart
FOLLOWS = 0.99  # an expert sensitivity at least this high on both axes = an unsaturated frame


def head_response(policy: Any, obs: Any, base: np.ndarray) -> tuple[float, float]:
    """The head's first-step change along x for a 1 cm x move of its remembered target, and along y for a y move,
    each divided by the move; ``base`` is its unmoved chunk."""
    dx = policy.predict_chunk(obs, np.array([[SHIFT, 0.0], [0.0, 0.0]]))[0, 0] - base[0, 0]
    dy = policy.predict_chunk(obs, np.array([[0.0, SHIFT], [0.0, 0.0]]))[0, 1] - base[0, 1]
    return float(dx / SHIFT), float(dy / SHIFT)


def expert_response(label: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float]:
    """The same for the expert: ``label(move)`` is its xy label with the target moved by ``move`` (memory frame)."""
    base = label(np.zeros(2))
    dx = label(np.array([SHIFT, 0.0]))[0] - base[0]
    dy = label(np.array([0.0, SHIFT]))[1] - base[1]
    return float(dx / SHIFT), float(dy / SHIFT)


def frame_row(head: tuple[float, float], expert: tuple[float, float], to_target_xy: np.ndarray) -> dict[str, Any]:
    """One pre-grasp frame's sensitivities (per axis and mean) and the hand's xy distance to the target."""
    return {"sensitivity": (head[0] + head[1]) / 2, "head_xy": list(head),
            "expert_sensitivity": (expert[0] + expert[1]) / 2, "expert_xy": list(expert),
            "target_dist": float(np.linalg.norm(to_target_xy))}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean head and expert sensitivity over all pre-grasp frames, near the target and on unsaturated frames."""
    sens = [r for r in rows if "sensitivity" in r]
    if not sens:
        return {"frames": 0}

    def part(sel: list[dict[str, Any]]) -> dict[str, Any]:
        if not sel:
            return {"frames": 0, "mean": None, "expert_mean": None}
        out = {"frames": len(sel), "mean": round(float(np.mean([r["sensitivity"] for r in sel])), 3)}
        if all("expert_sensitivity" in r for r in sel):
            out["expert_mean"] = round(float(np.mean([r["expert_sensitivity"] for r in sel])), 3)
        return out

    near = [r for r in sens if r["target_dist"] < NEAR]
    unsat = [r for r in sens if "expert_xy" in r and min(r["expert_xy"]) >= FOLLOWS]
    every, close = part(sens), part(near)
    return {"frames": every["frames"], "mean": every["mean"], "median": round(float(np.median(
        [r["sensitivity"] for r in sens])), 3), "expert_mean": every.get("expert_mean"),
        "near_frames": close["frames"], "near_mean": close["mean"], "near_expert_mean": close.get("expert_mean"),
        "unsaturated": part(unsat)}


class _MovedTarget:
    """Stands in for the env of a copied SIMPLER expert: the privileged state with the target moved in xy."""

    def __init__(self, env: Any, move: np.ndarray) -> None:
        self.env, self.move = env, move

    def privileged_state(self) -> dict[str, Any]:
        ps = self.env.privileged_state()
        target = dict(ps["target"])
        target["position"] = np.asarray(target["position"], float) + np.array([*self.move, 0.0])
        return {**ps, "target": target, "objects": [target, *ps["objects"][1:]]}


def _simpler_label(expert: Any, env: Any, obs: Any, move: np.ndarray) -> np.ndarray:
    """The SIMPLER expert's xy label had the target stood ``move`` (world xy, the head's memory frame) away."""
    twin = copy.copy(expert)  # the phase machine's state is plain values: a shallow copy plans without moving it
    twin.env = _MovedTarget(env, move)
    return twin.act(obs)[:2]


def simpler_rows(policy: Any, task: str, episodes: int, seed: int) -> list[dict[str, Any]]:
    """Expert-driven generic Personalized-SIMPLER episodes of ``task``: one row per pre-grasp frame."""
    from envs.manipulation.env import make_env
    from policies.manipulation.scripted_expert import ScriptedExpert

    env = make_env(task, {})
    rows: list[dict[str, Any]] = []
    try:
        for i in range(episodes):
            obs, info = env.reset(seed=seed + i)
            expert = ScriptedExpert(env, seed=seed + i)
            expert.reset(obs["instruction"], {**info, "policy_seed": seed + i})
            policy.reset(obs["instruction"], {**info, "policy_seed": seed + i})
            while True:
                if expert.phase in ("approach", "descend"):
                    label = partial(_simpler_label, expert, env.unwrapped, obs)
                    chunk = policy.predict_chunk(obs)
                    ps = env.unwrapped.privileged_state()
                    to_target = np.asarray(ps["target"]["position"])[:2] - np.asarray(ps["ee_position"])[:2]
                    rows.append({"episode": f"{task}/{seed + i}",
                                 **frame_row(head_response(policy, obs, chunk), expert_response(label), to_target)})
                action = expert.act(obs)
                if expert.phase not in ("approach", "descend") and action[6] > 0:
                    break  # the grasp: the frames after it do not depend on the remembered target
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    break
    finally:
        env.close()
    return rows


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, probe the checkpoint on generic Personalized-SIMPLER, write sensitivity.json."""
    from envs.manipulation.tasks import GENERIC_TASKS
    from policies.vla.checkpoint_files import read_manifest
    from policies.vla.generic import GenericVLA

    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="checkpoints/generic_vla", help="object-memory generic-VLA checkpoint")
    ap.add_argument("--episodes", type=int, default=3, help="expert-driven episodes per task")
    ap.add_argument("--seed", type=int, default=70000, help="first env seed (episode i uses seed + i)")
    ap.add_argument("--tasks", default=",".join(GENERIC_TASKS), help="comma-separated generic SIMPLER tasks")
    ap.add_argument("--out", type=Path, required=True, help="results folder (created; must be empty or absent)")
    args = ap.parse_args(argv)
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    tasks = [t for t in args.tasks.split(",") if t]
    for t in tasks:
        if t not in GENERIC_TASKS:
            raise choice_error("task", t, sorted(GENERIC_TASKS))
    check_out_dir(args.out)
    policy = GenericVLA.from_checkpoint(args.checkpoint)
    if not policy.cfg.memory:
        raise ConfigError(f"{args.checkpoint} has no object memory: nothing to move (valid: an object-memory head)")
    t0 = time.time()
    rows = []
    for task in tasks:
        rows += simpler_rows(policy, task, args.episodes, args.seed)
        print(f"  probed {task}", file=sys.stderr, flush=True)
    result = {"command": "python -m launch.study generic_vla.memory_sensitivity "
                         + shlex.join(argv if argv is not None else sys.argv[1:]),
              "checkpoint": str(args.checkpoint), "weights_sha256": read_manifest(args.checkpoint)["weights_sha256"],
              "seed": args.seed, "episodes": args.episodes * len(tasks), "sensitivity": summarise(rows),
              "wall_s": round(time.time() - t0, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "sensitivity.json", {**result, "rows": rows})
    print(result["sensitivity"])
    return result


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point: exit 2 with one line on bad input."""
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
