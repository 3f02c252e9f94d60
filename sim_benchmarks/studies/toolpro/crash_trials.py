"""Exactly-once under crashes: kill the program executor at random points, restart it, replay, check the database.

    python -m sim_benchmarks.studies.toolpro.crash_trials --trials 1000 --seed 0 --out docs/results/toolpro

Each trial picks a write-heavy workflow task and a database seed, counts the crash points of a clean run (before
each state-modifying call, inside its transaction before commit, after commit), then runs the program in a forked
child that SIGKILLs itself at a random point (and, with probability 1/2, kills its first restart too), then runs it
once more to completion with the same run id. The database must equal the task's reference final state: a
duplicated effect shows up as an extra or changed row, a lost one as a missing or changed row.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import write_json_atomic
from envs.services.programs.executor import ProgramExecutor
from envs.services.runtime import ServiceRuntime, create_database, reset_database
from envs.services.workflows import TASKS, expected_state, row_diff, state
from envs.statistics import wilson_ci
from policies.toolpro.planner import plan
from sim_benchmarks.cli import ArgumentParser, main_guard, require_positive

TRIAL_TASKS = ("ship_paid_9", "group_flights_6", "trip_1", "basket_8", "triage_tech_high_5", "close_stale_tech_6",
               "group_trip_2")
DB_SEEDS = (0, 1, 2)


class _Counter:
    """A crash hook that counts points, or kills the process at point ``kill_at``."""

    def __init__(self, kill_at: int | None = None) -> None:
        self.kill_at, self.points = kill_at, 0

    def __call__(self, point: str) -> None:
        if self.kill_at is not None and self.points == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        self.points += 1


def _run(db: Path, task: str, run_id: str, hook: _Counter) -> dict[str, Any]:
    runtime = ServiceRuntime(TASKS[task].service, db, crash_hook=hook)
    try:
        return ProgramExecutor(runtime).run(plan(TASKS[task]), run_id)
    finally:
        runtime.close()


def _run_in_child(db: Path, task: str, run_id: str, kill_at: int | None) -> tuple[int, int]:
    """Run the program in a forked process (killed at ``kill_at``); returns (wait status, crash points passed).

    The parent never starts wasmtime or any thread, so forking it is safe.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: no cleanup handlers, exit code only
        os.close(read_fd)
        code = 4
        try:
            hook = _Counter(kill_at)
            out = _run(db, task, run_id, hook)
            os.write(write_fd, str(hook.points).encode())
            code = 0 if out["status"] == "ok" else 3
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 64):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    return status, int(b"".join(chunks) or b"-1")


def run_trials(trials: int, seed: int, folder: Path, naive: bool = False) -> dict[str, Any]:
    """Run the trials; returns the per-trial records. ``naive``: every restart gets a fresh run id (no replay from
    the journals: the control that shows what the journals prevent)."""
    rng = np.random.default_rng(seed)
    dbs = {s: create_database(folder / f"{s}.db", s, 0) for s in ("travel", "orders", "tickets")}
    expected: dict[tuple[str, int], Any] = {}
    points: dict[tuple[str, int], int] = {}
    records = []
    for i in range(trials):
        if True:
            task = TRIAL_TASKS[int(rng.integers(len(TRIAL_TASKS)))]
            db_seed = DB_SEEDS[int(rng.integers(len(DB_SEEDS)))]
            db = dbs[TASKS[task].service]
            key = (task, db_seed)
            if key not in points:  # a clean run: how many crash points, and the reference state
                reset_database(db, TASKS[task].service, db_seed)
                status, points[key] = _run_in_child(db, task, "count", None)
                if status != 0 or points[key] < 1:
                    raise RuntimeError(f"clean run of {task} failed (status {status})")
                expected[key] = expected_state(TASKS[task], db_seed)
            reset_database(db, TASKS[task].service, db_seed)
            run_id = f"trial-{i}"
            kills = [int(rng.integers(points[key]))]
            if rng.random() < 0.5:
                kills.append(int(rng.integers(points[key])))
            statuses = [_run_in_child(db, task, f"{run_id}-{j}" if naive else run_id, k)[0]
                        for j, k in enumerate(kills)]
            final = _run_in_child(db, task, f"{run_id}-final" if naive else run_id, None)[0]
            conn = sqlite3.connect(db)
            diff = row_diff(state(conn), expected[key])
            journaled = int(conn.execute("SELECT COUNT(*) FROM _journal").fetchone()[0])
            conn.close()
            killed = sum(os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGKILL for s in statuses)
            records.append({"trial": i, "task": task, "db_seed": db_seed, "crash_points": points[key],
                            "kill_at": kills, "killed": killed, "final_exit": os.WEXITSTATUS(final)
                            if os.WIFEXITED(final) else -1, "journaled": journaled, **diff,
                            "correct": diff == {"extra": 0, "missing": 0, "changed": 0}})
            if (i + 1) % 100 == 0:
                print(f"{i + 1}/{trials} trials", flush=True)
    return {"records": records}


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.toolpro.crash_trials", description=__doc__)
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", writes="folder", type=Path, default=Path("docs/results/toolpro"))
    p.add_argument("--naive", action="store_true", help="control: restart with a fresh run id (no replay)")
    args = p.parse_args(argv)
    require_positive(args, ("trials",))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="toolpro-crash-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
                                     ) as tmp:
        out = run_trials(args.trials, args.seed, Path(tmp), args.naive)
    recs = out["records"]
    n, ok = len(recs), sum(r["correct"] for r in recs)
    summary = {
        "command": f"python -m sim_benchmarks.studies.toolpro.crash_trials --trials {args.trials} --seed {args.seed}"
                   + (" --naive" if args.naive else ""), "naive": args.naive,
        "trials": n, "seed": args.seed, "crashes_injected": int(sum(r["killed"] for r in recs)),
        "correct_trials": ok, "correct_rate_ci95": list(wilson_ci(ok, n)),
        "duplicate_rows": int(sum(r["extra"] for r in recs)), "lost_rows": int(sum(r["missing"] for r in recs)),
        "changed_rows": int(sum(r["changed"] for r in recs)),
        "final_run_ok": int(sum(r["final_exit"] == 0 for r in recs)),
        "tasks": sorted({r["task"] for r in recs}), "wall_s": time.perf_counter() - t0, "records": recs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / ("crash_trials_naive.json" if args.naive else "crash_trials.json"), summary)
    print(f"{ok}/{n} trials exactly-once (95 % CI {summary['correct_rate_ci95'][0]:.4f}-"
          f"{summary['correct_rate_ci95'][1]:.4f}); crashes injected {summary['crashes_injected']}; "
          f"duplicate rows {summary['duplicate_rows']}, lost rows {summary['lost_rows']}, "
          f"changed rows {summary['changed_rows']}; {summary['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
