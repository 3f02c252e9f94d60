"""Declares the VAP policies for ``personalized_simpler``: ``vap`` and ``oracle_mask`` (VAP with simulator masks).

Both wrap a registered base policy (option ``vap_base``, default ``generic``: the frozen built-in VLA with its
attribute detectors and base localiser; ``vla_attributes=false`` turns them off), so any base works. The options
are the fields of :class:`VAPOptions` (``python -m launch.eval --list`` prints them with types and defaults).
Perception (torch, OpenCV, SciPy) is imported inside the factories: the CLI imports every suite module per call.
"""

from __future__ import annotations

from typing import Any

from envs.errors import choice_error
from policies.vap.configuration import VAPConfig, VAPOptions
from sim_benchmarks.specs import PolicyContext, PolicySpec, Spec

SUITES = ("personalized_simpler",)
VAP_POLICIES = ("vap", "oracle_mask")
# metres: a camera sees an object's near side, so its mask's mean lies this much in front of the body's centre
# (+0.98 cm, sd 0.38, over 64 first frames of the development photos; docs/results/vap.md, "Bring your own object")
MEMORY_BACK = 0.01


def _base(ctx: PolicyContext) -> Any:
    name = VAPOptions.from_options(ctx.options, strict=False).vap_base
    # A base must be a policy of this suite (a vimrag or games policy cannot drive a manipulation env).
    specs = ctx.policies
    valid = [n for n in sorted(specs) if n not in VAP_POLICIES]
    if name not in valid:
        raise choice_error(f"vap_base policy for {ctx.suite}", name, valid)
    # The base is built as registered, attribute detectors and localiser included: with the localiser they help
    # VAP's base although they can misfire on a recoloured object (docs/vap.md). vla_attributes=false turns both off.
    return specs[name].factory(ctx)


def _privileged(ctx: PolicyContext):
    """Depth (an RGB-D sensor) and segmentation (metrics / oracle only) rendered from the simulator on demand;
    the personal object's body id; the ids of every other table-top body (oracle only: its prompt colour)."""
    env = ctx.env.unwrapped

    def sensors() -> dict[str, Any]:
        _, depth, seg = env.scene.render(segmentation=True)
        return {"depth": depth, "segmentation": seg}

    def scene_ids() -> list[int]:
        roles = env.privileged_state()["body_roles"]
        return [b for b, role in roles.items() if role not in ("robot", "table", "target")]

    return sensors, (lambda: int(env.personal_body_id)), scene_ids


def _main_camera_fovy(env: Any) -> float | None:
    """The main camera's vertical field of view of a SIMPLER-style env (None for envs without one)."""
    embodiment = getattr(getattr(env, "scene", None), "embodiment", None)
    return getattr(embodiment, "fov", None)


def _main_camera_pose(env: Any) -> Any:
    """The main camera's pose of a SIMPLER-style env (None for envs without one)."""
    embodiment = getattr(getattr(env, "scene", None), "embodiment", None)
    if embodiment is None:
        return None
    from envs.manipulation.scene import camera_matrices
    from policies.vap.chosen_memory import CameraPose

    return CameraPose.from_view(camera_matrices(embodiment.name)[0], embodiment.fov)


def chosen_memory(ctx: PolicyContext, base: Any) -> Any:
    """With ``vap_memory`` ``mask`` or ``auto``, a :class:`~policies.vap.chosen_memory.ChosenObjectMemory` installed
    as the memory refiner of ``base``'s object-memory head (under any wrapper; ``auto``: used for a user object's
    reference set only); None with ``own``, and for a base without such a head or an env without a known camera
    (the option then changes nothing)."""
    source = VAPOptions.from_options(ctx.options, strict=False).vap_memory
    if source == "own":
        return None
    vla = base
    while not hasattr(vla, "memory_refiner") and hasattr(vla, "base"):  # under a grasp-retry or prompt wrapper
        vla = vla.base
    camera = _main_camera_pose(ctx.env.unwrapped)
    if not hasattr(vla, "memory_refiner") or not vla.cfg.memory or camera is None:
        return None
    from policies.vap.chosen_memory import ChosenObjectMemory

    vla.memory_refiner = ChosenObjectMemory(camera, MEMORY_BACK, user_objects_only=source == "auto")
    return vla.memory_refiner


