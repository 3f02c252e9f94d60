"""Evaluation runs: resolve names, build jobs, run them through an executor into a results folder, summarise."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, KeysView, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from envs.atomic_io import write_json_atomic
from envs.config import Options
from envs.errors import ConfigError, choice_error
from sim_benchmarks import registry
from sim_benchmarks.executors import EXECUTORS, make_executor
from sim_benchmarks.jobs import make_jobs
from sim_benchmarks.leaderboard import write_leaderboard
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.store import ResultsStore
from sim_benchmarks.summary import build_summary

# Bounds on what one run may ask for: the job list is built in memory, and every worker is a process.
MAX_EPISODES = 200_000  # tasks x policies x episodes
MAX_WORKERS = max(64, 4 * (os.cpu_count() or 1))


@dataclass(frozen=True)
class EvalConfig(Options):
    """One evaluation: suite (and optional task), policies, episodes per task per policy, seeds, execution.

    ``None`` fields mean "the suite's default"; :func:`resolved` fills them in (and the suite's policy options)."""

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
    names = registry.suite_names()  # the table: nothing is imported until the suite is known
    name, sep, task = env.partition("/")
    if not sep and ":" in env and env.split(":", 1)[0] in names:
        name, _, task = env.partition(":")
    if name not in names:
        raise choice_error("env", env, names)
    suite = registry.suite(name)  # imports only the modules that assemble this suite
    if not task:
        return suite, list(suite.default_tasks or suite.tasks)
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
    if suite.episode_count is not None:
        available, task = min((suite.episode_count(t, cfg.env_options), t) for t in tasks)
        if episodes > available:
            raise ConfigError(f"--episodes {episodes} is more than the {available} episodes of "
                              f"{suite.name}/{task}; use --episodes <= {available}")
    if episodes * len(tasks) * len(names) > MAX_EPISODES:
        raise ConfigError(f"--episodes {episodes} x {len(tasks)} task(s) x {len(names)} policy(ies) is "
                          f"{episodes * len(tasks) * len(names)} episodes; at most {MAX_EPISODES} per run")
    full = resolved(cfg, suite)
    if not 1 <= full.workers <= MAX_WORKERS:
        raise ConfigError(f"--workers must be in 1..{MAX_WORKERS}, got {full.workers}")
    if cfg.video < 0:
        raise ConfigError(f"--video must be >= 0, got {cfg.video}")
    if full.executor not in EXECUTORS:
        raise choice_error("executor", full.executor, EXECUTORS)
    if full.executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError("--executor ray needs the 'ray' extra: pip install 'embodia[ray]'") from None
    return suite, tasks, names, episodes


def resolved(cfg: EvalConfig, suite: registry.SuiteSpec | None = None) -> EvalConfig:
    """``cfg`` with the suite's defaults filled in: its policy options under the user's, its worker count, and the
    executor (process pool when there is more than one worker)."""
    suite = suite or resolve_env(cfg.env)[0]
    workers = suite.default_workers if cfg.workers is None else cfg.workers
    return replace(cfg, policy_options={**suite.default_policy_options, **cfg.policy_options}, workers=workers,
                   executor=cfg.executor if cfg.executor is not None else "process" if workers > 1 else "serial")


class _ReadTracker(Mapping):
    """The options a suite's ``make_env`` is given, recording which keys it asked for.

    A key the suite never asked for (by ``get``, ``[]`` or ``in``) is one it ignores: a typo that would run the
    default silently. A suite that enumerates the options (``dict(options)``, iteration) checks them itself.
    """

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._options = dict(options)
        self.asked: set[str] = set()
        self.enumerated = False

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return self._options[key]

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return key in self._options

    def __iter__(self) -> Iterator[str]:
        self.enumerated = True
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def keys(self) -> KeysView[str]:  # dict(mapping) calls keys(): that enumerates
        self.enumerated = True
        return self._options.keys()


def _user_error(flag: str, options: Mapping[str, Any], where: str, exc: Exception) -> ConfigError:
    shown = " ".join(f"{k}={v}" for k, v in options.items())
    return ConfigError(f"{flag} {shown} rejected by {where}: {type(exc).__name__}: {exc}")


def check_buildable(suite: registry.SuiteSpec, tasks: list[str], names: list[str], cfg: EvalConfig) -> None:
    """Build each task's env and each policy once, before anything is written, and throw them away.

    This finds bad option values, option keys the suite never reads, and unreadable checkpoints up front instead
    of in a worker after the first results were written. An exception raised only because of the user's options
    (ValueError, TypeError or KeyError with options given) is reported as a user error naming them.
    """
    tracker = _ReadTracker(cfg.env_options)
    first = None
    # Env options can be task-specific (e.g. an image only for personalised tasks), so each task is built once
    # when options are given; without options the first task's env suffices to build the policies on.
    for task in tasks if cfg.env_options else tasks[:1]:
        try:
            env = suite.make_env(task, tracker)
        except ConfigError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            if not cfg.env_options:
                raise
            raise _user_error("--env-option", cfg.env_options, f"{suite.name}/{task}", exc) from None
        if first is None:
            first = (task, env)
        else:
            env.close()
    ignored = sorted(set(cfg.env_options) - tracker.asked) if not tracker.enumerated else []
    if ignored:
        if first is not None:
            first[1].close()
        valid = ", ".join(sorted(tracker.asked)) or "(none)"
        raise ConfigError(f"unknown env option {ignored[0]!r} for {suite.name} (the suite never reads it); "
                          f"valid: {valid}")
    assert first is not None
    task, env = first
    try:
        for name in names:
            ctx = registry.PolicyContext(suite=suite.name, task=task, policy=name, seed=cfg.seed, env=env,
                                         options=dict(cfg.policy_options))
            try:
                registry.policy(name, suite.name).factory(ctx)
            except ConfigError:
                raise
            except (ValueError, TypeError, KeyError) as exc:
                if not cfg.policy_options:
                    raise
                raise _user_error("--policy-option", cfg.policy_options, f"policy {name}", exc) from None
    finally:
        env.close()


def default_out_dir(suite: str) -> Path:
    """A fresh timestamped folder under runs/."""
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{suite.replace('/', '_')}"


def run_evaluation(cfg: EvalConfig, on_progress: Callable[[int], None] | None = None,
                   on_start: Callable[[int], None] | None = None) -> tuple[dict[str, Any], Path]:
    """Run (or resume) an evaluation; returns the summary and the results folder.

    ``on_start(n)`` is told how many episodes remain; ``on_progress(1)`` is called per finished episode.
    """
    suite, tasks, names, episodes = validate(cfg)
    cfg = resolved(cfg, suite)
    out = check_out_dir(cfg.out) if cfg.out else default_out_dir(suite.name)
    check_buildable(suite, tasks, names, cfg)
    config = {
        "env": cfg.env, "benchmark": suite.name, "tasks": tasks, "policies": names, "episodes": episodes,
        "seed": cfg.seed, "video": cfg.video, "env_options": cfg.env_options, "policy_options": cfg.policy_options,
    }
    store = ResultsStore(out, config, resume=cfg.resume)  # validates resume, then locks the folder until close()
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
        write_json_atomic(out / "summary.json", summary)
        write_leaderboard([summary], out)
    except BaseException:  # a failure before the first record (e.g. inside a worker): remove what a fresh run wrote
        store.discard_if_empty()
        raise
    finally:
        store.close()
    return summary, out


def config_dict(cfg: EvalConfig) -> dict[str, Any]:
    """The dataclass as plain JSON-able values (for logs)."""
    d = asdict(cfg)
    d["out"] = str(cfg.out) if cfg.out else None
    return d
