"""Times one public streaming-RL reference script from its own checkout (run by ``reference_speed`` in a subprocess).

    python _reference_runner.py --script stream_q_minatar --checkout PATH --env MinAtar/Breakout-v1 \\
        --warmup 500 --steps 5000 --seed 0

It runs in the reference's own interpreter (its virtual environment), so it imports the standard library only,
never Embodia. The reference module is imported from the checkout unchanged and its own training entry point runs
the whole loop (its env wrappers, its agent, its update); the runner only

- picks the reference's settings through the entry point's own arguments: ε held at 0.01 from the first step
  (``epsilon_start`` / ``start_epsilon`` = 0.01), total steps = warmup + timed steps + 1, and for stream-rep-rl
  one checkpoint (its default writes a checkpoint and flushes its CSV log every 1 % of the run, which a short
  timing run would otherwise pay every 50 steps) and no saved model;
- for stream-rep-rl, compiles every (terminated, truncated, is_nongreedy) variant of its jitted update before the
  timed window opens, on the warm-up's last transition, results discarded (see ``precompile``): a long run pays
  each compilation once, a short timed window would otherwise pay the rare ones;
- wraps the per-step action call (``StreamQ.sample_action`` in streaming-drl, ``Agent.step`` in stream-rep-rl)
  with a counter that reads the clock at the start of step ``warmup + 1`` and of step ``warmup + steps + 1``, so
  exactly ``steps`` full agent steps (act + env step with the reference's preprocessing + update) lie between;
- supplies, for stream-rep-rl under gymnasium ≥ 1.0, the module path
  ``gymnasium.wrappers.record_episode_statistics`` (moved in gymnasium 1.0; the scripts also call
  ``gym.register_envs``, which only gymnasium ≥ 1.0 has, so no gymnasium release runs them unaided), and
  registers MinAtar's gym ids, which gymnasium ≥ 1.0 no longer loads from entry points.

Prints one line ``REFERENCE_SPEED {json}`` with the timed steps/s, the process's CPU seconds per wall second in
the timed window ("cores busy"), how many of its threads ran in that window, the thread pools its libraries report
at the end (threadpoolctl's BLAS/OpenMP pools where threadpoolctl is installed, torch's intra-op pool) and the JIT
cache growth (stream-rep-rl). XLA reports no pool size: for JAX the threads that ran and the cores busy are the
measure.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path

# script name → (file inside the checkout, which entry point drives it)
SCRIPTS = {
    "stream_q_minatar": ("stream_q_minatar.py", "streaming_drl"),
    "stream_q_atari": ("stream_q_atari.py", "streaming_drl"),
    "streamq": ("algorithms/streamq.py", "stream_rep_rl"),
    "streamq_spr_ortho": ("algorithms/streamq-spr-ortho.py", "stream_rep_rl"),
}
MARK = "REFERENCE_SPEED "


class StepClock:
    """Reads the clock at the start of call ``warmup + 1`` and call ``warmup + steps + 1`` of the step function."""

    def __init__(self, warmup: int, steps: int) -> None:
        self.warmup, self.steps, self.calls = warmup, steps, 0
        self.t0: float | None = None
        self.t1: float | None = None
        self.cpu0 = self.cpu1 = 0.0  # process CPU time (all threads) at the window's edges
        self.threads0: dict[int, float] = {}  # CPU seconds per thread at the window's edges
        self.threads1: dict[int, float] = {}
        self.on_start = None  # called once when the timed window opens (e.g. to read the JIT cache size)

    def tick(self) -> None:
        self.calls += 1
        if self.calls == self.warmup + 1:
            if self.on_start is not None:
                self.on_start()
            self.threads0 = thread_cpu_seconds()
            self.t0, self.cpu0 = time.perf_counter(), time.process_time()
        elif self.calls == self.warmup + self.steps + 1:
            self.t1, self.cpu1 = time.perf_counter(), time.process_time()
            self.threads1 = thread_cpu_seconds()

    def rate(self) -> float:
        if self.t0 is None or self.t1 is None:
            raise RuntimeError(f"the reference made {self.calls} step calls, fewer than {self.warmup + self.steps + 1}")
        return self.steps / (self.t1 - self.t0)

    def cpu_per_wall(self) -> float:
        """Cores the process kept busy in the timed window (CPU seconds of all its threads per wall second)."""
        self.rate()
        return (self.cpu1 - self.cpu0) / (self.t1 - self.t0)

    def threads_ran(self) -> int | None:
        """Threads of this process that used at least 5 % of the timed window's wall time (None without /proc)."""
        self.rate()
        return threads_ran(self.threads0, self.threads1, self.t1 - self.t0) if self.threads1 else None


def thread_cpu_seconds() -> dict[int, float]:
    """CPU seconds (user + system) of each live thread of this process, from /proc (empty where there is none)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the command name: field 3 (state) onwards
        except OSError:
            continue  # the thread ended meanwhile
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)
    return out


def threads_ran(before: dict[int, float], after: dict[int, float], wall: float, share: float = 0.05) -> int:
    """Threads whose CPU time grew by at least ``share`` of ``wall`` seconds between two readings."""
    return sum(1 for tid, t in after.items() if t - before.get(tid, 0.0) >= share * wall)


def library_thread_pools() -> list[dict]:
    """The thread pools this process's libraries report: threadpoolctl's (if installed) and torch's intra-op."""
    pools: list[dict] = []
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        pools.append({"api": "threadpoolctl", "library": "not installed", "file": "", "threads": None})
    else:
        pools += [{"api": p.get("user_api"), "library": p.get("internal_api"),
                   "file": os.path.basename(str(p.get("filepath", ""))), "threads": int(p.get("num_threads", 0))}
                  for p in threadpool_info()]
    if "torch" in sys.modules:
        import torch

        pools.append({"api": "torch", "library": "intra-op", "file": "", "threads": torch.get_num_threads()})
    if "jax" in sys.modules:  # XLA's CPU pools report no size: recorded with the flags it read
        pools.append({"api": "jax", "library": "XLA_FLAGS=" + os.environ.get("XLA_FLAGS", ""), "file": "",
                      "threads": None})
    return pools


