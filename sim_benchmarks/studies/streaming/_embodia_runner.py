"""Times one of Embodia's agents for ``reference_speed`` in a fresh process whose thread limits precede every import.

    python _embodia_runner.py --entry q_minatar_numba --steps 5000 --warmup 1000 [--breakdown]

Run as a script (not ``-m``, which would import the packages above it first): the one-thread variables are set
below before numpy, torch or numba is loaded, so each library sizes its pool from them at start-up, exactly as
the reference processes do; ``limit_threads`` then caps anything that ignored them. Prints one line
``EMBODIA_SPEED {json}``: the timed steps/s and cores busy (``streaming_speed.measure``), the threads of this
process that ran, and the thread pools read after the run; with ``--breakdown`` the per-phase ms per step of an
instrumented block instead of the timing.
"""

import os
import sys

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "VECLIB_MAXIMUM_THREADS": "1"}
os.environ.update(ONE_THREAD)  # before any import that could load a BLAS, OpenMP or numba pool

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

MARK = "EMBODIA_SPEED "


def run(key: str, steps: int, warmup: int, breakdown_only: bool = False) -> dict:
    """One timed block of entry ``key`` (a fresh learner and env) with its threads and pools; with
    ``breakdown_only`` an instrumented block's per-phase ms per step instead of the timing."""
    import numba  # noqa: F401  (loaded here so that the pools read next include every library the agents use)
    import torch  # noqa: F401

    from sim_benchmarks.studies.streaming._reference_runner import thread_cpu_seconds, threads_ran
    from sim_benchmarks.studies.streaming.reference_speed import ENTRIES, breakdown, run_embodia
    from sim_benchmarks.thread_pools import limit_threads, thread_pools

    at_import = thread_pools()  # sized by the variables above alone: nothing has capped them yet
    limit_threads(1)
    entry = next((e for e in ENTRIES if e.key == key and not e.script), None)
    if entry is None:
        raise SystemExit(f"--entry {key}: not one of Embodia's entries "
                         f"({', '.join(e.key for e in ENTRIES if not e.script)})")
    before, t0 = thread_cpu_seconds(), time.perf_counter()
    row = {"breakdown": breakdown(entry, steps, warmup)} if breakdown_only else run_embodia(entry, steps, warmup)
    wall, after = time.perf_counter() - t0, thread_cpu_seconds()
    row["threads_ran"] = threads_ran(before, after, wall) if after else None  # over warm-up and timed block
    row["threads_alive"] = len(after) or None
    row["thread_pools_at_import"] = at_import
    row["thread_pools"] = thread_pools()  # after the run: numba's pool would exist only once a kernel started it
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entry", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--breakdown", action="store_true", help="per-phase breakdown instead of the timing")
    args = p.parse_args()
    root = str(Path(__file__).resolve().parents[3])
    if root not in sys.path:  # run as a script: the repository root is not on the path by itself
        sys.path.insert(0, root)
    print(MARK + json.dumps(run(args.entry, args.steps, args.warmup, args.breakdown)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
