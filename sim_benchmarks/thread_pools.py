"""Thread pools a process really runs, and limits that hold after numpy and torch are imported.

Environment variables such as ``OPENBLAS_NUM_THREADS`` are read once, when a library is first loaded, so setting
them inside ``main()`` after an import does nothing. ``limit_threads`` therefore also caps the pools that are
already loaded (through threadpoolctl and torch), and ``thread_pools`` reads back what each pool is set to, so
a benchmark can record — and check — the threads its figures were measured with.
"""

from __future__ import annotations

import os
import sys
from typing import Any

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS")

_limiters: list[Any] = []  # keeps threadpoolctl's limiter alive for the life of the process


def limit_threads(n: int = 1) -> None:
    """Cap every BLAS/OpenMP pool and torch at ``n`` threads in this process, loaded or not yet loaded."""
    for var in THREAD_VARS:  # for libraries loaded later and for child processes
        # numba re-reads its variable at every compile and refuses a change once its pool exists: leave it be
        if not (var == "NUMBA_NUM_THREADS" and "numba" in sys.modules):
            os.environ[var] = str(n)
    from threadpoolctl import threadpool_limits

    _limiters.append(threadpool_limits(limits=n))
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(n)
        if torch.get_num_interop_threads() != n:
            try:  # settable once, before any inter-op work; later calls raise
                torch.set_num_interop_threads(n)
            except RuntimeError:
                pass
    if _numba_pool_launched():
        import numba

        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def _numba_pool_launched() -> bool:
    # numba starts its pool only for parallel kernels; asking its size would start one, so look first
    if "numba" not in sys.modules:
        return False
    from numba.np.ufunc import parallel

    return bool(getattr(parallel, "_is_initialized", False))


def thread_pools() -> list[dict[str, Any]]:
    """Every thread pool loaded in this process with its current size (BLAS/OpenMP via threadpoolctl, torch's
    intra-op pool, numba's pool: 0 threads while no parallel kernel has started it)."""
    from threadpoolctl import threadpool_info

    pools = [{"api": p.get("user_api"), "library": p.get("internal_api"),
              "file": os.path.basename(str(p.get("filepath", ""))), "threads": int(p.get("num_threads", 0))}
             for p in threadpool_info()]
    if "torch" in sys.modules:
        import torch

        pools.append({"api": "torch", "library": "intra-op", "file": "", "threads": torch.get_num_threads()})
    if "numba" in sys.modules:
        import numba

        launched = _numba_pool_launched()
        pools.append({"api": "numba", "library": numba.config.THREADING_LAYER if launched else "no pool started",
                      "file": "", "threads": int(numba.get_num_threads()) if launched else 0})
    return pools


def check_thread_pools(limit: int, pools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The pools (read now unless given); RuntimeError naming each pool that runs more than ``limit`` threads."""
    pools = thread_pools() if pools is None else pools
    over = [p for p in pools if p["threads"] > limit]
    if over:
        names = ", ".join(f"{p['api']}/{p['library']} {p['file']} {p['threads']} threads".replace("  ", " ")
                          for p in over)
        raise RuntimeError(f"asked for {limit} thread(s) per process, but {names}")
    return pools
