"""Declares the frozen generic VLA (``generic``) and the learned-prompt baselines (``hard_prompt``, ``soft_prompt``).

``generic`` is the built-in VLA from ``checkpoints/generic_vla`` (sha256-verified) with "my" replaced by "the" in
the instruction — the baseline VAP has to beat on personalized tasks, and the plain generic policy on the
generic tasks. Policy options: ``vla_checkpoint`` (another checkpoint folder), ``vla_execution`` (``first``: the
chunk's first action every step, default; ``ensemble``: temporal ensembling of overlapping chunks; ``queue``:
``vla_action_steps`` actions of each chunk open loop, default the whole chunk), ``vla_attributes`` (``false``:
ignore the checkpoint's attribute detectors, and with them its base localiser, for A/B runs), ``vla_localiser``
(``false``: ignore the base localiser alone), ``vla_grasp_retries`` (N > 0: wrap the policy in
:class:`~policies.manipulation.grasp_retry.GraspRetry`, reopening after up to N grasps that closed on nothing; default
0). ``hard_prompt`` / ``soft_prompt`` (personalized suite only) describe the personal object from
``info["reference_images"]`` in words or as an instruction-space vector; see ``policies/vla/prompt_baselines.py``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from policies.vla.configuration import VLAOptions
from sim_benchmarks.specs import PolicyContext, PolicySpec, Spec

if TYPE_CHECKING:  # torch-heavy modules load inside the factories: the CLI imports every suite module per call
    from policies.vla.checkpoint import HeadBundle
    from policies.vla.generic import GenericVLA
    from policies.vla.prompt_baselines import HardPrompt, SoftPrompt, SoftPromptMap

SUITES = ("personalized_simpler", "generic_simpler")


@functools.lru_cache(maxsize=4)
def _bundle(folder: str) -> HeadBundle:
    # One verified, frozen head per process and checkpoint; policies built from it share it read-only.
    from policies.vla.checkpoint import load_checkpoint

    return load_checkpoint(Path(folder))


def _generic(ctx: PolicyContext) -> GenericVLA:
    from policies.vla.checkpoint import DEFAULT_CHECKPOINT
    from policies.vla.generic import GenericVLA, drop_possessive

    opts = VLAOptions.from_options(ctx.options, strict=False)
    folder = str(opts.vla_checkpoint or DEFAULT_CHECKPOINT)
    policy = GenericVLA(_bundle(folder), execution=opts.vla_execution, action_steps=opts.vla_action_steps,
                        instruction_rewrite=drop_possessive, attributes=opts.vla_attributes,
                        localiser=opts.vla_localiser)
    if opts.vla_grasp_retries:
        from policies.manipulation.grasp_retry import GraspRetry, GraspRetryConfig

        return GraspRetry(policy, GraspRetryConfig(max_retries=opts.vla_grasp_retries))
    return policy


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(PolicySpec(
    name="generic",
    description="frozen built-in generic VLA (MobileNetV2 + MiniLM + FiLM head); 'my' dropped from the instruction",
    factory=_generic,
    suites=SUITES,
    options_type=VLAOptions,
))


def _hard_prompt(ctx: PolicyContext) -> HardPrompt:
    from policies.vla.prompt_baselines import HardPrompt

    return HardPrompt(_generic(ctx))


@functools.lru_cache(maxsize=1)
def _soft_maps() -> dict[str, SoftPromptMap]:
    # Fitted once by `python -m launch.train_soft_prompt` and shipped: evaluation never fits them.
    from policies.vla.soft_prompt_checkpoint import load_maps

    return load_maps()


def _soft_prompt(ctx: PolicyContext) -> SoftPrompt:
    from perception.mobilenet_v2 import pooled_features
    from policies.vla.prompt_baselines import SoftPrompt

    kind = ctx.env.unwrapped.task.kind
    return SoftPrompt(_generic(ctx), _soft_maps(), kind, pooled_features)


SPECS.append(PolicySpec(
    name="hard_prompt",
    description="generic VLA told the personal object's dominant reference-image colour ('the blue mug')",
    factory=_hard_prompt,
    suites=("personalized_simpler",),
    options_type=VLAOptions,
))
SPECS.append(PolicySpec(
    name="soft_prompt",
    description="generic VLA conditioned on a concept vector regressed from the reference images (no robot data)",
    factory=_soft_prompt,
    suites=("personalized_simpler",),
    options_type=VLAOptions,
))
