"""Declares the ``maniskill`` suite: ManiSkill3's built-in tabletop tasks (SAPIEN 3 on CPU) and their expert.

    python -m launch.eval --env maniskill/PickCube-v1 --policy scripted_expert,random --episodes 10

SAPIEN is imported only when an env is built, so listing suites stays fast; a missing Vulkan driver or
``mani-skill`` package then exits 2 with one line naming the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from envs.errors import choice_error
from envs.manipulation.maniskill import TASK_IDS
from envs.manipulation.maniskill.env import ManiSkillEnv, ManiSkillOptions
from sim_benchmarks.specs import PolicyContext, PolicyExtension, Spec, SuiteSpec

SUITE = "maniskill"
DESCRIPTIONS = {
    "PickCube-v1": "pick the red cube and hold it at the green goal (success: within 2.5 cm, robot still)",
    "StackCube-v1": "stack the red cube on the green one and let go",
    "PushCube-v1": "push the blue cube onto the target region",
    "PullCube-v1": "pull the cube back onto the target region",
}


def _make_env(task: str, options: Mapping[str, Any]) -> gym.Env:
    if task not in TASK_IDS:
        raise choice_error("task", task, list(TASK_IDS))
    return ManiSkillEnv(task, options)


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(SuiteSpec(
    name=SUITE,
    description="ManiSkill3 tabletop tasks (SAPIEN 3, CPU physics + lavapipe rendering), SIMPLER action convention",
    tasks=DESCRIPTIONS,
    make_env=_make_env,
    default_policies=("scripted_expert", "random"),
    default_episodes=10,
    max_steps=100,
    options_type=ManiSkillOptions,
))


def _expert(ctx: PolicyContext) -> Any:
    from policies.manipulation.maniskill_expert import ManiSkillExpert

    return ManiSkillExpert(ctx.env)


SPECS.append(PolicyExtension("scripted_expert", SUITE, _expert))
