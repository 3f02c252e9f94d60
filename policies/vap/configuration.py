"""VAP's configuration: how a grounding candidate is scored and when grounding fails (:class:`VAPConfig`), and
the ``--policy-option`` keys of the ``vap`` policies (:class:`VAPOptions`), whose scoring defaults are
:class:`VAPConfig`'s.

Light on purpose (no torch, no perception at import): the CLI declares these options on every call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from envs.config import Options, option, require


@dataclass(frozen=True)
class VAPConfig(Options):
    """Selection rule: matcher probability × a soft category prior; below ``min_score`` grounding fails."""

    category_weight: float = 0.2  # 0: ignore the detector's category score; 1: multiply by it fully
    min_score: float = 0.05
    max_candidates: int = 10
    # A union candidate yields to one of its parts that alone matches this much better (absolute logit units).
    part_margin: float = 0.1
    # The category prior is each candidate's detector score over the scene's best one, or over this floor when
    # that is lower, with a user object's reference set (the matcher's layout cue on). The detector barely knows
    # a photo-printed body as its category (its best score in a scene: median 0.008 on the development scenes), so
    # dividing by the best turned noise into a 20 % penalty that overturned clear matcher choices (178 → 184 of
    # 192 development scenes with the floor). Built-in designs keep the prior relative to the best score.
    user_prior_floor: float = 1.0


# Proposals that reach the network and keypoint matching, best first by the colour cue. 4 grounds the same 114 of
# the ablation's 120 scenes as 10 at about a third less first-step time (docs/vap.md, speed section); the recolour
# colour is still chosen against every proposal, or it could repeat a dropped object's colour.
PROPOSAL_CANDIDATES = 4
HEIGHT_MARGIN = 0.02  # metres: chosen on dev seeds (docs/results/vap.md, "Height check")


@dataclass(frozen=True)
class VAPOptions(Options):
    """``--policy-option`` keys of ``vap`` and ``oracle_mask`` (the base's own keys are declared where it registers)."""

    title = "VAP"
    vap_base: str = field(default="generic", metadata={"help": "registered base policy to wrap"})
    vap_style: Literal["recolour", "overlay", "outline", "dim", "crop"] = field(
        default="recolour", metadata={"help": "how the object is highlighted"})
    vap_refs: int | None = field(default=None, metadata={"help": "use only the first N reference images"})
    vap_components: tuple[str, ...] = field(default=("embedding", "colour", "keypoints", "layout"),
                                            metadata={"help": "matcher cues: embedding, colour, keypoints, layout"})
    vap_every: int = field(default=5, metadata={"help": "tracker re-localisation period (steps)"})
    vap_embedder: str | None = field(default=None, metadata={"help": "local DINOv2/CLIP folder as the embedding cue"})
    vap_matcher_embedder: Literal["mobilenet_v2", "instance", "blend"] | None = field(
        default=None, metadata={"help": "embedding cue: ImageNet MobileNetV2, the trained instance head "
                                        "(checkpoints/instance_embedder), or the mean of both cosines; default "
                                        "blend, or vap_embedder's / vap_embed_size's MobileNetV2 when either is set"})
    vap_embed_size: int | None = field(default=None, metadata={"help": "MobileNetV2 input side for crops (>= 32)"})
    vap_detector: Literal["proposals", "transformers", "groundingdino"] = field(
        default="proposals", metadata={"help": "detector backend"})
    vap_detector_dir: str | None = field(default=None, metadata={"help": "local weights folder of the detector"})
    vap_min_score: float = field(default=VAPConfig.min_score, metadata={"help": "below it grounding falls back"})
    vap_category_weight: float = field(
        default=VAPConfig.category_weight,
        metadata={"help": "0..1: how much the detector's category score weighs in the choice"})
    vap_candidates: int = field(default=PROPOSAL_CANDIDATES,
                                metadata={"help": "proposals reaching the network and keypoint matching"})
    vap_hue_margin: float | None = field(default=None,
                                         metadata={"help": "degrees: paint the first palette colour this far in hue"})
    vap_height_check: bool = field(default=False, metadata={
        "help": "drop candidates whose height above the table (depth) the named category never has"})
    vap_height_margin: float = field(default=HEIGHT_MARGIN, metadata={
        "help": "metres outside the category's library height range a candidate may still be"})
    vap_memory: Literal["auto", "own", "mask"] = field(default="auto", metadata={
        "help": "where an object-memory base remembers the object: its own first-frame estimate, VAP's chosen "
                "mask lifted with depth, or auto: the mask for a user object's references (>= 8), else its own"})

    def check(self) -> None:
        from perception.matching import COMPONENTS

        require(self.vap_refs is None or self.vap_refs >= 1, f"vap_refs must be >= 1, got {self.vap_refs}")
        bad = [c for c in self.vap_components if c not in COMPONENTS]
        require(bool(self.vap_components) and not bad,
                f"unknown matcher components {bad or '(none)'}; valid: {', '.join(COMPONENTS)}")
        require(self.vap_every >= 1, f"vap_every must be >= 1, got {self.vap_every}")
        require(self.vap_embed_size is None or self.vap_embed_size >= 32,
                f"vap_embed_size must be an integer >= 32 (pixels), got {self.vap_embed_size}")
        require(self.vap_matcher_embedder in (None, "mobilenet_v2") or (self.vap_embedder is None
                                                                         and self.vap_embed_size is None),
                f"vap_matcher_embedder={self.vap_matcher_embedder} cannot be combined with vap_embedder or "
                "vap_embed_size")
        require(0 <= self.vap_category_weight <= 1,
                f"vap_category_weight must be a number in [0, 1], got {self.vap_category_weight}")
        require(self.vap_candidates >= 1, f"vap_candidates must be an integer >= 1, got {self.vap_candidates}")
        require(self.vap_hue_margin is None or 0 <= self.vap_hue_margin <= 180,
                f"vap_hue_margin must be a number of degrees in [0, 180], got {self.vap_hue_margin}")
        require(0 <= self.vap_height_margin <= 0.2,
                f"vap_height_margin must be a number of metres in [0, 0.2], got {self.vap_height_margin}")

    def embedder(self) -> str | None:
        """What ``make_embedder`` builds the matcher's embedding cue from (``None``: MobileNetV2)."""
        if self.vap_matcher_embedder is None:
            # blend by default; an explicit vap_embedder / vap_embed_size chooses that MobileNetV2 or folder.
            custom = self.vap_embedder is not None or self.vap_embed_size is not None
            return self.vap_embedder if custom else "blend"
        # mobilenet_v2 names the non-trained cue: ImageNet MobileNetV2, or the local folder vap_embedder names.
        return self.vap_embedder if self.vap_matcher_embedder == "mobilenet_v2" else self.vap_matcher_embedder


@dataclass(frozen=True)
class VAPViewOptions(Options):
    """``--policy-option`` key of multi-view VAP (:class:`policies.vap.multiview.MultiViewVAP`, on VLABench); each
    view must also be a camera the env renders (checked where the policy is built)."""

    title = "multi-view VAP"
    vap_views: tuple[str, ...] = option(("left", "right", "front"),
                                        "grounding views, fused (must include front, the base policy's view)")

    def check(self) -> None:
        require("front" in self.vap_views,
                f"vap_views must include front (the base policy's view), got {','.join(self.vap_views)}")
