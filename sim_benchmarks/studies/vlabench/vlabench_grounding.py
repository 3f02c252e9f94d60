"""Multi-view vs single-view grounding of "my" object on Personalized-VLABench, per track and task.

    python -m launch.study vlabench.vlabench_grounding --episodes 50 --seed 0 --out results/vlabench_grounding

At the first step of each seeded episode, multi-view VAP detects and matches the personal object in the left,
right and front views and fuses the evidence in 3-D (``policies.vap.multiview``). One pass gives every view's own
choice and the fused choice, on the very same frames, so the comparison is paired. *Correct* = the chosen mask's
majority body id in the simulator's segmentation is the personal object (privileged, used only to score).
Grounding does not depend on the base policy, so the scripted expert sits underneath (it never sees the choice).
Writes ``grounding.json`` (per-episode rows and totals) and ``grounding.md`` (Wilson 95 % CIs, and a bootstrap
CI of the paired difference fused − best single view).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from envs.statistics import wilson_ci
from sim_benchmarks import registry
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.options import parse_options
from sim_benchmarks.registry import PolicyContext
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.studies.aux.results import bootstrap_ci

SUITE = "personalized_vlabench"
VIEWS = ("left", "right", "front")
CHOICES = (*VIEWS, "fused")
PERSONAL_TRACKS = ("personal", "cross_instance", "unseen_texture")  # tracks whose instruction says "my"


def ground_cell(track: str, task: str, episodes: int, seed: int,
                vap_options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per episode: whether each view's choice and the fused choice is the personal object."""
    suite = registry.suites()[SUITE]
    env = suite.make_env(task, {"track": track, "privileged": True})
    ctx = PolicyContext(SUITE, task, "vap", seed, env, {"vap_base": "scripted_expert", "vap_views": ",".join(VIEWS),
                                                        **(vap_options or {})})
    policy = registry.policies()["vap"].factory(ctx)
    rows = []
    try:
        for i in range(episodes):
            obs, info = env.reset(seed=seed + i)
            t0 = time.perf_counter()
            policy.reset(obs["instruction"], {**info, "policy_seed": seed + i})
            policy.act(obs)
            rec = policy.episode_info()
            rows.append({"seed": seed + i, **{c: bool(rec.get(f"grounding_correct_{c}")) for c in CHOICES},
                         "prompted": bool(rec.get("grounding_correct")),
                         "views_seen": rec.get("grounding_views_seen"),
                         "height_rejected": rec.get("height_rejected", 0),
                         "first_step_ms": round(1000 * (time.perf_counter() - t0), 1)})
    finally:
        env.close()
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy with Wilson CIs per choice, and fused − best single view as a paired bootstrap CI."""
    n = len(rows)
    out: dict[str, Any] = {"episodes": n}
    for c in CHOICES:
        k = sum(r[c] for r in rows)
        out[c] = {"correct": k, "accuracy": k / max(n, 1), "ci95": list(wilson_ci(k, n))}
    best = max(VIEWS, key=lambda v: out[v]["correct"])
    diff = np.array([float(r["fused"]) - float(r[best]) for r in rows])
    mean, lo, hi = bootstrap_ci(diff) if n > 1 else (float(diff.mean()) if n else 0.0, float("nan"), float("nan"))
    out["best_single_view"] = best
    out["fused_minus_best"] = {"mean": mean, "ci95": [lo, hi]}
    out["first_step_ms_median"] = float(np.median([r["first_step_ms"] for r in rows])) if rows else None
    return out


def _pct(cell: dict[str, Any]) -> str:
    lo, hi = cell["ci95"]
    return f"{100 * cell['accuracy']:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"


def markdown(result: dict[str, Any]) -> str:
    """The results table: one row per track × task plus a row per track over all tasks."""
    lines = ["| track | task | episodes | left | right | front | **fused** | fused − best view (pp, 95 % CI) |",
             "|---|---|---|---|---|---|---|---|"]
    for track, cells in result["tracks"].items():
        for task, s in {**cells["per_task"], "**all**": cells["all"]}.items():
            d = s["fused_minus_best"]
            lo, hi = d["ci95"]
            lines.append(f"| {track} | {task} | {s['episodes']} | " + " | ".join(_pct(s[c]) for c in VIEWS)
                         + f" | **{_pct(s['fused'])}** | {100 * d['mean']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
                         f" vs {s['best_single_view']} |")
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, ground every track × task, write grounding.json / grounding.md; returns the result."""
    from envs.manipulation.vlabench.tasks import PICK_PLACE_TASKS, TASKS

    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=50, help="episodes per track and task")
    ap.add_argument("--seed", type=int, default=0, help="first episode seed (episode i uses seed + i)")
    ap.add_argument("--tracks", default=",".join(PERSONAL_TRACKS), help="comma-separated personal tracks")
    ap.add_argument("--tasks", default=",".join(PICK_PLACE_TASKS),
                    help="comma-separated tasks (default: the three pick-and-place tasks the results page reports)")
    ap.add_argument("--policy-option", action="append", metavar="KEY=VALUE",
                    help="vap policy option, e.g. vap_height_check=true (repeatable)")
    ap.add_argument("--out", writes="folder", type=Path, required=True,
                    help="results folder (created; must be empty or absent)")
    args = ap.parse_args(argv)
    vap_options = parse_options(args.policy_option, "--policy-option")
    registry.check_policy_options(SUITE, vap_options)
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    tracks = [t for t in args.tracks.split(",") if t]
    tasks = [t for t in args.tasks.split(",") if t]
    for t in tracks:
        if t not in PERSONAL_TRACKS:
            raise choice_error("track", t, PERSONAL_TRACKS)
    for t in tasks:
        if t not in TASKS:
            raise choice_error("task", t, sorted(TASKS))
    check_out_dir(args.out)
    result: dict[str, Any] = {"command": "python -m launch.study vlabench.vlabench_grounding "
                                         + " ".join(argv if argv is not None else sys.argv[1:]),
                              "seed": args.seed, "episodes_per_cell": args.episodes, "tracks": {}}
    t0 = time.time()
    for track in tracks:
        per_task, everything = {}, []
        for task in tasks:
            rows = ground_cell(track, task, args.episodes, args.seed, vap_options)
            per_task[task] = {**summarise(rows), "rows": rows}
            everything += rows
            print(f"  {track}/{task}: fused {_pct(per_task[task]['fused'])}, front {_pct(per_task[task]['front'])}",
                  file=sys.stderr, flush=True)
        result["tracks"][track] = {"per_task": per_task, "all": summarise(everything)}
    result["wall_s"] = round(time.time() - t0, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "grounding.json", result)
    table = markdown(result)
    (args.out / "grounding.md").write_text(table + "\n")
    print(table)
    return result


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point: exit 2 with one line on bad input."""
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
