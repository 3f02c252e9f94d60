"""The floor of a Stream Q(λ) step on MinAtar, and where the SPR loss's time goes (thread CPU time, one thread).

    python -m launch.study streaming.roofline [--repeats 3000] [--out runs/roofline.json]

Measures on this machine, for MinAtar Breakout's network (132,179 parameters; the FC128 weight is 131,072 of them):

- memory passes over vectors the size of the parameters: read-only, the trace update z ← d·z + g with ‖z‖₁, the
  ObGD step θ ← θ + a·z (GB/s), and a read of a 64 MB vector (DRAM);
- the FC128 forward of the 2-row batch [s, s'] through numba's ``np.dot`` (OpenBLAS; the layer-by-layer kernels)
  and through the fused step's loop (``numba_step._head``), without and with the deferred ObGD step it applies;
- the whole fused call (``q_lambda_step``), and whole agent steps (act + env step + observe) of the fused step
  against the layer-by-layer kernels (``fused_step=false``), interleaved blocks of ``--repeats`` steps; the same for
  streaming SPR's fused update against the loss kernel + per-module steps (``fused_spr=false``), blocks of a fifth;
- the floor of those passes: 6 × the weight's bytes (two passes, each reading weight and trace and writing one of
  them) at the best pass bandwidth measured;
- every GEMM of one compiled SPR update (``numba_spr``) at its shape through numba's ``np.dot``, with the
  multiply-adds of the update and, for the 5-row products with the projection weight, a loop that reads the weight
  once.

Timings are medians of 5 blocks of ``--repeats`` calls (a quarter for the SPR GEMMs), CPU time of this thread.
"""

from __future__ import annotations

import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np

from envs.atomic_io import write_json_atomic
from policies.streaming.kernels import FASTMATH, decay_add_l1_, l1_norm
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.thread_pools import limit_threads, thread_pools

MB = 1e6


@numba.njit(cache=True, fastmath=FASTMATH)
def _axpy(p, z, a):
    for i in range(p.size):
        p[i] += a * z[i]


@numba.njit(cache=True)
def _dot_nt(a, b, out):  # a · bᵀ through BLAS, as numba_net's forward does it
    np.dot(a, b.T, out)


@numba.njit(cache=True)
def _dot_nn(a, b, out):
    np.dot(a, b, out)


@numba.njit(cache=True)
def _dot_tn(a, b, out):
    np.dot(a.T, b, out)


@numba.njit(cache=True, fastmath=FASTMATH)
def _rows_once(a, w, out):  # out[r, j] = a[r]·w[j], each row of w read once for all rows of a
    for j in range(w.shape[0]):
        for r in range(a.shape[0]):
            acc = np.float32(0.0)
            for i in range(a.shape[1]):
                acc += a[r, i] * w[j, i]
            out[r, j] = acc


# every GEMM of one numba_spr update on MinAtar Breakout (16 latent channels on 8×8, 3 actions, K = 5, projection
# 1024 → 128): (what, kind, A shape, B shape, calls per update); kind nt = A·Bᵀ, nn = A·B, tn = Aᵀ·B
SPR_GEMMS = (
    ("online encoder forward", "nn", (16, 36), (36, 88), 1),
    ("transition conv 1 forward", "nn", (16, 171), (171, 78), 5),
    ("transition conv 2 forward", "nn", (16, 144), (144, 78), 5),
    ("projection forward", "nt", (5, 1024), (128, 1024), 1),
    ("predictor forward", "nt", (5, 128), (128, 128), 1),
    ("target encoder forward", "nn", (16, 36), (36, 88), 5),
    ("target projection forward", "nt", (5, 1024), (128, 1024), 1),
    ("predictor weight gradient", "tn", (5, 128), (5, 128), 1),
    ("predictor input gradient", "nn", (5, 128), (128, 128), 1),
    ("projection weight gradient", "tn", (5, 128), (5, 1024), 1),
    ("projection input gradient", "nn", (5, 128), (128, 1024), 1),
    ("transition conv 2 input gradient", "tn", (16, 144), (16, 78), 5),
    ("transition conv 1 input gradient", "tn", (16, 171), (16, 78), 5),
    ("transition conv 1 weight gradient", "nt", (16, 390), (171, 390), 1),
    ("transition conv 2 weight gradient", "nt", (16, 390), (144, 390), 1),
    ("online encoder weight gradient", "nt", (16, 88), (36, 88), 1),
)


def per_call_us(fn: Any, repeats: int, blocks: int = 5) -> float:
    """Median over ``blocks`` of the thread CPU microseconds per call of ``fn`` (called once first: compilation)."""
    fn()
    times = []
    for _ in range(blocks):
        t0 = time.thread_time()
        for _ in range(repeats):
            fn()
        times.append(1e6 * (time.thread_time() - t0) / repeats)
    return statistics.median(times)


