"""Registers the frozen generic VLA (``generic``) and the learned-prompt baselines (``hard_prompt``, ``soft_prompt``).

``generic`` is the built-in VLA from ``checkpoints/generic_vla`` (sha256-verified) with "my" replaced by "the" in
the instruction — the baseline VAP has to beat on personalized tasks, and the plain generic policy on the
generic tasks. Policy options: ``vla_checkpoint`` (another checkpoint folder), ``vla_execution`` (``first``: the
chunk's first action every step, default; ``ensemble``: temporal ensembling of overlapping chunks).
``hard_prompt`` / ``soft_prompt`` (personalized suite only) describe the personal object from
``info["reference_images"]`` in words or as an instruction-space vector; see ``policies/vla/prompt_baselines.py``.
"""

from __future__ import annotations

import functools
from pathlib import Path

from perception.mobilenet_v2 import pooled_features
from perception.text_encoder import load_text_encoder
from policies.vla.checkpoint import DEFAULT_CHECKPOINT, HeadBundle, load_checkpoint
from policies.vla.generic import GenericVLA, drop_possessive
from policies.vla.prompt_baselines import HardPrompt, SoftPrompt, SoftPromptMap, fit_soft_prompt_from_library
from sim_benchmarks.registry import PolicyContext, PolicySpec, register_policy

SUITES = ("personalized_simpler", "generic_simpler")


@functools.lru_cache(maxsize=4)
def _bundle(folder: str) -> HeadBundle:
    # One verified, frozen head per process and checkpoint; policies built from it share it read-only.
    return load_checkpoint(Path(folder))


def _generic(ctx: PolicyContext) -> GenericVLA:
    folder = str(ctx.options.get("vla_checkpoint", DEFAULT_CHECKPOINT))
    return GenericVLA(_bundle(folder), execution=str(ctx.options.get("vla_execution", "first")),
                      instruction_rewrite=drop_possessive)


register_policy(PolicySpec(
    name="generic",
    description="frozen built-in generic VLA (MobileNetV2 + MiniLM + FiLM head); 'my' dropped from the instruction",
    factory=_generic,
    suites=SUITES,
))


def _hard_prompt(ctx: PolicyContext) -> HardPrompt:
    return HardPrompt(_generic(ctx))


@functools.lru_cache(maxsize=1)
def _soft_maps() -> dict[str, SoftPromptMap]:
    # Fitted once per process on train-split library renders (about a minute on one loaded core).
    return fit_soft_prompt_from_library(load_text_encoder())


def _soft_prompt(ctx: PolicyContext) -> SoftPrompt:
    kind = ctx.env.unwrapped.task.kind
    return SoftPrompt(_generic(ctx), _soft_maps(), kind, pooled_features)


register_policy(PolicySpec(
    name="hard_prompt",
    description="generic VLA told the personal object's dominant reference-image colour ('the blue mug')",
    factory=_hard_prompt,
    suites=("personalized_simpler",),
))
register_policy(PolicySpec(
    name="soft_prompt",
    description="generic VLA conditioned on a concept vector regressed from the reference images (no robot data)",
    factory=_soft_prompt,
    suites=("personalized_simpler",),
))
