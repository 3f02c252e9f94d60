"""Training runs of the streaming-RL family (arcade envs × Stream Q / AC / SPR), behind ``launch.train``.

    python -m launch.train --env minatar:breakout --agent stream_spr --steps 200000 --seed 1 --out runs/x

``run`` writes the train contract (``metrics.jsonl`` one record per finished episode, ``summary.json``), a
learning-curve PNG and a checkpoint (learner + normalisers + RNG + counters) every ``checkpoint_every`` steps;
``--resume`` restarts from that checkpoint and reproduces the uninterrupted run bit for bit.
Options (``--option key=value``): any field of the agent's config (e.g. ``k=10``, ``projection=rl``,
``exploration_fraction=0.1``), ``checkpoint_every``, and env options prefixed ``env.`` (``env.sticky_action_prob``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from agents.streaming import LEARNERS
from agents.streaming.loop import StreamingLoop
from envs.arcade import make_arcade_env, split_name
from envs.atomic_io import atomic_path
from envs.config import Options, option
from envs.errors import ConfigError, choice_error
from policies.streaming.representation import representation_stats
from sim_benchmarks.thread_pools import limit_threads, thread_pools
from sim_benchmarks.train_log import TrainLog


@dataclass(frozen=True)
class StreamingRunOptions(Options):
    """The run's own ``--option`` keys (the learner's come from its config class, the env's carry ``env.``)."""

    title: ClassVar[str] = "streaming run"

    checkpoint_every: int = option(50_000, "env steps between checkpoints (what --resume restarts from)", min=1)


CHECKPOINT = "checkpoint.pt"
PROBE_STATES = 1000  # states of uniform random play on which the final encoder's rank is measured


