"""Registers the ``personalized_maniskill`` suite (ManiSkill3, SAPIEN 3 on CPU) and the VAP table's policies on it.

    python -m launch.eval --env personalized_maniskill --episodes 20

The policies keep their names from the SIMPLER suite and are extended to this one: ``scripted_expert`` (the
privileged pick expert), ``generic`` / ``hard_prompt`` / ``soft_prompt`` (the frozen generic VLA of
``checkpoints/generic_vla``, trained on the PyBullet suite's renders — it has never seen this scene), ``vap`` and
``oracle_mask`` (VAP's detector → matcher → tracker → prompter around ``generic``, grounding on this env's RGB-D
frame; the oracle takes the simulator's mask). SAPIEN loads once an env is built, perception and torch inside the
factories: the CLI imports every suite module per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.errors import choice_error
from envs.manipulation.maniskill import PERSONAL_TASKS
from envs.manipulation.maniskill.personalized import PersonalizedManiSkillOptions, make_env
from sim_benchmarks import registry
from sim_benchmarks.registry import PolicyContext, SuiteSpec, register_suite

# The SIMPLER policy modules and the VLABench suite (which registers ``modular``) register first, so their names can
# be extended below (suite modules otherwise load in alphabetical order).
from sim_benchmarks.suites import personalized_simpler, personalized_vlabench, vap_policies, vla_policies  # noqa: F401  isort: skip

SUITE = "personalized_maniskill"
DESCRIPTIONS = {"pick_my": "ManiSkill3 Panda: pick up my <object> among same-category look-alikes (lift 5 cm)"}


def _make(task: str, options: Mapping[str, Any]) -> Any:
    if task not in PERSONAL_TASKS:
        raise choice_error("task", task, list(PERSONAL_TASKS))
    return make_env(task, options)


register_suite(SuiteSpec(
    name=SUITE,
    description="ManiSkill3 Personalized selection: pick *my* object among look-alikes (SAPIEN 3, CPU)",
    tasks=DESCRIPTIONS,
    make_env=_make,
    # Sized for minutes on 2 cores (~4 control steps/s on a loaded core); the results page uses --episodes 20+.
    default_policies=("generic", "hard_prompt", "soft_prompt", "vap", "oracle_mask", "scripted_expert"),
    default_episodes=2,
    max_steps=80,
    options_type=PersonalizedManiSkillOptions,
))


def _expert(ctx: PolicyContext) -> Any:
    from policies.maniskill_expert import PersonalizedPickExpert

    return PersonalizedPickExpert(ctx.env)


def _vap(ctx: PolicyContext, oracle: bool) -> Any:
    env = ctx.env.unwrapped
    privileged = (env.sensors, lambda: int(env.personal_body_id), env.other_object_ids)
    return vap_policies.build_vap(ctx, oracle=oracle, privileged=privileged, fovy_deg=env.camera_fovy_deg())


registry.extend_policy("scripted_expert", SUITE, _expert)
registry.extend_policy("generic", SUITE, vla_policies._generic)
registry.extend_policy("hard_prompt", SUITE, vla_policies._hard_prompt)
registry.extend_policy("soft_prompt", SUITE, vla_policies._soft_prompt)
registry.extend_policy("vap", SUITE, lambda ctx: _vap(ctx, oracle=False))
registry.extend_policy("oracle_mask", SUITE, lambda ctx: _vap(ctx, oracle=True))


def _modular(ctx: PolicyContext) -> Any:
    """The modular base (RGB-D perception of the instruction's object + the expert's pick phases), "my" dropped."""
    from perception.detectors import ProposalDetector
    from policies.maniskill_modular import ModularPickBase

    env = ctx.env.unwrapped
    return ModularPickBase(lambda: env.sensors()["depth"], env.camera_pose(), detector_fn=ProposalDetector)


registry.extend_policy("modular", SUITE, _modular)
