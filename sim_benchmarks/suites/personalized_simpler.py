"""Registers the ``personalized_simpler`` and ``generic_simpler`` suites and their ``scripted_expert``.

(``random`` is registered for every suite by ``classic_control``.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.errors import choice_error
from envs.manipulation.env import GENERIC_TASKS, PERSONALIZED_TASKS, PersonalizedSimplerEnv, make_env
from policies.scripted_expert import ScriptedExpert
from sim_benchmarks.registry import PolicyContext, PolicySpec, SuiteSpec, register_policy, register_suite

SUITES = ("personalized_simpler", "generic_simpler")


def _maker(tasks: Mapping[str, Any]):
    def make(task: str, options: Mapping[str, Any]) -> PersonalizedSimplerEnv:
        if task not in tasks:
            raise choice_error("task", task, sorted(tasks))
        return make_env(task, options)

    return make


register_suite(SuiteSpec(
    name="personalized_simpler",
    description="PyBullet Personalized-SIMPLER: act on *my* object among same-category look-alikes",
    tasks={name: spec.description for name, spec in PERSONALIZED_TASKS.items()},
    make_env=_maker(PERSONALIZED_TASKS),
    # The main job (`make eval`): every baseline against VAP on all four tasks, sized to finish in minutes on
    # 2 cores; the README's tables use --episodes 50 and more.
    default_policies=("generic", "hard_prompt", "soft_prompt", "vap", "oracle_mask", "scripted_expert"),
    default_episodes=4,
    default_workers=2,
    max_steps=80,
))
register_suite(SuiteSpec(
    name="generic_simpler",
    description="Generic twins of Personalized-SIMPLER: instructions name category + colour (+ pattern)",
    tasks={name: spec.description for name, spec in GENERIC_TASKS.items()},
    make_env=_maker(GENERIC_TASKS),
    default_policies=("generic", "scripted_expert", "random"),
    default_episodes=10,
    default_workers=2,
    max_steps=80,
))


def _expert(ctx: PolicyContext) -> ScriptedExpert:
    return ScriptedExpert(ctx.env, noise_std=float(ctx.options.get("expert_noise", 0.0)), seed=ctx.seed,
                          descent=str(ctx.options.get("expert_descent", "gated")))


register_policy(PolicySpec("scripted_expert", "privileged scripted top-down grasp expert (oracle ceiling)",
                           _expert, suites=SUITES,
                           options=("expert_noise", "expert_descent")))
