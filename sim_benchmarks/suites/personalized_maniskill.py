"""Declares the ``personalized_maniskill`` suite (ManiSkill3, SAPIEN 3 on CPU) and the VAP table's policies on it.

    python -m launch.eval --env personalized_maniskill --episodes 20

The policies keep their names from the SIMPLER suite and are extended to this one: ``scripted_expert`` (the
privileged pick expert), ``generic`` / ``hard_prompt`` / ``soft_prompt`` (the frozen generic VLA of
``checkpoints/generic_vla``, trained on the PyBullet suite's renders — it has never seen this scene), ``vap`` and
``oracle_mask`` (VAP's detector → matcher → tracker → prompter around ``generic``, grounding on this env's RGB-D
frame; the oracle takes the simulator's mask). SAPIEN loads once an env is built, perception and torch inside the
factories. The registry's table loads the SIMPLER and VLABench modules (which declare the policies extended
here, ``modular`` among them) before this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.errors import choice_error
from envs.manipulation.maniskill import PERSONAL_TASKS
from envs.manipulation.maniskill.personalized import PersonalizedManiSkillOptions, make_env
from sim_benchmarks.specs import PolicyContext, PolicyExtension, Spec, SuiteSpec
from sim_benchmarks.suites import vap_policies, vla_policies

SUITE = "personalized_maniskill"
DESCRIPTIONS = {"pick_my": "ManiSkill3 Panda: pick up my <object> among same-category look-alikes (lift 5 cm)"}


def _make(task: str, options: Mapping[str, Any]) -> Any:
    if task not in PERSONAL_TASKS:
        raise choice_error("task", task, list(PERSONAL_TASKS))
    return make_env(task, options)


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(SuiteSpec(
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
    from policies.manipulation.maniskill_expert import PersonalizedPickExpert

    return PersonalizedPickExpert(ctx.env)


def _vap(ctx: PolicyContext, oracle: bool) -> Any:
    env = ctx.env.unwrapped
    privileged = (env.sensors, lambda: int(env.personal_body_id), env.other_object_ids)
    return vap_policies.build_vap(ctx, oracle=oracle, privileged=privileged, fovy_deg=env.camera_fovy_deg())


SPECS.append(PolicyExtension("scripted_expert", SUITE, _expert))
SPECS.append(PolicyExtension("generic", SUITE, vla_policies._generic))
SPECS.append(PolicyExtension("hard_prompt", SUITE, vla_policies._hard_prompt))
SPECS.append(PolicyExtension("soft_prompt", SUITE, vla_policies._soft_prompt))
SPECS.append(PolicyExtension("vap", SUITE, lambda ctx: _vap(ctx, oracle=False)))
SPECS.append(PolicyExtension("oracle_mask", SUITE, lambda ctx: _vap(ctx, oracle=True)))


def _modular(ctx: PolicyContext) -> Any:
    """The modular base (RGB-D perception of the instruction's object + the expert's pick phases), "my" dropped."""
    from perception.detectors import ProposalDetector
    from policies.manipulation.maniskill_modular import ModularPickBase

    env = ctx.env.unwrapped
    return ModularPickBase(lambda: env.sensors()["depth"], env.camera_pose(), detector_fn=ProposalDetector)


SPECS.append(PolicyExtension("modular", SUITE, _modular))