def _load(path: Path, name: str) -> types.ModuleType:
    sys.path.insert(0, str(path.parent))  # the scripts import their siblings (optim, normalization_wrappers, ...)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _register_minatar() -> None:
    """MinAtar's gym ids: gymnasium < 1.0 finds them through an entry point, gymnasium ≥ 1.0 needs the call."""
    import gymnasium

    if "MinAtar/Breakout-v1" not in gymnasium.envs.registry:
        from minatar import gym as minatar_gym

        minatar_gym.register_envs()


def _gymnasium_compat() -> None:
    """Give the stream-rep-rl imports what a single gymnasium release lacks (see the module docstring)."""
    import gymnasium
    import gymnasium.wrappers

    name = "gymnasium.wrappers.record_episode_statistics"
    try:
        importlib.import_module(name)
    except ImportError:
        alias = types.ModuleType(name)
        alias.RecordEpisodeStatistics = gymnasium.wrappers.RecordEpisodeStatistics
        sys.modules[name] = alias
    if not hasattr(gymnasium, "register_envs"):
        gymnasium.register_envs = lambda module: None


def run_streaming_drl(path: Path, env: str, clock: StepClock, seed: int) -> dict:
    """streaming-drl's ``main`` with its own defaults except ε (held at 0.01) and the total step count."""
    _register_minatar()
    module = _load(path, path.stem)
    original = module.StreamQ.sample_action
    seen: dict[str, int] = {}

    def sample_action(self, s):
        if not seen:
            seen["parameters"] = sum(p.numel() for p in self.parameters())
        clock.tick()
        return original(self, s)

    module.StreamQ.sample_action = sample_action
    atari = "atari" in path.stem
    module.main(env, seed, lr=1.0, gamma=0.99, lamda=0.8, total_steps=clock.warmup + clock.steps + 1,
                epsilon_target=0.01, epsilon_start=0.01, exploration_fraction=0.05 if atari else 0.2,
                kappa_value=2.0, debug=False, overshooting_info=False)
    return seen


def run_stream_rep_rl(path: Path, env: str, clock: StepClock, seed: int) -> dict:
    """stream-rep-rl's ``main`` (tyro command line) with ε held at 0.01, one checkpoint, no saved model."""
    _gymnasium_compat()
    _register_minatar()
    module = _load(path, path.stem.replace("-", "_"))
    agent = module.StreamQAgent  # both scripts (plain and SPR) name their agent so
    cache: dict[str, int] = {}

    def jit_cache() -> int:
        return sum(f._cache_size() for f in (agent.step, agent.update) if hasattr(f, "_cache_size"))

    last: dict[str, tuple] = {}

    def update(*args, **kwargs):
        last["call"] = (args, kwargs)
        return agent.update(*args, **kwargs)

    def precompile() -> None:
        # The update is jitted with (terminated, truncated, is_nongreedy) static: each combination compiles on first
        # use, and the rare ones (a non-greedy action on a terminal step) tend to land inside a short timed window,
        # where one compilation costs seconds that a long run amortises. Compile all eight on the last real
        # transition and discard the results (the update is a pure function: no state of the run changes).
        import jax

        args, kwargs = last.get("call", ((), {}))
        if len(args) < 5:
            return
        for flags in itertools.product((False, True), repeat=3):
            varied = list(args)
            for i, flag in zip((2, 3, 4), flags, strict=True):
                varied[i] = type(args[i])(flag)
            jax.block_until_ready(agent.update(*varied, **kwargs))

    def start() -> None:
        precompile()
        cache.setdefault("start", jit_cache())

    clock.on_start = start

    def step(*args, **kwargs):
        clock.tick()
        return agent.step(*args, **kwargs)

    env_type = "atari" if env.startswith("ALE/") else "minatar"
    sys.argv = [str(path), "--env_type", env_type, "--env_id", env, "--net_arch", env_type,
                "--seed", str(seed), "--total_timesteps", str(clock.warmup + clock.steps + 1),
                "--start_epsilon", "0.01", "--end_epsilon", "0.01", "--num_checkpoints", "1",
                "--no-save_model", "--log_dir", "logs"]
    module.main(module.experiment, module.Agent(agent.init_state, step, update), module.define_metrics)
    return {"jit_variants_at_start": cache.get("start"), "jit_variants_at_end": jit_cache()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--script", required=True, choices=sorted(SCRIPTS))
    p.add_argument("--checkout", required=True, type=Path)
    p.add_argument("--env", required=True)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rel, kind = SCRIPTS[args.script]
    path = (args.checkout / rel).resolve()
    clock = StepClock(args.warmup, args.steps)
    run = run_streaming_drl if kind == "streaming_drl" else run_stream_rep_rl
    with tempfile.TemporaryDirectory() as scratch:  # the scripts write their logs and pickles into the cwd
        os.chdir(scratch)
        extra = run(path, args.env, clock, args.seed)
    print(MARK + json.dumps({"script": args.script, "steps_per_second": clock.rate(),
                             "cpu_per_wall": clock.cpu_per_wall(), "threads_ran": clock.threads_ran(),
                             "threads_alive": len(clock.threads1) or None, "thread_pools": library_thread_pools(),
                             "steps": args.steps, "warmup": args.warmup, **extra}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
