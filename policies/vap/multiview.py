"""Multi-view VAP: ground "my <object>" in every camera, fuse the evidence in 3-D, then prompt as single-view VAP.

At the first step each grounding view is run through the detector and the reference matcher; every candidate is
placed in the world by back-projecting its mask centre with that view's depth and camera pose (a calibrated RGB-D
rig). Candidates from different views within ``FUSE_RADIUS`` of each other are one object; an object's fused
score is the mean of its per-view match scores, discounted when few views saw it. The chosen object's mask in the
front view (the view the base policy sees) is then tracked and recoloured exactly as in
:class:`~policies.vap.VisualAttentivePrompting`. ``episode_info`` reports the fused choice's correctness and every
single view's own choice (``grounding_correct_<view>``), so one run compares multi-view and single-view grounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from perception.candidate import Candidate
from policies.vap.modeling import VisualAttentivePrompting, _majority_id

FUSE_RADIUS = 0.05  # metres: candidates of different views closer than this are the same object
COVERAGE_POWER = 0.5  # fused score × (views that saw it / views)^power: one-view blobs (arm parts) weigh less


def backproject(mask: np.ndarray, depth: np.ndarray, position: np.ndarray, rotation: np.ndarray,
                fovy_deg: float) -> np.ndarray | None:
    """World point of a mask's centre (median depth) for a camera looking along its -z with y up; None if empty."""
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        return None
    d = float(np.median(np.asarray(depth)[rows, cols]))
    h, w = mask.shape
    f = (h / 2) / math.tan(math.radians(fovy_deg) / 2)
    u, v = float(cols.mean()) + 0.5, float(rows.mean()) + 0.5
    cam = np.array([(u - w / 2) / f * d, -(v - h / 2) / f * d, -d])
    return np.asarray(position) + np.asarray(rotation) @ cam


class MultiViewVAP(VisualAttentivePrompting):
    """VAP whose grounding uses several calibrated RGB-D views (see the module docstring)."""

    def __init__(self, base_policy: Any, views: Sequence[str], cameras_fn: Callable[[], dict[str, Any]],
                 **kwargs: Any) -> None:
        super().__init__(base_policy, **kwargs)
        self.views = tuple(views)
        # cameras_fn() -> {"depth": {view: HxW}, "segmentation": {view: HxW}, "pose": {view: (pos, rot, fovy)}}
        self.cameras_fn = cameras_fn
        self.view_correct: dict[str, bool | None] = {}
        self.views_seen = 0

    def _new_episode(self, instruction: str, info: dict[str, Any]) -> None:
        super()._new_episode(instruction, info)
        self.view_correct = {}
        self.views_seen = 0

    def _view_candidates(self, image: np.ndarray, depth: np.ndarray, seg: np.ndarray | None,
                         fovy_deg: float | None = None) -> tuple[list[Candidate], np.ndarray, list[np.ndarray]]:
        cands = self.detector.detect(image, self.category, depth=depth, segmentation=seg)
        cands = self._height_checked(cands, depth, fovy_deg)[: self.config.max_candidates]
        if not cands:
            return [], np.zeros(0), []
        final, best = self._score(image, cands)
        if best != int(np.argmax(final)):  # the part rule wins: give it the top score so fusion agrees
            final[best] = final.max() + 1e-6
        pool = list(getattr(self.detector, "all_masks", None) or [c.mask for c in cands])
        return cands, final, pool

    def _ground(self, obs: dict[str, Any], image: np.ndarray) -> None:
        sensors = self.cameras_fn()
        target = self._target_id()
        images = obs.get("images") or {"front": image}
        entries = []  # (view, candidate index, score, world point, body id or None)
        per_view: dict[str, tuple[list[Candidate], np.ndarray, list[np.ndarray]]] = {}
        planes: dict[str, Any] = {}
        order = [v for v in self.views if v != "front"] + (["front"] if "front" in self.views else [])
        for view in order:
            if view not in images:
                continue
            depth, seg = sensors["depth"][view], sensors["segmentation"].get(view)
            pos, rot, fovy = sensors["pose"][view]
            cands, final, pool = self._view_candidates(np.asarray(images[view]), depth, seg, fovy)
            planes[view] = getattr(self.detector, "plane", None)
            per_view[view] = (cands, final, pool)
            for i, c in enumerate(cands):
                point = backproject(c.mask, depth, pos, rot, fovy)
                body = _majority_id(seg, c.mask) if seg is not None else None
                if point is not None:
                    entries.append((view, i, float(final[i]), point, body))
            if len(cands):
                best = int(np.argmax(final))
                self.view_correct[view] = None if seg is None or target is None else \
                    _majority_id(seg, cands[best].mask) == target
            else:
                self.view_correct[view] = False if target is not None else None
        self.num_candidates = sum(len(v[0]) for v in per_view.values())
        if not entries:
            self.fallback_reason = f"detector found no {self.category} in any view"
            return
        clusters = _cluster(entries)
        n_views = max(1, len(per_view))
        fused = [np.mean([e[2] for e in cl]) * (len({e[0] for e in cl}) / n_views) ** COVERAGE_POWER
                 for cl in clusters]
        best_cluster = clusters[int(np.argmax(fused))]
        self.chosen_score = float(max(fused))
        self.views_seen = len({e[0] for e in best_cluster})
        bodies = [e[4] for e in best_cluster if e[4] is not None]
        if target is not None and bodies:
            self.view_correct["fused"] = max(set(bodies), key=bodies.count) == target
        if self.chosen_score < self.config.min_score:
            self.fallback_reason = f"no confident match (best fused score {self.chosen_score:.3f})"
            return
        front = [e for e in best_cluster if e[0] == "front"]
        if not front:
            self.fallback_reason = "the fused choice is not visible in the front view"
            return
        cands, _, pool = per_view["front"]
        self.chosen = cands[max(front, key=lambda e: e[2])[1]]
        self.grounded = True
        others = [m for m in pool if m is not self.chosen.mask]
        self.attribute = self.prompter.pick_attribute(image, others)
        self.tracker.start(image, self.chosen.mask, depth=sensors["depth"]["front"], plane=planes.get("front"))
        seg = sensors["segmentation"].get("front")
        if seg is not None and target is not None:
            self.grounding_correct = _majority_id(seg, self.chosen.mask) == target

    def episode_info(self) -> dict[str, Any]:
        """Single-view VAP's diagnostics plus each view's own choice and the fused choice."""
        info = super().episode_info()
        for view in (*self.views, "fused"):
            info[f"grounding_correct_{view}"] = self.view_correct.get(view)
        info["grounding_views_seen"] = int(self.views_seen)
        return info


def _cluster(entries: list[tuple[str, int, float, np.ndarray, Any]]) -> list[list[tuple]]:
    """Greedy 3-D clustering, best scores first; a cluster takes at most one candidate per view."""
    clusters: list[list[tuple]] = []
    for e in sorted(entries, key=lambda e: -e[2]):
        for cl in clusters:
            centre = np.mean([x[3] for x in cl], axis=0)
            if e[0] not in {x[0] for x in cl} and np.linalg.norm((e[3] - centre)[:2]) < FUSE_RADIUS:
                cl.append(e)
                break
        else:
            clusters.append([e])
    return clusters
