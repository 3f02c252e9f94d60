"""Registers the VAP policies for ``personalized_simpler``: ``vap`` and ``oracle_mask`` (VAP with simulator masks).

Both wrap a registered base policy (option ``vap_base``, default ``generic``: the frozen built-in VLA with its
attribute detectors and base localiser; ``vla_attributes=false`` turns them off), so any base works. Options:
``vap_style`` (highlight style), ``vap_refs`` (use only the first N reference images),
``vap_components`` (comma-separated matcher cues), ``vap_every`` (tracker re-localisation period),
``vap_embedder`` (local DINOv2/CLIP folder), ``vap_embed_size`` (MobileNetV2 input side for crops; default: the
96-pixel crop itself), ``vap_detector`` / ``vap_detector_dir`` (detector backend),
``vap_min_score`` (below it grounding falls back; the default bias is set for all three cues), ``vap_candidates``
(proposals detector only: how many proposals, ranked by the network-free colour cue, reach the network and keypoint
matching; default 4), ``vap_hue_margin`` (degrees: paint the first palette colour at least this far in hue from every
other object, instead of the farthest one).
Perception (torch, OpenCV, SciPy) is imported inside the factories: the CLI imports every suite module per call.
"""

from __future__ import annotations

from typing import Any

from envs.errors import ConfigError, choice_error
from sim_benchmarks import registry
from sim_benchmarks.registry import PolicyContext, PolicySpec, register_policy

SUITES = ("personalized_simpler",)
VAP_POLICIES = ("vap", "oracle_mask")
# Proposals that reach the network and keypoint matching, best first by the colour cue. 4 grounds the same 114 of
# the ablation's 120 scenes as 10 at about a third less first-step time (docs/vap.md, speed section); the recolour
# colour is still chosen against every proposal, or it could repeat a dropped object's colour.
PROPOSAL_CANDIDATES = 4
# The --policy-option keys read here; the base policy's own (vla_*, expert_*) are declared where it registers.
VAP_OPTIONS = ("vap_base", "vap_style", "vap_refs", "vap_components", "vap_every", "vap_embedder", "vap_embed_size",
               "vap_detector", "vap_detector_dir", "vap_min_score", "vap_candidates", "vap_hue_margin")


def _base(ctx: PolicyContext) -> Any:
    name = str(ctx.options.get("vap_base", "generic"))
    specs = registry.policies()
    if name in VAP_POLICIES or name not in specs:
        raise choice_error("vap_base policy", name, [n for n in specs if n not in VAP_POLICIES])
    # The base is built as registered: the generic VLA with its attribute detectors and base localiser. Until
    # 2026-12-03 VAP turned the detectors off (they can misfire on a recoloured object); with the localiser they
    # gained 12 points on the tuning episodes (docs/vap.md). --policy-option vla_attributes=false turns both off.
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


def _embed_size(opts: dict[str, Any]) -> int | None:
    size = opts.get("vap_embed_size")
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, int) or size < 32:
        raise ConfigError(f"vap_embed_size must be an integer >= 32 (pixels), got {size!r}")
    return size


def _hue_margin(opts: dict[str, Any]) -> float | None:
    margin = opts.get("vap_hue_margin")
    if margin is None:
        return None
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0 <= margin <= 180:
        raise ConfigError(f"vap_hue_margin must be a number of degrees in [0, 180], got {margin!r}")
    return float(margin)


def build_vap(ctx: PolicyContext, oracle: bool) -> Any:
    """A VisualAttentivePrompting policy configured from ``ctx.options`` (see the module docstring)."""
    from perception.detectors import OracleDetector, make_detector
    from perception.embedders import make_embedder
    from perception.matching import COMPONENTS, LimitedMatcher, MatcherConfig
    from perception.prompting import VisualPrompter
    from perception.tracking import MaskTracker, TrackerConfig
    from policies.vap import VAPConfig, VisualAttentivePrompting

    opts = ctx.options
    comps = tuple(c for c in str(opts.get("vap_components", ",".join(COMPONENTS))).split(",") if c)
    refs = opts.get("vap_refs")
    if refs is not None and int(refs) < 1:
        raise ConfigError(f"vap_refs must be >= 1, got {refs}")
    matcher = LimitedMatcher(None if refs is None else int(refs), config=MatcherConfig(components=comps),
                             embedder=make_embedder(opts.get("vap_embedder"), _embed_size(opts)))
    sensors, target_id, scene_ids = _privileged(ctx)
    candidates = opts.get("vap_candidates", PROPOSAL_CANDIDATES)
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise ConfigError(f"vap_candidates must be an integer >= 1, got {candidates!r}")
    vap_cfg = VAPConfig(min_score=float(opts.get("vap_min_score", VAPConfig.min_score)),
                        max_candidates=max(VAPConfig.max_candidates, candidates))
    if oracle:
        detector: Any = OracleDetector(target_id_fn=target_id, scene_ids_fn=scene_ids)
    else:
        name = str(opts.get("vap_detector", "proposals"))
        extra: dict[str, Any] = {"model_dir": opts["vap_detector_dir"]} if "vap_detector_dir" in opts else {}
        if name == "proposals":
            extra = {"embedder": matcher.embedder, "max_candidates": candidates}
        detector = make_detector(name, **extra)
    return VisualAttentivePrompting(
        _base(ctx), detector=detector, matcher=matcher,
        tracker=MaskTracker(TrackerConfig(every=int(opts.get("vap_every", 5)))),
        prompter=VisualPrompter(style=str(opts.get("vap_style", "recolour")), hue_margin=_hue_margin(opts)),
        config=vap_cfg, target_id_fn=target_id, sensors_fn=sensors)


register_policy(PolicySpec("vap", "VAP: detect + match references + track + recolour prompt around a frozen base",
                           lambda ctx: build_vap(ctx, oracle=False), suites=SUITES, options=VAP_OPTIONS))
register_policy(PolicySpec("oracle_mask", "VAP with the simulator's mask of my object (upper bound)",
                           lambda ctx: build_vap(ctx, oracle=True), suites=SUITES, options=VAP_OPTIONS))