def env_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``env.``-prefixed run options, prefix stripped: the keyword options of the arcade env."""
    return {k[4:]: v for k, v in options.items() if k.startswith("env.")}


def build_config(agent: str, suite: str, steps: int, options: Mapping[str, Any]) -> Any:
    """The agent's config (an ``envs.config.Options``) with ``options`` applied: unknown keys → ConfigError listing
    the valid ones, values through the typed-option parser (``adaptive=yes`` is an error, never a silent False)."""
    _, cfg_cls = LEARNERS[agent]
    names = cfg_cls.names()
    values: dict[str, Any] = {"total_steps": int(steps)}
    if suite == "atari" and "exploration_fraction" in names:
        values["exploration_fraction"] = cfg_cls.ATARI_EXPLORATION_FRACTION
    for key, value in options.items():
        if key.startswith("env.") or key in StreamingRunOptions.names():
            continue
        if key not in names:
            valid = sorted(names) + sorted(StreamingRunOptions.names()) + ["env.<option>"]
            raise choice_error(f"option for {agent}", key, valid)
        values[key] = value
    return cfg_cls.from_options(values)


def run_options(options: Mapping[str, Any]) -> StreamingRunOptions:
    """The run's own options (``checkpoint_every``) out of all of ``--option``'s."""
    return StreamingRunOptions.from_options(options, strict=False)


def make_learner(env_name: str, agent: str, env: Any, config: Any, seed: int) -> Any:
    """Build the learner ``agent`` for ``env`` (its suite picks the network)."""
    if agent not in LEARNERS:
        raise choice_error("streaming agent", agent, list(LEARNERS))
    suite, _ = split_name(env_name)
    cls, _ = LEARNERS[agent]
    return cls(suite, env.observation_space.shape, int(env.action_space.n), config, seed=seed)


def probe_observations(env_name: str, env_opts: Mapping[str, Any], n: int, seed: int) -> np.ndarray:
    """``n`` observations of uniform random play on a fresh env (seeded by ``seed`` only, so every agent's encoder
    is measured on the same states)."""
    env = make_arcade_env(env_name, dict(env_opts))
    rng = np.random.default_rng([int(seed), 0x9B0BE])
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    out = []
    for _ in range(n):
        out.append(np.asarray(obs, np.float32))
        obs, _, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
        if term or trunc:
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
    env.close()
    return np.stack(out)


def plot_learning_curve(records: list[dict[str, Any]], path: Path, title: str) -> None:
    """Episode returns against env steps, with a 100-episode moving average."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    if records:
        steps = np.array([r["step"] for r in records])
        rets = np.array([r["return"] for r in records], dtype=float)
        ax.plot(steps, rets, ".", ms=2, alpha=0.3, label="episode")
        window = min(100, len(rets))
        avg = np.convolve(rets, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], avg, lw=2, label=f"mean of last {window}")
        ax.legend(loc="upper left")
    ax.set_xlabel("env steps")
    ax.set_ylabel("return")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def legacy_config(config: Any, state: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """``config`` for resuming ``state``: a field the checkpoint predates and ``options`` do not set takes the
    value runs had before it existed (the config class's ``LEGACY_VALUES``), so the run continues as it began."""
    saved_cfg = state.get("identity", {}).get("config", {}) if isinstance(state, Mapping) else {}
    legacy = {name: value for name, value in getattr(config, "LEGACY_VALUES", {}).items()
              if name not in saved_cfg and name not in options}
    return dataclasses.replace(config, **legacy) if legacy else config


def train(env: str, agent: str, steps: int, seed: int, out_dir: Path, resume: bool = False,
          options: Mapping[str, Any] | None = None, on_progress: Callable[[int], None] | None = None) -> dict:
    """Train ``agent`` on arcade env ``env`` for ``steps`` env steps; the TrainerSpec entry point."""
    limit_threads(1)  # batch-1 updates: more threads (torch or numpy's BLAS) only add contention
    torch.use_deterministic_algorithms(True)
    options = dict(options or {})
    if agent not in LEARNERS:
        raise choice_error("streaming agent", agent, list(LEARNERS))
    suite, _ = split_name(env)
    env_opts = env_options(options)
    every = run_options(options).checkpoint_every
    config = build_config(agent, suite, steps, options)
    out_dir = Path(out_dir)
    ckpt_path = out_dir / CHECKPOINT
    state = None
    if resume and ckpt_path.exists():
        try:
            state = torch.load(ckpt_path, weights_only=False)
        except Exception as exc:  # a truncated or foreign file
            raise ConfigError(f"cannot read checkpoint {str(ckpt_path)!r}: {type(exc).__name__}") from exc
        config = legacy_config(config, state, options)
    env_obj = make_arcade_env(env, env_opts)
    learner = make_learner(env, agent, env_obj, config, seed)
    loop = StreamingLoop(env_obj, learner, seed)
    identity = {"env": env, "agent": agent, "seed": int(seed), "config": dataclasses.asdict(config),
                "env_options": env_opts}
    if state is not None:
        saved = dict(state.get("identity", {}))
        saved_cfg = saved.setdefault("config", {})
        saved_cfg.pop("total_steps", None)
        current = {**identity, "config": {k: v for k, v in identity["config"].items() if k != "total_steps"}}
        before = getattr(config, "LEGACY_VALUES", {})
        for field in dataclasses.fields(config):  # a config field added after the checkpoint, at its old value
            implied = before.get(field.name, field.default)
            if field.name in current["config"] and field.name not in saved_cfg and \
                    current["config"][field.name] == implied:
                saved_cfg[field.name] = implied
        if saved != current:
            raise ConfigError(f"checkpoint {str(ckpt_path)!r} is from another run ({saved.get('env')}, "
                              f"{saved.get('agent')}, seed {saved.get('seed')}); use another --out")
        loop.load_state_dict(state["loop"])
        log = TrainLog(out_dir, resume=True)
        log.truncate_after(loop.counters.step)
    else:
        log = TrainLog(out_dir, resume=False)  # nothing to resume from: start over cleanly
    start_step = loop.counters.step
    if on_progress is not None and start_step:
        on_progress(min(start_step, steps))
    title = f"{agent} on {env} (seed {seed})"
    records: list[dict[str, Any]] = log.records()

    def on_episode(record: dict[str, Any]) -> None:
        log.append(record)
        records.append(record)

    def on_checkpoint() -> None:
        with atomic_path(ckpt_path) as tmp:
            torch.save({"identity": identity, "loop": loop.state_dict()}, tmp)
        plot_learning_curve(records, out_dir / "learning_curve.png", title)

    t0 = time.perf_counter()
    loop.run(steps, on_episode, on_checkpoint, every, on_progress)
    wall = time.perf_counter() - t0
    plot_learning_curve(records, out_dir / "learning_curve.png", title)
    last = [r["return"] for r in records[-100:]]
    representation = representation_stats(learner, probe_observations(env, env_opts, PROBE_STATES, seed))
    summary = log.write_summary({
        "env": env, "agent": agent, "steps": int(loop.counters.step), "seed": int(seed),
        "episodes": len(records),
        "return_last100": float(np.mean(last)) if last else None,
        "steps_per_second": (loop.counters.step - start_step) / wall if wall > 0 else None,
        "wall_s": wall, "resumed_from_step": int(start_step), "thread_pools": thread_pools(),
        "representation": representation,
        "config": {**dataclasses.asdict(config), "env_options": env_opts, "checkpoint_every": every},
    })
    log.close()
    env_obj.close()
    return summary
