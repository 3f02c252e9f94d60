"""Streaming SPR's backends on one env: do they learn alike, and how fast is each (one thread, interleaved rounds).

    python -m launch.study streaming.spr_backends --env atari:Breakout --agreement-steps 300 \\
        --steps 200 --warmup 50 --rounds 5 --env-option episodic_life=true --env-option fire_reset=true \\
        --out runs/spr_backends

Agreement, two ways. (1) Per update: at every SPR update of the ``backend=numba`` learner its compiled loss
gradients are compared with torch autograd's on the same state (weights, window); reported per module as the
median, 95th percentile and maximum relative L2 difference and the number of updates above 1e-4. (2) Drift: a
torch-path learner fed the *same* transitions (the env is stepped with the compiled learner's action), so any
difference comes from float32 rounding, not from other experience; reported every 25 steps as the relative L2
difference of every weight block and the share of steps where both chose the same greedy action. Two float32
implementations round differently, and now and then a pre-activation lies within that rounding of the LeakyReLU
kink, so one takes slope 1 and the other 0.01 there; SPR's momentum projection then carries the difference on,
and the trajectories drift apart although every single update agrees to rounding. (1) is the equivalence check;
(2) shows how far two equivalent implementations drift in a short run.

Speed: three learners step the env in interleaved rounds (order rotated each round) — the torch path
(``backend=torch``), ``backend=numba`` with the SPR loss through torch autograd (the compiled Q network only:
the numba backend's path before the SPR loss was compiled on Atari/Octax) and ``backend=numba`` as it is — with
ε held at its final value, so SPR updates on nearly every step. With Atari, pass the Stream-x setup's
``fire_reset``/``episodic_life`` env options: without FIRE Breakout's screen stays still, the normalised input is
zero and nothing is learned, which makes agreement trivial. Ratios are taken within a round. Writes
``spr_backends.json`` (with the thread pools and the load average) and prints both tables.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.arcade import make_arcade_env, split_name
from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from sim_benchmarks.cli import ArgumentParser, main_guard, parse_options
from sim_benchmarks.thread_pools import check_thread_pools, limit_threads

VARIANTS = ("torch", "numba_autograd_spr", "numba")


def _learner(env_name: str, env: Any, variant: str, options: dict[str, Any], seed: int) -> Any:
    """A ``stream_spr`` learner of one of :data:`VARIANTS` (ε at its final value from the start)."""
    from sim_benchmarks.training.streaming import build_config, make_learner

    suite, _ = split_name(env_name)
    opts = {"exploration_fraction": 0.0, **options, "backend": "torch" if variant == "torch" else "numba"}
    learner = make_learner(env_name, "stream_spr", env, build_config("stream_spr", suite, 10**9, opts), seed)
    if variant == "numba_autograd_spr":
        learner.fast_spr = None  # the SPR loss through autograd, the Q network compiled
    return learner


def _blocks(learner: Any) -> dict[str, torch.Tensor]:
    learner.flush()  # the fused MinAtar step defers part of its update to the next forward
    return {"q_network": learner.flat, "transition": learner.head_flats[0], "projection": learner.head_flats[1],
            "predictor": learner.head_flats[2], "target_encoder": learner.target_enc_flat,
            "target_projection": learner.target_proj_flat}


def agreement(env_name: str, steps: int, seed: int, options: dict[str, Any], env_opts: dict[str, Any],
              every: int = 25) -> dict[str, Any]:
    """Per-update gradient agreement of the compiled SPR loss with autograd, and the lockstep drift of a torch-path
    learner fed the same transitions (see the module docstring)."""
    env = make_arcade_env(env_name, env_opts)
    ref = _learner(env_name, env, "torch", options, seed)
    fast = _learner(env_name, env, "numba", options, seed)
    modules = ("encoder", "transition", "projection", "predictor")
    errors: dict[str, list[float]] = {m: [] for m in modules}
    compiled_gradients = fast.spr_gradients

    def checked_gradients() -> tuple[float, list[torch.Tensor]]:
        loss, grads = compiled_gradients()
        grads = [g.clone() for g in grads]
        compiled, fast.fast_spr = fast.fast_spr, None
        try:
            _, ref_grads = compiled_gradients()  # autograd on the same weights and window
        finally:
            fast.fast_spr = compiled
        for m, g, r in zip(modules, grads, ref_grads, strict=True):
            errors[m].append(float((g - r).norm() / r.norm().clamp_min(1e-30)))
        return loss, grads

    fast.spr_gradients = checked_gradients
    obs, _ = env.reset(seed=seed)
    drift, same = [], 0
    for t in range(1, steps + 1):
        a = fast.act(obs)
        same += int(ref.act(obs) == a)
        nxt, r, term, trunc, info = env.step(a)
        lost = bool(term) or bool(info.get("life_loss", False))  # as the training loop passes a lost life
        for learner in (ref, fast):
            learner.observe(obs, a, float(r), nxt, lost, trunc)
        obs = env.reset()[0] if term or trunc else nxt
        if t % every == 0 or t == steps:
            drift.append({"step": t, "same_greedy_action": same / t, "relative_l2_difference": {
                block: float((x - y).norm() / y.norm().clamp_min(1e-30))
                for (block, x), y in zip(_blocks(fast).items(), _blocks(ref).values(), strict=True)}})
    env.close()
    per_update = {m: {"median": float(np.median(e)), "p95": float(np.percentile(e, 95)), "max": float(np.max(e)),
                      "above_1e-4": int(sum(x > 1e-4 for x in e))} for m, e in errors.items() if e}
    return {"updates": len(errors["encoder"]), "per_update": per_update, "drift": drift}


def speed(env_name: str, steps: int, warmup: int, rounds: int, seed: int, options: dict[str, Any],
          env_opts: dict[str, Any]) -> dict[str, Any]:
    """Agent steps/s of each variant per round (wall and CPU time), interleaved, and numba's ratios per round."""
    runs = {}
    for v in VARIANTS:
        env = make_arcade_env(env_name, env_opts)
        runs[v] = {"env": env, "learner": _learner(env_name, env, v, options, seed), "obs": env.reset(seed=seed)[0]}

    def block(v: str, n: int) -> dict[str, float]:
        run = runs[v]
        env, learner, obs = run["env"], run["learner"], run["obs"]
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            a = learner.act(obs)
            nxt, r, term, trunc, info = env.step(a)
            learner.observe(obs, a, float(r), nxt, bool(term) or bool(info.get("life_loss", False)), trunc)
            obs = env.reset()[0] if term or trunc else nxt
        run["obs"] = obs
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return {"steps_per_second": n / wall, "cpu_steps_per_second": n / cpu, "cores_busy": cpu / wall}

    for v in VARIANTS:
        block(v, warmup)
    per_round: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for v in VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]:
            per_round[v].append(block(v, steps))
    out: dict[str, Any] = {"per_round": per_round, "median_steps_per_second": {
        v: statistics.median(b["steps_per_second"] for b in per_round[v]) for v in VARIANTS}}
    for base in ("torch", "numba_autograd_spr"):
        for key, clock in (("", "steps_per_second"), ("_cpu", "cpu_steps_per_second")):
            # wall-clock ratios, and CPU-time ones: on a loaded host the wall clock also counts waiting for a core
            ratios = [a[clock] / b[clock] for a, b in zip(per_round["numba"], per_round[base], strict=True)]
            out[f"numba_over_{base}{key}"] = {"per_round": ratios, "median": statistics.median(ratios)}
    out["spr_updates"] = {v: runs[v]["learner"].spr_updates for v in VARIANTS}
    for run in runs.values():
        run["env"].close()
    return out


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.streaming.spr_backends", description=__doc__.splitlines()[0])
    p.add_argument("--env", default="atari:Breakout")
    p.add_argument("--network", default="", help="network preset (e.g. stream_x); default: the suite's")
    p.add_argument("--agreement-steps", type=int, default=300, min=0, max=10_000_000)
    p.add_argument("--steps", type=int, default=200, min=1, max=10_000_000, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=50, min=0, max=10_000_000)
    p.add_argument("--rounds", type=int, default=5, min=1, max=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the arcade env (e.g. fire_reset=true)")
    p.add_argument("--out", writes="folder", type=Path, default=Path("runs/spr_backends"))
    args = p.parse_args(argv)
    suite, _ = split_name(args.env)
    if suite == "minatar":
        raise ConfigError("--env: spr_backends compares the Atari/Octax SPR backends; valid suites: atari, octax")
    limit_threads(1)
    options = {"network": args.network} if args.network else {}
    env_opts = parse_options(args.env_option, "--env-option")
    make_arcade_env(args.env, env_opts).close()  # an unknown env or env option fails here, before any timing
    load_start = os.getloadavg()
    agree = agreement(args.env, args.agreement_steps, args.seed, options, env_opts) if args.agreement_steps else {}
    timing = speed(args.env, args.steps, args.warmup, args.rounds, args.seed, options, env_opts)
    pools = check_thread_pools(1)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "spr_backends.json", {
        "env": args.env, "env_options": env_opts, "network": args.network or "default", "seed": args.seed,
        "agreement": agree,
        "speed": timing, "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
        "thread_pools": pools, "loadavg_start": load_start, "loadavg_end": os.getloadavg(), "cpus": os.cpu_count(),
        "torch": torch.__version__, "numpy": np.__version__})
    if agree:
        print(f"per-update gradient agreement over {agree['updates']} SPR updates (relative L2 difference)")
        print("| module | median | 95th percentile | max | updates above 1e-4 |")
        for m, e in agree["per_update"].items():
            print(f"| {m} | {e['median']:.1e} | {e['p95']:.1e} | {e['max']:.1e} | {e['above_1e-4']} |")
        blocks = list(agree["drift"][0]["relative_l2_difference"])
        print("\n| step | same greedy action | " + " | ".join(blocks) + " |")
        for row in agree["drift"]:
            print(f"| {row['step']} | {row['same_greedy_action']:.3f} | "
                  + " | ".join(f"{d:.1e}" for d in row["relative_l2_difference"].values()) + " |")
    print("\n| variant | median steps/s | per round (steps/s; CPU steps/s) |")
    for v in VARIANTS:
        rounds = timing["per_round"][v]
        print(f"| {v} | {timing['median_steps_per_second'][v]:.0f} | "
              + " / ".join(f"{b['steps_per_second']:.0f}; {b['cpu_steps_per_second']:.0f}" for b in rounds) + " |")
    for base in ("torch", "numba_autograd_spr"):
        for key, clock in (("", "wall clock"), ("_cpu", "CPU time")):
            ratio = timing[f"numba_over_{base}{key}"]
            print(f"numba ÷ {base} ({clock}): median {ratio['median']:.2f}× (per round "
                  + " / ".join(f"{x:.2f}" for x in ratio["per_round"]) + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
