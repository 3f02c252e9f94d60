"""VAP — Visual Attentive Prompting: ground "my <object>" with perception, then prompt a frozen generic policy.

Training-free and base-agnostic: on the first step of an episode the category is parsed from the instruction,
detected, matched against ``info["reference_images"]``, and the chosen mask is tracked from then on; every step the
base policy sees the highlighted image and the rewritten instruction ("pick up my mug" → "pick up the red mug").
When grounding fails (no references, nothing detected, no confident match) the base policy runs on the generic
instruction and :meth:`episode_info` records the fallback and its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from envs.errors import ConfigError
from perception.candidate import Candidate
from perception.category import drop_personal, parse_category
from perception.detectors import Detector, ProposalDetector, first_view
from perception.matching import InstanceMatcher, prefer_part
from perception.object_height import HeightCheck
from perception.prompting import VisualPrompter
from perception.tracking import MaskTracker
from policies.base import Policy
from policies.vap.chosen_memory import ChosenObjectMemory
from policies.vap.configuration import VAPConfig


def category_prior(scores: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """The detector's category scores over the best of them, or over ``floor`` when that is higher (1 for every
    candidate when all score 0): with ``floor`` 1 the scores count as they are, not stretched to the best."""
    top = max(float(np.max(scores)), floor) if len(scores) else 0.0
    return scores / top if top > 0 else np.ones_like(scores)


def _majority_id(segmentation: np.ndarray, mask: np.ndarray) -> int | None:
    ids = np.asarray(segmentation)[mask]
    ids = ids[ids >= 0] & ((1 << 24) - 1)
    return int(np.bincount(ids).argmax()) if ids.size else None


class VisualAttentivePrompting:
    """A Policy wrapping ``base_policy`` with detection → matching → tracking → visual prompting."""

    def __init__(self, base_policy: Policy, detector: Detector | None = None, matcher: InstanceMatcher | None = None,
                 tracker: MaskTracker | None = None, prompter: VisualPrompter | None = None,
                 config: VAPConfig = VAPConfig(), target_id_fn: Callable[[], int | None] | None = None,
                 sensors_fn: Callable[[], dict[str, Any]] | None = None,
                 height_check: HeightCheck | None = None, memory: ChosenObjectMemory | None = None) -> None:
        self.base = base_policy
        self.matcher = matcher if matcher is not None else InstanceMatcher()
        if detector is None:  # the default detector shares the matcher's network pass and colour pre-filter
            detector = ProposalDetector(embedder=self.matcher.embedder, max_candidates=config.max_candidates)
        if isinstance(detector, ProposalDetector) and detector.ranker is None:
            detector.ranker = self.matcher.colour_similarity
        self.detector = detector
        self.tracker = tracker if tracker is not None else MaskTracker()
        self.prompter = prompter if prompter is not None else VisualPrompter()
        self.config = config
        self.target_id_fn = target_id_fn  # privileged: only used to *score* grounding, never to choose
        # Extra sensors read once at grounding when obs lacks them: "depth" (an RGB-D camera) and, for the
        # grounding metric / the oracle detector only, "segmentation".
        self.sensors_fn = sensors_fn
        # Optional: drop candidates whose metric height (depth + table plane) the category never has.
        self.height_check = height_check
        # Optional: the object-memory base remembers the chosen object where its mask and depth put it (it is the
        # base's memory refiner; VAP tells it the choice before the base's first action).
        self.memory = memory
        self.last_prompted_image: np.ndarray | None = None
        self._new_episode("", {})

    def _new_episode(self, instruction: str, info: dict[str, Any]) -> None:
        self.instruction, self.info = instruction, info
        self.category: str | None = None
        self.rewritten = drop_personal(instruction)
        self.attribute: str | None = None
        self.grounded = False
        self.started = False
        self.fallback_reason: str | None = None
        self.chosen: Candidate | None = None
        self.chosen_score = 0.0
        self.grounding_correct: bool | None = None
        self.num_candidates = 0
        self.height_rejected = 0
        if self.memory is not None:
            self.memory.forget()

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Remember the episode; grounding waits for the first observation (it needs the image)."""
        self._new_episode(instruction, info)
        self.last_prompted_image = None
        if hasattr(self.detector, "reset"):
            self.detector.reset(info)
        try:
            self.category = str(info.get("category") or parse_category(instruction))
            self.matcher.set_references(info.get("reference_images"))
            if hasattr(self.detector, "prepare"):  # image-free set-up (text encodings) belongs to reset, not act
                self.detector.prepare(self.category)
        except ConfigError as exc:
            self.fallback_reason = str(exc)

    # -- grounding ------------------------------------------------------------------------------------------------
    def _target_id(self) -> int | None:
        if self.info.get("personal_body_id") is not None:
            return int(self.info["personal_body_id"])
        return self.target_id_fn() if self.target_id_fn is not None else None

    def _height_checked(self, cands: list[Candidate], depth: np.ndarray | None,
                        fovy_deg: float | None = None) -> list[Candidate]:
        """``cands`` less those of an impossible height for the category (when a height check is set)."""
        if self.height_check is None:
            return cands
        kept = self.height_check.filter(cands, depth, self.category, plane=getattr(self.detector, "plane", None),
                                        fovy_deg=fovy_deg)
        self.height_rejected += len(cands) - len(kept)
        return kept

    def _score(self, image: np.ndarray, cands: list[Any]) -> tuple[np.ndarray, int]:
        """Each candidate's final score (reference match weighted by the category prior) and the chosen index
        (the best, unless one of its parts alone matches the references better)."""
        match, cues = self.matcher.score_with_cues(image, cands)
        floor = self.config.user_prior_floor if self.matcher.layout_active() else 0.0
        prior = category_prior(np.array([c.score for c in cands], float), floor)
        w = self.config.category_weight
        final = match * ((1.0 - w) + w * prior)
        best = prefer_part([c.mask for c in cands], int(np.argmax(final)), self.matcher.absolute(cues),
                           self.config.part_margin)
        return final, best

    def _ground(self, obs: dict[str, Any], image: np.ndarray) -> None:
        if self.sensors_fn is not None and (obs.get("depth") is None or obs.get("segmentation") is None):
            obs = {**self.sensors_fn(), **{k: v for k, v in obs.items() if v is not None}}
        depth = obs.get("depth")
        cands = self.detector.detect(image, self.category, depth=depth, segmentation=obs.get("segmentation"))
        cands = self._height_checked(cands, first_view(depth))[: self.config.max_candidates]
        self.num_candidates = len(cands)
        if not cands:
            self.fallback_reason = f"detector found no {self.category}"
            return
        final, best = self._score(image, cands)
        self.chosen_score = float(final[best])
        if self.chosen_score < self.config.min_score:
            self.fallback_reason = f"no confident match (best score {self.chosen_score:.3f})"
            return
        self.chosen = cands[best]
        self.grounded = True
        pool = getattr(self.detector, "all_masks", None) or [c.mask for c in cands]
        others = [m for m in pool if m is not self.chosen.mask]
        self.attribute = self.prompter.pick_attribute(image, others)
        # The detector's table plane of this frame, when it fitted one: the tracker reuses it for every later step.
        plane = getattr(self.detector, "plane", None)
        self.tracker.start(image, self.chosen.mask, depth=first_view(depth), plane=plane)
        if self.memory is not None:
            self.memory.see(self.chosen.mask, first_view(depth), user_object=self.matcher.layout_active())
        seg = obs.get("segmentation")
        target = self._target_id() if seg is not None else None
        if seg is not None and target is not None:
            seg = np.asarray(seg)
            self.grounding_correct = _majority_id(seg[0] if seg.ndim == 3 else seg, self.chosen.mask) == target

    # -- policy ---------------------------------------------------------------------------------------------------
    def act(self, obs: dict[str, Any]) -> Any:
        """Prompt the observation and let the base policy act on it."""
        image = np.asarray(obs["image"])
        main = image[0] if image.ndim == 4 else image
        if not self.started:
            self.started = True
            if self.fallback_reason is None:
                self._ground(obs, main)
            if self.grounded:
                self.rewritten = self.prompter.prompt(main, self.chosen.mask, self.instruction, self.category,
                                                      attribute=self.attribute)[1]
            self.base.reset(self.rewritten, self.info)
            mask = self.chosen.mask if self.grounded else None
        elif self.grounded:
            depth = obs.get("depth")
            self.tracker.update(main, first_view(depth))
            mask = self.tracker.visible_mask(main)
        else:
            mask = None
        if mask is None:
            prompted_main = main
        else:
            prompted_main = self.prompter.apply(main, mask, self.attribute)
        if image.ndim == 4:
            prompted = image.copy()
            prompted[0] = prompted_main
        else:
            prompted = prompted_main
        self.last_prompted_image = prompted_main
        return self.base.act({**obs, "image": prompted, "instruction": self.rewritten})

    def episode_info(self) -> dict[str, Any]:
        """Per-episode grounding diagnostics merged into the episode record."""
        return {
            "grounding_ok": bool(self.grounded),
            "grounding_correct": self.grounding_correct,
            "fallback": not self.grounded,
            "fallback_reason": self.fallback_reason or "",
            "chosen_score": round(float(self.chosen_score), 4),
            "candidates": int(self.num_candidates),
            "height_rejected": int(self.height_rejected),
            "prompt_instruction": self.rewritten,
            "tracker_lost_updates": int(self.tracker.lost_updates) if self.grounded else 0,
        }