def height_check(ctx: PolicyContext, fovy_deg: float | None) -> Any:
    """The candidate height check ``vap_height_check`` asks for (None when off), for a camera of ``fovy_deg``."""
    opts = VAPOptions.from_options(ctx.options, strict=False)
    if not opts.vap_height_check:
        return None
    from perception.object_height import HeightCheck, HeightCheckConfig

    margin = opts.vap_height_margin
    return HeightCheck(fovy_deg, HeightCheckConfig(margin_above=margin, margin_below=margin))


def build_vap(ctx: PolicyContext, oracle: bool, privileged: tuple[Any, Any, Any] | None = None,
              fovy_deg: float | None = None) -> Any:
    """A VisualAttentivePrompting policy configured from ``ctx.options`` (see the module docstring).

    ``privileged``: the env's ``(sensors_fn, target_id_fn, scene_ids_fn)`` and ``fovy_deg`` its camera's field of
    view, for envs that are not SIMPLER-style (default: read from a ``PersonalizedSimplerEnv``'s scene)."""
    from perception.detectors import OracleDetector, make_detector
    from perception.embedders import make_embedder
    from perception.matching import LimitedMatcher, MatcherConfig
    from perception.prompting import VisualPrompter
    from perception.tracking import MaskTracker, TrackerConfig
    from policies.vap import VisualAttentivePrompting

    opts = VAPOptions.from_options(ctx.options, strict=False)
    matcher = LimitedMatcher(opts.vap_refs, config=MatcherConfig(components=opts.vap_components),
                             embedder=make_embedder(opts.embedder(), opts.vap_embed_size))
    sensors, target_id, scene_ids = privileged if privileged is not None else _privileged(ctx)
    vap_cfg = VAPConfig(min_score=opts.vap_min_score, category_weight=opts.vap_category_weight,
                        max_candidates=max(VAPConfig.max_candidates, opts.vap_candidates))
    if oracle:
        detector: Any = OracleDetector(target_id_fn=target_id, scene_ids_fn=scene_ids)
    else:
        extra: dict[str, Any] = {} if opts.vap_detector_dir is None else {"model_dir": opts.vap_detector_dir}
        if opts.vap_detector == "proposals":
            extra = {"embedder": matcher.embedder, "max_candidates": opts.vap_candidates}
        detector = make_detector(opts.vap_detector, **extra)
    base = _base(ctx)
    return VisualAttentivePrompting(
        base, detector=detector, matcher=matcher,
        tracker=MaskTracker(TrackerConfig(every=opts.vap_every)),
        prompter=VisualPrompter(style=opts.vap_style, hue_margin=opts.vap_hue_margin),
        config=vap_cfg, target_id_fn=target_id, sensors_fn=sensors,
        # The simulator's own mask needs no check; a multi-view suite passes each view's field of view per call.
        height_check=None if oracle else height_check(ctx, fovy_deg if fovy_deg is not None
                                                      else _main_camera_fovy(ctx.env.unwrapped)),
        memory=chosen_memory(ctx, base))


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(PolicySpec("vap", "VAP: detect + match references + track + recolour prompt around a frozen base",
                           lambda ctx: build_vap(ctx, oracle=False), suites=SUITES, options_type=VAPOptions))
SPECS.append(PolicySpec("oracle_mask", "VAP with the simulator's mask of my object (upper bound)",
                           lambda ctx: build_vap(ctx, oracle=True), suites=SUITES, options_type=VAPOptions))
