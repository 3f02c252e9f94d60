"""Agent steps per second on one core for each streaming agent × arcade suite (median over repeats).

    python -m sim_benchmarks.studies.streaming.streaming_speed --agents stream_q,stream_ac,stream_spr \\
        --envs minatar:breakout,atari:Breakout,octax:brix --steps 2000 --repeats 3 --out runs/streaming_speed

A "step" is one full agent step: ``act`` + ``env.step`` + ``observe`` (the update). ε is held at its final
value (exploration_fraction=0) so Stream Q and SPR run their steady-state path: almost every step is greedy and
SPR updates on nearly all of them. ``--baseline`` also times a textbook autograd Stream Q(λ) (nn.Module
forward, ``autograd.grad``, a per-tensor Python loop for traces and ObGD, as in the Stream-x reference code)
side by side, so the speed-up is a ratio measured in the same run on the same (shared, noisy) machine; ``--numba``
also times the compiled networks (``backend=numba``: the whole MinAtar network compiled, the im2col/GEMM Atari and
Octax network) next to the torch path.
Writes ``speed.json`` and prints a table.
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
from envs.errors import ConfigError, choice_error
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.suites.arcade import AGENTS
from sim_benchmarks.thread_pools import check_thread_pools, limit_threads


class AutogradStreamQ:
    """The unfused reference formulation of Stream Q(λ), for a same-run speed comparison only."""

    def __init__(self, suite: str, obs_shape: tuple[int, ...], n_actions: int, seed: int = 0) -> None:
        from policies.streaming.networks import StreamNetwork
        from policies.streaming.normalizers import ObservationNormalizer, RewardScaler

        self.q = StreamNetwork(suite, obs_shape, n_actions, generator=torch.Generator().manual_seed(seed))
        self.params = list(self.q.parameters())
        self.traces = [torch.zeros_like(p) for p in self.params]
        self.norm, self.scaler = ObservationNormalizer(obs_shape), RewardScaler()
        self.rng = np.random.default_rng(seed)
        self.n_actions = n_actions

    def act(self, obs: np.ndarray) -> int:
        s = self.norm(torch.from_numpy(obs))
        with torch.no_grad():
            q = self.q(s.unsqueeze(0))[0]
        a = int(torch.argmax(q)) if self.rng.random() > 0.01 else int(self.rng.integers(self.n_actions))
        self._s, self._greedy = s, a == int(torch.argmax(q))
        return a

    def observe(self, obs, action, reward, next_obs, terminated, truncated) -> None:
        s_next = self.norm(torch.from_numpy(next_obs))
        r = self.scaler(reward, terminated or truncated)
        with torch.no_grad():
            q_next = float(self.q(s_next.unsqueeze(0)).max())
        q_sa = self.q(self._s.unsqueeze(0))[0, action]
        delta = r + (0.0 if terminated else 0.99 * q_next) - float(q_sa.detach())
        grads = torch.autograd.grad(q_sa, self.params)
        z_sum = 0.0
        for z, g in zip(self.traces, grads, strict=True):
            z.mul_(0.99 * 0.8).add_(g)
            z_sum += float(z.abs().sum())
        step = 1.0 / max(2.0 * max(abs(delta), 1.0) * z_sum, 1.0)
        with torch.no_grad():
            for p, z in zip(self.params, self.traces, strict=True):
                p.add_(z, alpha=step * delta)
                if terminated or truncated or not self._greedy:
                    z.zero_()


NUMBA_AGENTS = ("stream_q", "stream_ac", "stream_spr")  # configs taking backend="numba" (SPR: its Q part)


def _make(agent: str, env_name: str, env: Any, backend: str = "torch",
          options: dict[str, Any] | None = None) -> Any:
    if agent == "autograd_stream_q":
        suite, _ = split_name(env_name)
        return AutogradStreamQ(suite, env.observation_space.shape, int(env.action_space.n))
    from sim_benchmarks.training.streaming import build_config, make_learner

    suite, _ = split_name(env_name)
    opts: dict[str, Any] = {} if agent == "stream_ac" else {"exploration_fraction": 0.0}
    if backend != "torch":
        opts["backend"] = backend
    opts.update(options or {})
    return make_learner(env_name, agent, env, build_config(agent, suite, 10**9, opts), seed=0)


def measure(agent: str, env_name: str, steps: int, warmup: int, repeats: int, backend: str = "torch",
            options: dict[str, Any] | None = None, env_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Median agent steps/s over ``repeats`` timed blocks of ``steps`` steps after ``warmup`` untimed ones.

    ``options`` are agent config fields (e.g. ``{"network": "stream_x"}``), ``env_options`` the arcade env's.
    """
    env = make_arcade_env(env_name, env_options)
    learner = _make(agent, env_name, env, backend, options)
    obs, _ = env.reset(seed=0)

    def block(n: int) -> tuple[float, float]:
        nonlocal obs
        t0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            a = learner.act(obs)
            nxt, r, term, trunc, _ = env.step(a)
            learner.observe(obs, a, float(r), nxt, term, trunc)
            obs = env.reset()[0] if term or trunc else nxt
        wall = time.perf_counter() - t0
        return n / wall, (time.process_time() - cpu0) / wall

    block(warmup)
    timed = [block(steps) for _ in range(repeats)]
    rates = [r for r, _ in timed]
    row = {"agent": agent, "backend": backend, "env": env_name, "steps_per_second": statistics.median(rates),
           "repeats": rates, "steps": steps, "cpu_per_wall": statistics.median(c for _, c in timed)}
    if hasattr(learner, "spr_updates"):
        row["spr_updates"] = learner.spr_updates
    env.close()
    return row


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.streaming.streaming_speed", description=__doc__.splitlines()[0])
    p.add_argument("--agents", default="stream_q,stream_ac,stream_spr")
    p.add_argument("--envs", default="minatar:breakout,atari:Breakout,octax:brix")
    p.add_argument("--steps", type=int, default=2000, min=1, max=10_000_000,
                   help="timed steps per repeat (Atari/Octax use a quarter)")
    p.add_argument("--warmup", type=int, default=200, min=0, max=10_000_000)
    p.add_argument("--repeats", type=int, default=3, min=1, max=1000)
    p.add_argument("--baseline", action="store_true", help="also time the unfused autograd Stream Q(λ)")
    p.add_argument("--numba", action="store_true",
                   help="also time agents with the compiled-network backend (backend=numba)")
    p.add_argument("--out", writes="folder", type=Path, default=Path("runs/streaming_speed"))
    args = p.parse_args(argv)
    limit_threads(1)
    agents = [a for a in args.agents.split(",") if a] + (["autograd_stream_q"] if args.baseline else [])
    valid = [*AGENTS, "autograd_stream_q"]
    for agent in agents or [""]:
        if agent not in valid:
            raise choice_error("agent", agent, valid)
    env_names = [e for e in args.envs.split(",") if e]
    if not env_names:
        raise ConfigError("--envs names no env; e.g. minatar:breakout,atari:Breakout,octax:brix")
    rows = []
    for env_name in env_names:
        n = args.steps if env_name.startswith("minatar") else max(args.steps // 4, 50)
        runs = [(a, "torch") for a in agents]
        if args.numba:
            runs += [(a, "numba") for a in agents if a in NUMBA_AGENTS]
        for agent, backend in runs:
            row = measure(agent, env_name, n, args.warmup, args.repeats, backend)
            rows.append(row)
            label = agent if backend == "torch" else f"{agent} ({backend})"
            print(f"{env_name:22s} {label:20s} {row['steps_per_second']:8.0f} steps/s  "
                  f"(repeats: {', '.join(f'{r:.0f}' for r in row['repeats'])})", flush=True)
    pools = check_thread_pools(1)  # read after the runs: numba's pool exists only once a kernel ran
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "speed.json", {
        "rows": rows, "torch": torch.__version__, "threads": torch.get_num_threads(), "thread_pools": pools,
        "loadavg_at_end": os.getloadavg(), "cpus": os.cpu_count()})
    print("\n| env | agent | backend | steps/s (median) |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['env']} | {r['agent']} | {r['backend']} | {r['steps_per_second']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
