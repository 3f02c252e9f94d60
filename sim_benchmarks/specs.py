"""What a suite module declares: suites, policies, extensions of a policy to one more suite, training families.

A module under ``sim_benchmarks/suites/`` lists its declarations in ``SPECS`` (in order); the registry's table says
which modules assemble which suite and adds their declarations when a run needs them. The declarations know
nothing of the registry, so importing a suite module never imports it back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym


@dataclass(frozen=True)
class PolicyContext:
    """What a policy factory is told when a worker builds a policy for one (suite, task)."""

    suite: str
    task: str
    policy: str
    seed: int
    env: gym.Env  # privileged policies (oracles, scripted experts) may read simulator state through it
    options: Mapping[str, Any] = field(default_factory=dict)
    # The policies offered for ``suite`` by name, filled in by the registry before a factory runs: a wrapper (VAP)
    # builds its base policy from them.
    policies: Mapping[str, PolicySpec] = field(default_factory=dict)


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
    # (suite, Options type) of the keys a PolicyExtension's factory reads in that suite (see ``options_type``).
    extension_types: tuple[tuple[str, type], ...] = ()

    def option_names(self) -> tuple[str, ...]:
        """Every ``--policy-option`` key this policy reads: the declared names plus the typed fields."""
        typed = tuple(self.options_type.names()) if self.options_type is not None else ()
        extended = tuple(n for _, t in self.extension_types for n in t.names())
        return tuple(dict.fromkeys((*self.options, *typed, *extended)))

    def typed_options(self, suite: str) -> tuple[type, ...]:
        """The Options types that check this policy's keys in ``suite``: its own and its extensions' there."""
        own = (self.options_type,) if self.options_type is not None else ()
        return own + tuple(t for s, t in self.extension_types if s == suite)


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


@dataclass(frozen=True)
class PolicyExtension:
    """Offer the policy ``name`` (declared by a module loaded earlier) for one more ``suite`` too, built there by
    ``factory``; the other suites keep their factory. ``options`` adds option keys the new factory reads;
    ``options_type`` adds typed ones (an ``envs.config.Options``, checked before the run as the policy's own are)."""

    name: str
    suite: str
    factory: Callable[[PolicyContext], Any]
    options: tuple[str, ...] = ()
    options_type: type | None = None


Spec = SuiteSpec | PolicySpec | PolicyExtension | TrainerSpec
