"""First-step grounding with and without the candidate height check, paired on the very same scenes.

    python -m launch.study vap.height_check --suite personalized_simpler --seed 0 --table-seeds --episodes 50 \
        --out runs/height_check_table
    python -m launch.study vap.height_check --suite personalized_vlabench --seed 0 --episodes 50 --out runs/hc_vb

Every scene is grounded first with the narrowest margin (the first of ``--margins``), counting the candidates the
check finds out of range. A check that flags nothing leaves VAP's candidate list untouched, so on such a scene every
wider margin, and no check at all, grounds exactly as that first pass; only flagged scenes are grounded again with
the other margins and without the check. Scenes run scene-major (episode i of every task, then i + 1), and the
results are rewritten after each round, so a run cut short still covers every task alike. Correct = the chosen
mask's majority body is the personal object (SIMPLER: VAP's single view; VLABench: the fused choice over the left,
right and front views). Writes ``height_check.json`` and ``height_check.md`` (Wilson 95 % CIs; paired bootstrap CI
of each margin − no check).
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
from sim_benchmarks.jobs import derive_seed
from sim_benchmarks.registry import PolicyContext
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.studies.aux.results import bootstrap_ci

SUITES = ("personalized_simpler", "personalized_vlabench")
OFF = "off"


def _variant(margin: float) -> str:
    return f"margin {margin:g} m"


def _policy(suite: str, env: Any, task: str, options: dict[str, Any]) -> Any:
    opts = {"vap_base": "scripted_expert", **options}  # grounding never depends on the base
    if suite == "personalized_vlabench":
        opts["vap_views"] = "left,right,front"
    return registry.policies()["vap"].factory(PolicyContext(suite, task, "vap", 0, env, opts))


def _ground(policy: Any, obs: dict[str, Any], info: dict[str, Any], seed: int, fused: bool) -> tuple[bool, int]:
    """Whether the first-step choice is my object, and how many candidates the height check flagged."""
    policy.reset(obs["instruction"], {**info, "policy_seed": seed})
    check = policy.height_check
    before = check.flagged if check is not None else 0
    policy.act(obs)
    rec = policy.episode_info()
    correct = rec.get("grounding_correct_fused") if fused else rec.get("grounding_correct")
    return bool(correct), (check.flagged - before) if check is not None else 0


def summarise(rows: list[dict[str, Any]], variants: list[str]) -> dict[str, Any]:
    """Correct counts with Wilson CIs per variant, and each margin − no check as a paired bootstrap CI."""
    n = len(rows)
    out: dict[str, Any] = {"scenes": n, "flagged_scenes": sum(r["flagged"] > 0 for r in rows)}
    for v in variants:
        k = sum(r[v] for r in rows)
        out[v] = {"correct": k, "accuracy": k / max(n, 1), "ci95": list(wilson_ci(k, n))}
        if v != OFF and n > 1:
            mean, lo, hi = bootstrap_ci(np.array([float(r[v]) - float(r[OFF]) for r in rows]))
            out[v]["minus_off"] = {"mean": mean, "ci95": [lo, hi]}
    return out


def markdown(result: dict[str, Any]) -> str:
    """One row per task and one over all tasks: grounding per variant, flagged scenes, paired differences."""
    variants = result["variants"]
    head = " | ".join(variants)
    lines = [f"| task | scenes | flagged | {head} | " + " | ".join(f"{v} − off (pp)" for v in variants if v != OFF)
             + " |", "|" + "---|" * (3 + 2 * len(variants) - 1)]
    for task, s in {**result["per_task"], "**all**": result["all"]}.items():
        cells = []
        for v in variants:
            lo, hi = s[v]["ci95"]
            cells.append(f"{s[v]['correct']}/{s['scenes']} = {100 * s[v]['accuracy']:.1f} % [{100 * lo:.0f}, "
                         f"{100 * hi:.0f}]")
        diffs = []
        for v in variants:
            if v != OFF:
                d = s[v].get("minus_off", {"mean": 0.0, "ci95": [float("nan")] * 2})
                diffs.append(f"{100 * d['mean']:+.1f} [{100 * d['ci95'][0]:+.1f}, {100 * d['ci95'][1]:+.1f}]")
        lines.append(f"| {task} | {s['scenes']} | {s['flagged_scenes']} | " + " | ".join(cells) + " | "
                     + " | ".join(diffs) + " |")
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, ground every scene (see the module docstring), write the results; returns them."""
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="personalized_simpler", help=f"one of {', '.join(SUITES)}")
    ap.add_argument("--episodes", type=int, default=50, help="scenes per task")
    ap.add_argument("--seed", type=int, default=0, help="scene i of a task uses seed + i (see --table-seeds)")
    ap.add_argument("--table-seeds", action="store_true",
                    help="the scenes launch.eval --seed SEED runs (derived seeds), not SEED + i")
    ap.add_argument("--margins", default="0.01,0.02,0.03", help="comma-separated metres (narrowest first is used)")
    ap.add_argument("--tasks", default="", help="comma-separated tasks (default: the suite's default tasks)")
    ap.add_argument("--out", type=Path, required=True, help="results folder (created; must be empty or absent)")
    args = ap.parse_args(argv)
    registry.load_all()
    if args.suite not in SUITES:
        raise choice_error("suite", args.suite, SUITES)
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    try:
        margins = sorted(float(m) for m in args.margins.split(",") if m.strip())
    except ValueError:
        raise ConfigError(f"--margins must be comma-separated numbers of metres, got {args.margins!r}") from None
    if not margins or not all(0 <= m <= 0.2 for m in margins):
        raise ConfigError(f"--margins must be numbers of metres in [0, 0.2], got {args.margins!r}")
    spec = registry.suites()[args.suite]
    tasks = [t for t in args.tasks.split(",") if t] or list(spec.default_tasks or spec.tasks)
    for t in tasks:
        if t not in spec.tasks:
            raise choice_error(f"task of {args.suite}", t, list(spec.tasks))
    check_out_dir(args.out)
    fused = args.suite == "personalized_vlabench"
    variants = [_variant(m) for m in margins] + [OFF]
    options = {_variant(m): {"vap_height_check": True, "vap_height_margin": m} for m in margins} | {OFF: {}}
    env_options = {"privileged": True, **({"track": "personal"} if fused else {})}
    envs = {t: spec.make_env(t, env_options) for t in tasks}
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in tasks}
    result: dict[str, Any] = {"command": "python -m launch.study vap.height_check "
                                         + " ".join(argv if argv is not None else sys.argv[1:]),
                              "suite": args.suite, "seed": args.seed, "table_seeds": args.table_seeds,
                              "variants": variants}
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        policies = {t: {v: _policy(args.suite, envs[t], t, options[v]) for v in variants} for t in tasks}
        for i in range(args.episodes):
            for t in tasks:
                seed = derive_seed(args.seed, args.suite, t, i) if args.table_seeds else args.seed + i
                obs, info = envs[t].reset(seed=seed)
                first, flagged = _ground(policies[t][variants[0]], obs, info, seed, fused)
                row = {"episode": i, "seed": seed, "flagged": flagged, variants[0]: first}
                for v in variants[1:]:
                    row[v] = first if flagged == 0 else _ground(policies[t][v], obs, info, seed, fused)[0]
                rows[t].append(row)
            result.update(per_task={t: {**summarise(r, variants), "rows": r} for t, r in rows.items()},
                          all=summarise([x for r in rows.values() for x in r], variants),
                          scenes_per_task=i + 1, wall_s=round(time.time() - t0, 1))
            write_json_atomic(args.out / "height_check.json", result)  # after every round: a cut run keeps it
            print(f"  {i + 1} scene(s) per task: " + ", ".join(f"{v} {result['all'][v]['correct']}"
                                                               for v in variants), file=sys.stderr, flush=True)
    finally:
        for env in envs.values():
            env.close()
    table = markdown(result)
    (args.out / "height_check.md").write_text(f"`{result['command']}`\n\n{table}\n")
    print(table)
    return result


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point: exit 2 with one line on bad input."""
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
