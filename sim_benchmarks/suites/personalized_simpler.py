"""Declares the ``personalized_simpler`` and ``generic_simpler`` suites and their ``scripted_expert``.

(``random`` is offered for every suite by ``common``.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.errors import choice_error
from envs.manipulation.env import GENERIC_TASKS, PERSONALIZED_TASKS, PersonalizedSimplerEnv, SimplerConfig, make_env
from policies.manipulation.scripted_expert import ExpertOptions, ScriptedExpert
from sim_benchmarks.specs import PolicyContext, PolicySpec, Spec, SuiteSpec

SUITES = ("personalized_simpler", "generic_simpler")


def _maker(tasks: Mapping[str, Any]):
    def make(task: str, options: Mapping[str, Any]) -> PersonalizedSimplerEnv:
        if task not in tasks:
            raise choice_error("task", task, sorted(tasks))
        return make_env(task, options)

    return make


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(SuiteSpec(
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
    options_type=SimplerConfig,
))
SPECS.append(SuiteSpec(
    name="generic_simpler",
    description="Generic twins of Personalized-SIMPLER: instructions name category + colour (+ pattern)",
    tasks={name: spec.description for name, spec in GENERIC_TASKS.items()},
    make_env=_maker(GENERIC_TASKS),
    default_policies=("generic", "scripted_expert", "random"),
    default_episodes=10,
    default_workers=2,
    max_steps=80,
    options_type=SimplerConfig,
))


def _expert(ctx: PolicyContext) -> ScriptedExpert:
    opts = ExpertOptions.from_options(ctx.options, strict=False)
    return ScriptedExpert(ctx.env, noise_std=opts.expert_noise, seed=ctx.seed, descent=opts.expert_descent)


SPECS.append(PolicySpec("scripted_expert", "privileged scripted top-down grasp expert (oracle ceiling)",
                           _expert, suites=SUITES, options_type=ExpertOptions))
