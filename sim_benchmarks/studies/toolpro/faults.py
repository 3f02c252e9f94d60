"""Task success and exactly-once effects under injected server errors and crashes, over the real MCP transport.

    python -m sim_benchmarks.studies.toolpro.faults --seeds 0,1,2 --error-rate 0.1 --crash-rate 0.03 --seed 0

Every workflow task (or ``--tasks``) runs once per database seed under each policy (``toolpro``, ``stepwise``,
``program_only``) against site processes that answer 503s with probability ``error_rate`` and SIGKILL themselves
on a state-modifying call with probability ``crash_rate`` (before it touches the database or right after its
commit). The agents restart a lost site and resend (stepwise: the same call with the same key; program: the same
run id, while the run log grows). Per episode: *success* = the agent answered ``ok`` and the final database equals
the task's reference; *exactly-once* = the final database equals the reference (no extra, missing or changed row:
no write duplicated or lost), whatever the agent answered. Writes ``NAME.json`` (``--name``, default ``faults``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.toolpro import connection
from agents.toolpro.graph import ToolProPolicy
from envs.atomic_io import write_json_atomic
from envs.services.env import WorkflowEnv, WorkflowEnvOptions
from envs.services.workflows import TASKS, get_task
from envs.statistics import wilson_ci
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.studies.aux.results import mean_ci
from sim_benchmarks.studies.toolpro.sweep import parse_numbers

MODES = {"toolpro": "auto", "stepwise": "stepwise", "program_only": "program"}


def run_episodes(tasks: list[str], seeds: list[int], options: WorkflowEnvOptions) -> list[dict[str, Any]]:
    """One record per (task, database seed, policy); the policies take turns on each freshly reset database."""
    policies = {name: ToolProPolicy(mode) for name, mode in MODES.items()}  # type: ignore[arg-type]
    records = []
    for task in tasks:
        env = WorkflowEnv(task, options)
        try:
            for seed in seeds:
                for name, policy in policies.items():
                    obs, _ = env.reset(seed=seed)
                    obs["run_id"] = f"{name}-{task}-{seed}"
                    answer = policy.act(obs)
                    _, _, _, _, info = env.step(answer)
                    rec = {"task": task, "seed": seed, "policy": name, **policy.episode_info(),
                           "answered": info["answered"], "extra_rows": info["extra_rows"],
                           "missing_rows": info["missing_rows"], "changed_rows": info["changed_rows"]}
                    if answer.get("status") != "ok":
                        rec["error"] = answer.get("error")
                    rec["exactly_once"] = info["state_diff"] == 0
                    rec["success"] = rec["exactly_once"] and info["answered"]
                    records.append(rec)
        finally:
            env.close()
        done = [r for r in records if r["task"] == task]
        print(f"{task}: " + ", ".join(f"{p} {sum(r['success'] for r in done if r['policy'] == p)}/{len(seeds)}"
                                      for p in MODES) + f"; restarts {sum(r['server_restarts'] for r in done)}",
              flush=True)
    return records


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per policy: success and exactly-once counts with 95 % Wilson CIs, row damage, restarts, latency."""
    out = {}
    for name in MODES:
        rs = [r for r in records if r["policy"] == name]
        n, ok, once = len(rs), sum(r["success"] for r in rs), sum(r["exactly_once"] for r in rs)
        out[name] = {"episodes": n, "success": ok, "success_ci95": list(wilson_ci(ok, n)),
                     "exactly_once": once, "exactly_once_ci95": list(wilson_ci(once, n)),
                     "extra_rows": sum(r["extra_rows"] for r in rs), "missing_rows": sum(r["missing_rows"] for r in rs),
                     "changed_rows": sum(r["changed_rows"] for r in rs),
                     "server_restarts": sum(r["server_restarts"] for r in rs),
                     "episodes_with_restart": sum(r["server_restarts"] > 0 for r in rs),
                     "journal_replayed": sum(r["journal_replayed"] for r in rs),
                     "program_share": float(np.mean([r["program"] for r in rs])) if rs else float("nan"),
                     "latency_s": mean_ci([r["latency_s"] for r in rs]),
                     "failed": [f"{r['task']}/{r['seed']}" for r in rs if not r["success"]]}
    return out


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.toolpro.faults", description=__doc__)
    p.add_argument("--tasks", default="all", help="comma-separated workflow tasks, or 'all'")
    p.add_argument("--seeds", default="0,1,2", help="database seeds, one episode per task, seed and policy")
    p.add_argument("--error-rate", type=float, default=0.1)
    p.add_argument("--crash-rate", type=float, default=0.03)
    p.add_argument("--rtt", type=float, default=0.0, help="injected round-trip time, ms")
    p.add_argument("--seed", type=int, default=0, help="fault seed")
    p.add_argument("--name", default="faults", help="output file NAME.json")
    p.add_argument("--out", writes="folder", type=Path, default=Path("docs/results/toolpro"))
    args = p.parse_args(argv)
    tasks = list(TASKS) if args.tasks == "all" else [get_task(t).name for t in args.tasks.split(",")]
    seeds = parse_numbers(args.seeds, "--seeds")
    # from_options checks the declared ranges as --env-option does (the constructor alone does not)
    options = WorkflowEnvOptions.from_options({"rtt_ms": args.rtt, "error_rate": args.error_rate,
                                               "crash_rate": args.crash_rate, "fault_seed": args.seed})
    t0 = time.perf_counter()
    try:
        records = run_episodes(tasks, seeds, options)
    finally:
        connection.close_all()
    summary = summarise(records)
    command = (f"python -m sim_benchmarks.studies.toolpro.faults --tasks {args.tasks} --seeds {args.seeds} "
               f"--error-rate {args.error_rate:g} --crash-rate {args.crash_rate:g} --rtt {args.rtt:g} "
               f"--seed {args.seed}" + (f" --name {args.name}" if args.name != "faults" else ""))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / f"{args.name}.json", {"command": command, "tasks": tasks, "seeds": seeds,
                                                 "policies": summary, "wall_s": time.perf_counter() - t0,
                                                 "records": records})
    for name, s in summary.items():
        print(f"{name}: success {s['success']}/{s['episodes']} [{s['success_ci95'][0]:.3f}-{s['success_ci95'][1]:.3f}]"
              f", exactly-once {s['exactly_once']}/{s['episodes']} [{s['exactly_once_ci95'][0]:.3f}-"
              f"{s['exactly_once_ci95'][1]:.3f}], restarts {s['server_restarts']}, extra/missing/changed rows "
              f"{s['extra_rows']}/{s['missing_rows']}/{s['changed_rows']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
