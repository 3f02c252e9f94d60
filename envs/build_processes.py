"""Spreading a one-off cache build (rendering a corpus, encoding it) over the machine's cores.

A first run builds some caches before its first episode; on a 2-core machine one process leaves half of it idle.
The jobs handed out here must be pure functions of their arguments that fix their own thread counts (BLAS and torch
results can depend on them), so the result is the same bytes whatever the number of processes.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

MAX_BUILD_PROCESSES = 4  # each one builds its own scene or model: more costs memory for little gain
T = TypeVar("T")


def usable_cores() -> int:
    """Cores this process may run on (its affinity where the OS has one, e.g. under ``taskset``)."""
    if hasattr(os, "sched_getaffinity"):  # Linux; macOS has no affinity
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def may_start_processes() -> bool:
    """Whether this process may start worker processes: not inside a pool worker (daemonic processes cannot have
    children), and more than one core to use."""
    return not mp.current_process().daemon and usable_cores() > 1


def build_processes(jobs: int, min_jobs_per_process: int) -> int:
    """How many processes a build of ``jobs`` independent jobs uses: one when :func:`may_start_processes` says no or
    the build is too small to repay starting processes, else up to the usable cores (at most 4)."""
    if not may_start_processes():
        return 1
    return max(1, min(usable_cores(), MAX_BUILD_PROCESSES, jobs // max(1, min_jobs_per_process)))


def map_in_processes(fn: Callable[[Any], T], chunks: Sequence[Any], processes: int) -> list[T]:
    """``[fn(c) for c in chunks]``, in ``processes`` spawned processes when more than one (``fn`` must be a module
    level function; spawn, not fork: pybullet clients and torch thread pools do not survive a fork)."""
    if processes <= 1 or len(chunks) <= 1:
        return [fn(c) for c in chunks]
    with mp.get_context("spawn").Pool(min(processes, len(chunks))) as pool:
        return pool.map(fn, chunks, chunksize=1)
