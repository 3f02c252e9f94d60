"""VAP's configuration: how a grounding candidate is scored and when grounding fails."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VAPConfig:
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
