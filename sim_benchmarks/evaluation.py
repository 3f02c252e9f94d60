"""Evaluation runs: resolve names, build jobs, run them through an executor into a results folder, summarise."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envs.errors import ConfigError, choice_error
from sim_benchmarks import registry
from sim_benchmarks.executors import EXECUTORS, make_executor
from sim_benchmarks.jobs import make_jobs
from sim_benchmarks.leaderboard import write_leaderboard
from sim_benchmarks.store import ResultsStore
from sim_benchmarks.summary import build_summary
from sim_benchmarks.train_log import write_json_atomic


@dataclass
class EvalConfig:
    """One evaluation: suite (and optional task), policies, episodes per task per policy, seeds, execution."""

    env: str
    policies: list[str] | None = None  # None: the suite's defaults
    episodes: int | None = None  # None: the suite's default
    seed: int = 0
    workers: int | None = None  # None: the suite's default
    executor: str | None = None  # None: process when workers > 1, else serial
    out: Path | None = None
    resume: bool = False
    video: int = 0
    env_options: dict[str, Any] = field(default_factory=dict)
    policy_options: dict[str, Any] = field(default_factory=dict)


def resolve_env(env: str) -> tuple[registry.SuiteSpec, list[str]]:
    """``suite``, ``suite/task`` or ``suite:task`` → the suite and its selected tasks."""
    all_suites = registry.suites()
    name, sep, task = env.partition("/")
    if not sep and ":" in env and env.split(":", 1)[0] in all_suites:
        name, _, task = env.partition(":")
    if name not in all_suites:
        hint = ""
        if name in registry.unavailable():
            hint = f" (suite module present but not importable: {registry.unavailable()[name]})"
        raise ConfigError(str(choice_error("env", env, list(all_suites))) + hint)
    suite = all_suites[name]
    if not task:
        return suite, list(suite.tasks)
    if task not in suite.tasks:
        raise choice_error(f"task of {name}", task, list(suite.tasks))
    return suite, [task]


def validate(cfg: EvalConfig) -> tuple[registry.SuiteSpec, list[str], list[str], int]:
    """Check every user-facing value before anything is written; returns (suite, tasks, policies, episodes)."""
    suite, tasks = resolve_env(cfg.env)
    offered = registry.policies_for(suite.name)
    names = list(cfg.policies) if cfg.policies else list(suite.default_policies)
    for p in names:
        if p not in offered:
            raise choice_error(f"policy for {suite.name}", p, offered)
    if len(set(names)) != len(names):
        raise ConfigError(f"--policy lists a policy twice: {','.join(names)}")
    registry.check_policy_options(suite.name, cfg.policy_options)
    if suite.options_type is not None:
        suite.options_type.from_options(cfg.env_options)
    episodes = suite.default_episodes if cfg.episodes is None else cfg.episodes
    if episodes < 1:
        raise ConfigError(f"--episodes must be a positive integer, got {episodes}")
    if cfg.workers is None:
        cfg.workers = suite.default_workers
    if cfg.workers < 1:
        raise ConfigError(f"--workers must be a positive integer, got {cfg.workers}")
    if cfg.executor is None:
        cfg.executor = "process" if cfg.workers > 1 else "serial"
    if cfg.video < 0:
        raise ConfigError(f"--video must be >= 0, got {cfg.video}")
    if cfg.executor not in EXECUTORS:
        raise choice_error("executor", cfg.executor, EXECUTORS)
    if cfg.executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError("--executor ray needs the 'ray' extra: pip install 'embodia[ray]'") from None
    return suite, tasks, names, episodes


def default_out_dir(suite: str) -> Path:
    """A fresh timestamped folder under runs/."""
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{suite.replace('/', '_')}"


def run_evaluation(cfg: EvalConfig, on_progress: Callable[[int], None] | None = None,
                   on_start: Callable[[int], None] | None = None) -> tuple[dict[str, Any], Path]:
    """Run (or resume) an evaluation; returns the summary and the results folder.

    ``on_start(n)`` is told how many episodes remain; ``on_progress(1)`` is called per finished episode.
    """
    suite, tasks, names, episodes = validate(cfg)
    out = Path(cfg.out) if cfg.out else default_out_dir(suite.name)
    config = {
        "env": cfg.env, "benchmark": suite.name, "tasks": tasks, "policies": names, "episodes": episodes,
        "seed": cfg.seed, "video": cfg.video, "env_options": cfg.env_options, "policy_options": cfg.policy_options,
    }
    store = ResultsStore(out, config, resume=cfg.resume)
    start = time.perf_counter()
    try:
        done = store.done_keys()
        jobs = [j for j in make_jobs(suite.name, tasks, names, episodes, cfg.seed, cfg.video, cfg.env_options,
                                     cfg.policy_options) if j.key not in done]
        if on_start:
            on_start(len(jobs))
        executor = make_executor(cfg.executor, cfg.workers, str(out / "videos") if cfg.video else None)
        for record in executor.map(jobs):
            store.append(record)
            if on_progress:
                on_progress(1)
        summary = build_summary(suite.name, store.records(), config, time.perf_counter() - start)
    except ConfigError:  # e.g. a bad policy option found when the first worker builds the policy
        store.discard_if_empty()
        raise
    finally:
        store.close()
    write_json_atomic(out / "summary.json", summary)
    write_leaderboard([summary], out)
    return summary, out


def config_dict(cfg: EvalConfig) -> dict[str, Any]:
    """The dataclass as plain JSON-able values (for logs)."""
    d = asdict(cfg)
    d["out"] = str(cfg.out) if cfg.out else None
    return d
