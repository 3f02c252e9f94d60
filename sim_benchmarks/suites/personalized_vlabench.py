"""Declares the ``personalized_vlabench`` suite (MuJoCo, four cameras, absolute EE actions) and its policies.

The policies keep their names from the SIMPLER suite and are extended to this one with factories that fit its env:
``scripted_expert`` (the privileged VLABench expert), ``generic`` / ``hard_prompt`` / ``soft_prompt`` (a frozen
generic VLA, whose SIMPLER deltas are turned into absolute targets), ``vap`` (multi-view grounding) and
``oracle_mask``. The generic VLA here is the head trained on this suite's own generic track
(``checkpoints/vlabench_vla``: ``python -m launch.train_vla --suite personalized_vlabench``), set as the suite's
default ``vla_checkpoint`` so every run config records it; ``--policy-option vla_checkpoint=checkpoints/generic_vla``
runs the SIMPLER-trained head instead. ``modular`` is a base that is not a VLA (perceived 3-D target + the expert's
phases); ``vap`` / ``oracle_mask`` wrap it with ``vap_base=modular`` and ``hard_prompt`` with ``prompt_base=modular``
(``soft_prompt`` cannot: it needs a head that takes instruction embeddings). Perception and torch load inside the
factories. The registry's table loads the SIMPLER policy modules (which declare the policies extended here) before
this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.errors import ConfigError, choice_error
from envs.paths import CHECKPOINTS
from policies.manipulation.scripted_expert import ExpertOptions
from policies.vap.configuration import VAPViewOptions
from policies.vla.configuration import PromptBaseOptions, VLAMemoryOptions
from sim_benchmarks.specs import PolicyContext, PolicyExtension, PolicySpec, Spec, SuiteSpec
from sim_benchmarks.suites import vap_policies, vla_policies

SUITE = "personalized_vlabench"
# The generic VLA trained on this suite's in_distribution track (front view, SIMPLER deltas); the SIMPLER-trained
# head does not transfer to the MuJoCo renders (0 successes, also under oracle_mask: docs/results/vlabench.md).
VLA_CHECKPOINT = CHECKPOINTS / "vlabench_vla"


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


def _default_tasks() -> tuple[str, ...]:
    from envs.manipulation.vlabench.tasks import PICK_PLACE_TASKS

    return PICK_PLACE_TASKS


def _metrics(info: dict[str, Any], total_return: float, steps: int) -> dict[str, Any]:
    from envs.manipulation.vlabench.env import episode_metrics

    return episode_metrics(info, total_return, steps)


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(SuiteSpec(
    name=SUITE,
    description="MuJoCo Personalized-VLABench: select *my* object among look-alikes, 4 cameras, absolute EE actions",
    tasks=_tasks(),
    # The bare suite runs the three pick-and-place tasks (its 10-minute default budget and the results page's
    # figures); the shelf and button tasks run when named: --env personalized_vlabench/select_my_from_shelf.
    default_tasks=_default_tasks(),
    make_env=_make,
    # Sized to finish in under 10 minutes on 2 loaded cores; the results page uses --episodes 20-50.
    default_policies=("scripted_expert", "generic", "vap", "oracle_mask"),
    default_episodes=2,
    default_workers=2,
    max_steps=200,
    episode_metrics=_metrics,
    default_policy_options={"vla_checkpoint": str(VLA_CHECKPOINT)},
))


def _expert(ctx: PolicyContext) -> Any:
    from policies.manipulation.vlabench_expert import VLABenchExpert

    noise = ExpertOptions.from_options(ctx.options, strict=False).expert_noise  # the scripted expert's option
    return VLABenchExpert(ctx.env, seed=ctx.seed, noise_std=noise)


SPECS.append(PolicyExtension("scripted_expert", SUITE, _expert))


def _absolute(builder: Any) -> Any:
    """A SIMPLER policy factory made to emit absolute targets when the env takes them (the default)."""

    def build(ctx: PolicyContext) -> Any:
        policy = builder(ctx)
        if ctx.env.unwrapped.config.action_mode == "absolute":
            from policies.manipulation.delta_adapter import DeltaToAbsolute

            return DeltaToAbsolute(policy)
        return policy

    return build


# Where the generic head's object memory comes from (policies/vla/perceived_memory.py): its own first-frame estimate
# (default), or placed by the modular base's fused three-view depth ("depth": the head chooses the object, depth
# places it; "perceived": the modular base's choice; "fused": the head's heatmap, the instruction's colour and the
# category's height vote among the perceived objects). Declared typed (VLAMemoryOptions, with the VLA's
# configuration); bases built for VAP or a prompt baseline read it too.
MEMORY_OPTION = "vla_memory"


def _memory_refiner(ctx: PolicyContext) -> Any:
    source = VLAMemoryOptions.from_options(ctx.options, strict=False).vla_memory
    if source == "own":
        return None
    from policies.vla.perceived_memory import PerceivedMemory

    return PerceivedMemory(_modular(ctx), source)


def _with_memory(build: Any) -> Any:
    """A factory of a policy built on the generic head whose head takes its memory as ``vla_memory`` says."""

    def make(ctx: PolicyContext) -> Any:
        refiner = _memory_refiner(ctx)  # checked first: a bad value fails before the checkpoint loads
        policy = build(ctx)
        if refiner is not None:
            vla = policy
            # Under the prompt-baseline or grasp-retry wrapper; the instance's own attributes, not hasattr: the
            # grasp-retry wrapper hands attribute reads through to its base, so it would seem to have one itself.
            while "memory_refiner" not in vars(vla):
                vla = vla.base
            if not vla.cfg.memory:
                raise ConfigError(f"{MEMORY_OPTION}={ctx.options[MEMORY_OPTION]} needs an object-memory head; "
                                  f"{ctx.options.get('vla_checkpoint')} has none (valid for it: own)")
            vla.memory_refiner = refiner
        return policy

    return make


_generic = _with_memory(vla_policies._generic)


SPECS.append(PolicyExtension("generic", SUITE, _absolute(_generic), options_type=VLAMemoryOptions))

# The learned-prompt baselines' base: the generic VLA (default) or the modular base (``modular``, below), which reads
# the hard prompt's colour word as it reads VAP's. The soft prompt replaces the encoded instruction by a vector, which
# only a head conditioned on instruction embeddings can take: the modular base reads words, so it refuses (the key:
# PromptBaseOptions, with the VLA's configuration).
PROMPT_BASE_OPTION = "prompt_base"


def _prompt_base(ctx: PolicyContext) -> str:
    return PromptBaseOptions.from_options(ctx.options, strict=False).prompt_base


def _hard_prompt(ctx: PolicyContext) -> Any:
    if _prompt_base(ctx) == "modular":
        from policies.vla.prompt_baselines import HardPrompt

        return HardPrompt(_modular(ctx))
    return _absolute(_with_memory(vla_policies._hard_prompt))(ctx)


def _soft_prompt(ctx: PolicyContext) -> Any:
    if _prompt_base(ctx) == "modular":
        raise ConfigError("soft_prompt conditions a learned head on an instruction-embedding vector; the modular base "
                          f"reads words and cannot take one (valid {PROMPT_BASE_OPTION} for soft_prompt: generic)")
    return _absolute(_with_memory(vla_policies._soft_prompt))(ctx)


SPECS.append(PolicyExtension("hard_prompt", SUITE, _hard_prompt, options_type=PromptBaseOptions))
SPECS.append(PolicyExtension("soft_prompt", SUITE, _soft_prompt, options_type=PromptBaseOptions))


def _views(ctx: PolicyContext) -> tuple[str, ...]:
    from envs.manipulation.vlabench.scene import CAMERAS

    views = VAPViewOptions.from_options(ctx.options, strict=False).vap_views
    for v in views:
        if v not in CAMERAS:
            raise choice_error("vap_views view", v, CAMERAS)
    available = ctx.env.unwrapped.config.cameras
    missing = [v for v in views if v not in available]
    if missing:
        raise ConfigError(f"vap_views {','.join(missing)} not rendered; env cameras: {','.join(available)}")
    return views


def _vap(ctx: PolicyContext, oracle: bool) -> Any:
    """VAP with multi-view grounding: the SIMPLER VAP's parts, grounding fused over ``vap_views``."""
    from policies.vap.multiview import MultiViewVAP

    views = _views(ctx)
    single = vap_policies.build_vap(ctx, oracle=oracle)  # detector, matcher, tracker, prompter and base as there
    env = ctx.env.unwrapped
    return MultiViewVAP(single.base, views, lambda: env.camera_sensors(views), detector=single.detector,
                        matcher=single.matcher, tracker=single.tracker, prompter=single.prompter,
                        config=single.config, target_id_fn=lambda: int(env.personal_body_id))