STREAM_Q_VARIANTS = (("fused", {}), ("layered", {"fused_step": False}))
SPR_VARIANTS = (("fused update", {}), ("loss kernel + module steps", {"fused_spr": False}))


def whole_steps(repeats: int, blocks: int = 5, agent: str = "stream_q",
                variants: tuple[tuple[str, dict[str, Any]], ...] = STREAM_Q_VARIANTS) -> dict[str, float]:
    """Median thread-CPU ms per whole agent step (act + env step + observe) of ``agent`` with ``backend=numba``
    for each of ``variants`` (name, options) — Stream Q's fused step against the layer-by-layer kernels
    (``fused_step=false``), or SPR's fused update against the loss kernel + per-module steps (``fused_spr=false``)
    — in interleaved blocks of ``repeats``."""
    from envs.arcade import make_arcade_env
    from sim_benchmarks.studies.streaming.streaming_speed import _make

    runs = {}
    for key, opts in variants:
        env = make_arcade_env("minatar:breakout", {})
        runs[key] = [env, _make(agent, "minatar:breakout", env, "numba", opts), env.reset(seed=0)[0]]

    def block(key: str, n: int) -> float:
        env, learner, obs = runs[key]
        t0 = time.thread_time()
        for _ in range(n):
            a = learner.act(obs)
            nxt, r, term, trunc, _ = env.step(a)
            learner.observe(obs, a, float(r), nxt, term, trunc)
            obs = env.reset()[0] if term or trunc else nxt
        runs[key][2] = obs
        return 1e3 * (time.thread_time() - t0) / n

    for key in runs:
        block(key, max(repeats // 3, 1))  # compilation and warm-up
    times: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(blocks):
        for key in runs:
            times[key].append(block(key, repeats))
    for env, _, _ in runs.values():
        env.close()
    return {key: statistics.median(v) for key, v in times.items()}


def measure(repeats: int, seed: int = 0) -> dict[str, Any]:
    """Every figure of the module docstring, as a dict."""
    from envs.arcade import make_arcade_env
    from policies.streaming import numba_step as ns
    from sim_benchmarks.studies.streaming.streaming_speed import _make

    env = make_arcade_env("minatar:breakout", {})
    learner = _make("stream_q", "minatar:breakout", env, "numba", {})
    env.close()
    fused = learner.fused
    theta, z = fused.theta, fused.trace
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(theta.size).astype(np.float32)
    z[:] = 0.01 * rng.standard_normal(z.size).astype(np.float32)
    n, nbytes = theta.size, 4 * theta.size
    hidden, latent = fused.h.shape[1], fused.a1.shape[1]
    w1_off = theta.size - hidden - int(fused.dims[ns.NOUT]) * (hidden + 1) - hidden * latent
    w1 = theta[w1_off:w1_off + hidden * latent].reshape(hidden, latent)
    zero, decay = np.float32(0.0), np.float32(0.99 * 0.8)
    fused.a1[:] = rng.standard_normal(fused.a1.shape).astype(np.float32)
    out = np.zeros((2, hidden), np.float32)
    big = rng.standard_normal(int(64 * MB / 4)).astype(np.float32)
    passes = {
        "read theta": (per_call_us(lambda: l1_norm(theta), repeats), nbytes),
        "trace update z = d*z + g with L1": (per_call_us(lambda: decay_add_l1_(z, g, decay), repeats), 3 * nbytes),
        "ObGD step theta += a*z": (per_call_us(lambda: _axpy(theta, z, zero), repeats), 3 * nbytes),
        "DRAM read of 64 MB": (per_call_us(lambda: l1_norm(big), max(repeats // 200, 3)), big.nbytes),
    }
    bandwidth = {k: {"us": us, "bytes": b, "gb_per_s": b / us / 1e3} for k, (us, b) in passes.items()}
    pending = np.array([0.0, 0.0, 1.0])  # a deferred step of size 0: the pass runs, the weights stay as they are

    def head(defer: float = 1.0) -> None:
        pending[:] = (0.0, 0.0, defer)
        ns._head(theta, z, pending, fused.dims, 2, fused.slope, fused.eps, fused.a1, fused.h, fused.y2, fused.a2,
                 fused.r2, fused.out)

    s = np.zeros(fused.in_shape, np.float32).reshape(-1)
    raw = (rng.random(s.size) < 0.15).astype(np.uint8)
    s_next = np.zeros_like(s)
    mean, m2 = np.zeros(s.size), np.ones(s.size)

    def step() -> None:  # a step of size 0 (lr = 0): every pass runs, nothing drifts between calls
        ns.q_lambda_step(theta, z, pending, fused.dims, s, raw, s_next, 1000, mean, m2, 1e-8, 0, 0.0, False, False,
                         0.99, decay, 0.0, 2.0, fused.slope, fused.eps, fused.wide, fused.v, fused.y1, fused.a1,
                         fused.r1, fused.h, fused.y2, fused.a2, fused.r2, fused.out, fused.da1, fused.da2)

    best = max(v["gb_per_s"] for k, v in bandwidth.items() if not k.startswith("DRAM"))
    q = {"fc128 forward of 2 rows via np.dot (OpenBLAS)": per_call_us(lambda: _dot_nt(fused.a1, w1, out), repeats),
         "fc128 forward of 2 rows, fused loop": per_call_us(lambda: head(0.0), repeats),
         "fc128 forward of 2 rows + deferred step, fused loop": per_call_us(head, repeats),
         "whole fused step call": per_call_us(step, repeats),
         "floor of the two passes (6 x weight bytes at the best pass bandwidth)": 6 * 4 * w1.size / best / 1e3}
    gemms, total_us, macs = [], 0.0, 0
    for what, kind, sa, sb, calls in SPR_GEMMS:
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        shape = {"nt": (sa[0], sb[0]), "nn": (sa[0], sb[1]), "tn": (sa[1], sb[1])}[kind]
        m = sa[0] * sa[1] * (sb[0] if kind == "nt" else sb[1])
        res = np.zeros(shape, np.float32)
        fn = {"nt": _dot_nt, "nn": _dot_nn, "tn": _dot_tn}[kind]
        us = per_call_us(lambda fn=fn, a=a, b=b, res=res: fn(a, b, res), max(repeats // 4, 1))
        row = {"gemm": what, "shape": f"{sa}x{sb} ({kind})", "calls": calls, "us": us, "gmac_per_s": m / us / 1e3}
        if kind == "nt" and sa[0] == 5:
            row["weight_once_loop_us"] = per_call_us(lambda a=a, b=b, res=res: _rows_once(a, b, res),
                                                     max(repeats // 4, 1))
        gemms.append(row)
        total_us += us * calls
        macs += m * calls
    rate = 2 * w1.size / q["fc128 forward of 2 rows, fused loop"] / 1e3  # G multiply-adds per second
    return {"parameters": n, "fc128_weight": int(w1.size), "bandwidth": bandwidth, "stream_q_us": q,
            "fused_forward_gmac_per_s": rate, "stream_q_step_ms": whole_steps(repeats),
            "spr_step_ms": whole_steps(max(repeats // 5, 1), agent="stream_spr", variants=SPR_VARIANTS),
            "spr_gemms": gemms, "spr_gemm_total_us": total_us, "spr_multiply_adds": macs,
            "repeats": repeats, "machine": f"{platform.machine()} Linux", "thread_pools": thread_pools()}


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="launch.study streaming.roofline", description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3000, min=4, max=10**7, help="calls per timed block")
    p.add_argument("--out", writes="file", type=Path, default=None, help="also write the figures as JSON")
    args = p.parse_args(argv)
    limit_threads(1)
    res = measure(args.repeats)
    for k, v in res["bandwidth"].items():
        print(f"{k:60s} {v['us']:9.2f} us  {v['gb_per_s']:7.1f} GB/s")
    for k, v in res["stream_q_us"].items():
        print(f"{k:60s} {v:9.2f} us")
    print(f"{'fused 2-row forward loop':60s} {res['fused_forward_gmac_per_s']:9.1f} G multiply-adds/s")
    for k, v in res["stream_q_step_ms"].items():
        print(f"{'whole Stream Q step (act + env + observe), ' + k:60s} {1e3 * v:9.2f} us")
    for k, v in res["spr_step_ms"].items():
        print(f"{'whole SPR step (act + env + observe), ' + k:60s} {1e3 * v:9.2f} us")
    for r in res["spr_gemms"]:
        extra = f"  (weight read once: {r['weight_once_loop_us']:.1f} us)" if "weight_once_loop_us" in r else ""
        print(f"SPR {r['gemm']:40s} x{r['calls']}  {r['us']:7.1f} us  {r['gmac_per_s']:6.1f} GMAC/s{extra}")
    print(f"SPR update: {res['spr_gemm_total_us']:.0f} us in GEMMs, {res['spr_multiply_adds'] / 1e6:.2f} M "
          "multiply-adds")
    if args.out is not None:
        write_json_atomic(args.out, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
