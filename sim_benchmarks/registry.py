"""Name → factory registry for evaluation suites, policies and training families.

Suite modules under ``sim_benchmarks/suites/`` register themselves when imported; :func:`load_all` imports every
module there (no central list). A suite module may fail to import when its optional extra is not installed: that
suite is then listed as unavailable with the reason instead of breaking the whole CLI.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym

from envs.errors import ConfigError


@dataclass(frozen=True)
class PolicyContext:
    """What a policy factory is told when a worker builds a policy for one (suite, task)."""

    suite: str
    task: str
    policy: str
    seed: int
    env: gym.Env  # privileged policies (oracles, scripted experts) may read simulator state through it
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SuiteSpec:
    """An evaluation suite: tasks, how to build each task's env, and run defaults."""

    name: str
    description: str
    tasks: Mapping[str, str]  # task name -> one-line description
    make_env: Callable[[str, Mapping[str, Any]], gym.Env]  # (task, options) -> env
    default_policies: tuple[str, ...]
    default_episodes: int = 10
    default_workers: int = 1  # the main job's suite sets 2 so `make eval` uses both cores
    max_steps: int | None = None  # runner's step cap; the env's own truncation normally comes first
    # Maps (final info, episode return, steps) to the record's metrics; default reads info["success"] etc.
    episode_metrics: Callable[[dict[str, Any], float, int], dict[str, Any]] | None = None
    # Tasks a bare ``--env <suite>`` runs (empty: all of them); the others run when named (``--env <suite>/<task>``).
    default_tasks: tuple[str, ...] = ()
    # The typed ``--env-option`` dataclass (an ``envs.config.Options``): validated before a run writes anything and
    # printed by ``--list``.
    options_type: type | None = None
    # ``--policy-option`` values this suite's runs start from (the user's own win), e.g. which trained checkpoint
    # its generic policies load; merged before anything runs, so the run config records them.
    default_policy_options: Mapping[str, Any] = field(default_factory=dict)
    # (task, env options) -> how many distinct episodes the task has (suites whose episodes are a fixed list, e.g.
    # the questions of a split); a larger --episodes is rejected before the run writes anything.
    episode_count: Callable[[str, Mapping[str, Any]], int] | None = None


@dataclass(frozen=True)
class PolicySpec:
    """A policy name, its one-line description, the suites it applies to, and its factory."""

    name: str
    description: str
    factory: Callable[[PolicyContext], Any]
    suites: tuple[str, ...] = ()  # empty: applies to every suite
    # The ``--policy-option`` keys its factory reads; a wrapper (VAP) lists only its own, since the base it builds
    # is registered for the same suite and declares the rest.
    options: tuple[str, ...] = ()
    # The typed options dataclass (an ``envs.config.Options``) the factory validates ``ctx.options`` with; its fields
    # are added to ``options``, and ``--list`` prints them with types and defaults.
    options_type: type | None = None

    def option_names(self) -> tuple[str, ...]:
        """Every ``--policy-option`` key this policy reads: the declared names plus the typed fields."""
        typed = tuple(self.options_type.names()) if self.options_type is not None else ()
        return tuple(dict.fromkeys((*self.options, *typed)))


@dataclass(frozen=True)
class TrainerSpec:
    """A training family for ``launch.train``: env prefixes it handles, its agents, and its entry point.

    ``run(env, agent, steps, seed, out_dir, resume, options)`` writes the train contract (docs/architecture.md)
    (``metrics.jsonl`` + ``summary.json``) and returns the summary dict.
    """

    name: str
    env_prefixes: tuple[str, ...]  # e.g. ("minatar:", "atari:", "octax:")
    agents: Mapping[str, str]  # agent name -> one-line description
    run: Callable[..., dict[str, Any]]
    env_names: Callable[[], list[str]] | None = None  # concrete env names for --list and validation
    options_type: type | None = None  # the typed ``--option`` dataclass, checked before a run writes anything


_SUITES: dict[str, SuiteSpec] = {}
_POLICIES: dict[str, PolicySpec] = {}
_TRAINERS: dict[str, TrainerSpec] = {}
_UNAVAILABLE: dict[str, str] = {}
_LOADED = False


