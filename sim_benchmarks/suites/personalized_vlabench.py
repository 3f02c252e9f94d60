"""Registers the ``personalized_vlabench`` suite (MuJoCo, four cameras, absolute EE actions) and its policies.

The policies keep their names from the SIMPLER suite and are extended to this one with factories that fit its env:
``scripted_expert`` (the privileged VLABench expert), ``generic`` / ``hard_prompt`` / ``soft_prompt`` (the frozen
generic VLA, whose SIMPLER deltas are turned into absolute targets), ``vap`` (multi-view grounding) and
``oracle_mask``. Perception and torch load inside the factories: the CLI imports every suite module per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.errors import ConfigError, choice_error
from sim_benchmarks import registry
from sim_benchmarks.registry import PolicyContext, SuiteSpec, register_suite

# The SIMPLER policy modules register first, so their names can be extended below (suite modules otherwise load in
# alphabetical order).
from sim_benchmarks.suites import personalized_simpler, vap_policies, vla_policies  # noqa: F401  isort: skip

SUITE = "personalized_vlabench"


def _make(task: str, options: Mapping[str, Any]):
    from envs.manipulation.vlabench.tasks import TASKS

    try:
        from envs.manipulation.vlabench.env import make_env
    except ImportError as exc:
        raise ConfigError(f"personalized_vlabench needs the 'vlabench' extra ({exc.name} is missing): "
                          "pip install 'embodia[vlabench]'") from None
    if task not in TASKS:
        raise choice_error("task", task, sorted(TASKS))
    return make_env(task, options)


def _tasks() -> dict[str, str]:
    from envs.manipulation.vlabench.tasks import TASKS

    return {name: t.description for name, t in TASKS.items()}


def _metrics(info: dict[str, Any], total_return: float, steps: int) -> dict[str, Any]:
    from envs.manipulation.vlabench.env import episode_metrics

    return episode_metrics(info, total_return, steps)


register_suite(SuiteSpec(
    name=SUITE,
    description="MuJoCo Personalized-VLABench: select *my* object among look-alikes, 4 cameras, absolute EE actions",
    tasks=_tasks(),
    make_env=_make,
    # Sized to finish in under 10 minutes on 2 loaded cores; the results page uses --episodes 20-50.
    default_policies=("scripted_expert", "generic", "vap", "oracle_mask"),
    default_episodes=2,
    default_workers=2,
    max_steps=200,
    episode_metrics=_metrics,
))


def _expert(ctx: PolicyContext) -> Any:
    from policies.vlabench_expert import VLABenchExpert

    return VLABenchExpert(ctx.env, seed=ctx.seed, noise_std=float(ctx.options.get("expert_noise", 0.0)))


registry.extend_policy("scripted_expert", SUITE, _expert)