SPECS.append(PolicyExtension("vap", SUITE, lambda ctx: _vap(ctx, oracle=False), options_type=VAPViewOptions))
SPECS.append(PolicyExtension("oracle_mask", SUITE, lambda ctx: _vap(ctx, oracle=True), options_type=VAPViewOptions))


def _modular(ctx: PolicyContext) -> Any:
    """The modular base (perceived target + the expert's phases) on the generic instruction ("my" dropped)."""
    from envs.manipulation.vlabench.tasks import TASKS
    from perception.object_height import HeightCheck
    from policies.manipulation.vlabench_modular import GOALS, VIEWS, ModularVLABenchBase

    goal = TASKS[ctx.task].goal
    if goal not in GOALS:
        raise ConfigError(f"policy modular runs the tasks {', '.join(t for t, s in TASKS.items() if s.goal in GOALS)}"
                          f", not {ctx.task}")
    env = ctx.env.unwrapped

    def cameras() -> dict[str, Any]:  # depth and pose only: a calibrated RGB-D rig, no segmentation
        sensors = env.camera_sensors(VIEWS)
        return {"depth": sensors["depth"], "pose": sensors["pose"]}

    def detector() -> Any:
        from perception.detectors import ProposalDetector

        return ProposalDetector()

    return ModularVLABenchBase(cameras, goal, detector_fn=detector, height_check=HeightCheck(), seed=ctx.seed)


SPECS.append(PolicySpec(
    "modular", "modular base, not a VLA: 3-D perception of the instruction's object + the expert's phase machine",
    _modular, suites=(SUITE,)))
