"""One thread means one thread: the pools a process really runs after ``limit_threads``, read back, not timed."""

import json
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pytest

from sim_benchmarks.thread_pools import check_thread_pools, thread_pools

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pools_in_fresh_process(code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**env, "PYTHONPATH": ROOT})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_limit_threads_caps_a_blas_pool_loaded_before_it():
    # numpy (and its OpenBLAS) is imported first, as in a study's main(): the environment alone would be too late
    got = _pools_in_fresh_process(
        "import json, numpy\nfrom sim_benchmarks.thread_pools import limit_threads, thread_pools\n"
        "before = thread_pools()\nlimit_threads(1)\nprint(json.dumps({'before': before, 'after': thread_pools()}))")
    blas_before = [p for p in got["before"] if p["api"] == "blas"]
    assert blas_before, "numpy's BLAS pool should be visible to threadpoolctl"
    if (os.cpu_count() or 1) > 1:
        assert max(p["threads"] for p in blas_before) > 1  # what the study used to run with
    assert got["after"] and all(p["threads"] == 1 for p in got["after"])


def test_check_thread_pools_names_the_pool_over_the_limit():
    pools = [{"api": "blas", "library": "openblas", "file": "libopenblas.so", "threads": 2},
             {"api": "torch", "library": "intra-op", "file": "", "threads": 1}]
    with pytest.raises(RuntimeError, match="openblas libopenblas.so 2 threads"):
        check_thread_pools(1, pools)
    assert check_thread_pools(2, pools) == pools
    assert all({"api", "library", "threads"} <= set(p) for p in thread_pools())


def _train_tiny(out: str) -> dict:
    from sim_benchmarks.studies.streaming.streaming_learning import _one_run

    return _one_run(("minatar:breakout", "stream_spr", 0, 300, out, {"backend": "numba", "k": 2}))


def test_streaming_study_workers_run_one_thread_per_pool(tmp_path):
    # the learning study's own worker function in a spawned pool, as the study runs it with --workers 2
    env = {k: os.environ.pop(k) for k in list(os.environ) if k.endswith("_NUM_THREADS")}
    try:
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
            summary = pool.submit(_train_tiny, str(tmp_path)).result()
    finally:
        os.environ.update(env)
    pools = summary["thread_pools"]
    apis = {p["api"] for p in pools}
    assert {"blas", "torch", "numba"} <= apis, apis
    assert all(p["threads"] == (0 if p["api"] == "numba" else 1) for p in pools), pools  # numba: serial kernels