def register_suite(spec: SuiteSpec) -> SuiteSpec:
    """Add a suite; re-registering the same name replaces it (module reloads in tests)."""
    _SUITES[spec.name] = spec
    return spec


def register_policy(spec: PolicySpec) -> PolicySpec:
    """Add a policy; names are global, ``suites`` restricts where it is offered."""
    _POLICIES[spec.name] = spec
    return spec


def extend_policy(name: str, suite: str, factory: Callable[[PolicyContext], Any],
                  options: tuple[str, ...] = ()) -> PolicySpec:
    """Offer the already registered policy ``name`` for one more ``suite`` too, built there by ``factory``.

    The other suites keep the original factory; ``options`` adds option keys the new factory reads.
    """
    spec = _POLICIES[name]
    original = spec.factory

    def build(ctx: PolicyContext) -> Any:
        return factory(ctx) if ctx.suite == suite else original(ctx)

    suites = spec.suites if not spec.suites or suite in spec.suites else (*spec.suites, suite)
    return register_policy(replace(spec, suites=suites, factory=build,
                                   options=tuple(dict.fromkeys((*spec.options, *options)))))


def register_trainer(spec: TrainerSpec) -> TrainerSpec:
    """Add a training family."""
    _TRAINERS[spec.name] = spec
    return spec


def load_all() -> None:
    """Import every suite module once; record the ones whose optional dependencies are missing."""
    global _LOADED
    if _LOADED:
        return
    from sim_benchmarks import suites

    with _quiet_native_stderr():
        for mod in sorted(pkgutil.iter_modules(suites.__path__), key=lambda m: m.name):
            if mod.name.startswith("_"):
                continue
            try:
                importlib.import_module(f"{suites.__name__}.{mod.name}")
            except Exception as exc:  # an optional extra is missing, or the module is broken: list it, keep the CLI
                _UNAVAILABLE[mod.name] = f"{type(exc).__name__}: {exc}"
    _LOADED = True


class _quiet_native_stderr:
    """Silence C-level writes to fd 2 during imports (pybullet prints its build time), keeping errors one line."""

    def __enter__(self) -> None:
        sys.stderr.flush()
        self._saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)


def suites() -> dict[str, SuiteSpec]:
    """All registered suites by name."""
    load_all()
    return dict(sorted(_SUITES.items()))


def policies() -> dict[str, PolicySpec]:
    """All registered policies by name."""
    load_all()
    return dict(sorted(_POLICIES.items()))


def trainers() -> dict[str, TrainerSpec]:
    """All registered training families by name."""
    load_all()
    return dict(sorted(_TRAINERS.items()))


def unavailable() -> dict[str, str]:
    """Suite modules that could not be imported, with the reason."""
    load_all()
    return dict(_UNAVAILABLE)


def policies_for(suite: str) -> list[str]:
    """Names of the policies offered for a suite."""
    return [n for n, p in policies().items() if not p.suites or suite in p.suites]


def policy_option_names(suite: str) -> list[str]:
    """Every ``--policy-option`` key some policy offered for ``suite`` reads (sorted)."""
    return sorted({k for n in policies_for(suite) for k in policies()[n].option_names()})


def check_policy_options(suite: str, options: Mapping[str, Any]) -> None:
    """Reject option keys no policy of ``suite`` reads (a typo would otherwise run the default silently)."""
    valid = policy_option_names(suite)
    for key in options:
        if key not in valid:
            raise ConfigError(f"unknown policy option {key!r} for {suite}; valid: {', '.join(valid) or '(none)'}")
    for name in policies_for(suite):  # values: each typed policy checks the keys it owns (types and ranges)
        spec = policies()[name]
        if spec.options_type is not None:
            spec.options_type.from_options(options, strict=False)


def trainer_for(env: str) -> TrainerSpec | None:
    """The training family whose env prefix matches ``env``, if any."""
    for spec in trainers().values():
        if any(env.startswith(prefix) for prefix in spec.env_prefixes):
            return spec
    return None
