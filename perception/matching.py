"""Instance matching: which candidate is the personal object shown in a few reference images?

Three cues, each max-pooled over the references, are combined by a logistic model into one calibrated probability:
- ``embedding``: cosine of deep features (MobileNetV2 by default, or a local DINOv2/CLIP folder);
- ``colour``: HSV histogram intersection over the object's pixels;
- ``keypoints``: ORB matches that survive a RANSAC similarity fit, squashed as n / (n + 8); with the layout cue on,
  against the references whose layout matches the candidate best, the fit must be upright and unscaled, and the
  cue is skipped when the other cues already give one candidate a clear lead;
- ``layout``: where the print's colours sit on the object (``perception/layout.py``): a mirrored, upside-down or
  re-cropped copy of the print has the same colours and pooled features but not the same arrangement.
Within an image, cues are also compared across candidates (each cue minus the best other candidate's), because
same-category distractors make absolute similarities uninformative; the relative terms carry most weight.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from envs.config import Options
from envs.errors import ConfigError
from perception.candidate import GREY, OBJECT_CROP, Candidate, object_crop
from perception.embedders import Embedder, MobileNetEmbedder
from perception.layout import LayoutBank, LayoutSignature, layout_bank, layout_signature, layout_similarities
from perception.proposals import ProposalConfig, colour_proposals

COMPONENTS = ("embedding", "colour", "keypoints", "layout")
DEFAULT_COMPONENTS = ("embedding", "colour", "keypoints", "layout")
LAYOUT_ABS, LAYOUT_REL = 4.0, 12.0  # chosen on development photos and scenes (docs/results/vap.md)
CROP = OBJECT_CROP  # matching resolution: small objects are upsampled so ORB's 31-px patches fit
_GREY = GREY


@dataclass(frozen=True)
class MatcherConfig(Options):
    """Which cues to use and the logistic weights combining them (absolute, relative-to-best-other, bias)."""

    components: tuple[str, ...] = DEFAULT_COMPONENTS
    weights_abs: dict[str, float] = field(default_factory=lambda: {"embedding": 4.0, "colour": 3.0,
                                                                    "keypoints": 3.0, "layout": LAYOUT_ABS})
    weights_rel: dict[str, float] = field(default_factory=lambda: {"embedding": 12.0, "colour": 8.0,
                                                                    "keypoints": 6.0, "layout": LAYOUT_REL})
    bias: float = -6.0
    hist_bins: tuple[int, int, int] = (12, 4, 4)
    orb_features: int = 200
    # ORB + RANSAC is the one cue whose cost grows with the reference count: only the first few references take
    # part (the cue saturates at a handful; a user object's extra robot-view renders come after them).
    keypoint_refs: int = 5
    # The layout cue compares arrangements, which only works from a similar viewpoint: with a handful of phone-like
    # references it added noise on the built-in designs (docs/results/vap.md), so it counts only when the reference
    # set is this large (a user object's set has 16 renders from the robot cameras' elevation added).
    layout_min_refs: int = 8
    # With the layout cue on, the references share the robot camera's view, so the keypoint fit of the same print is
    # upright and about unscaled (crops are normalised to the object's box): a fit turned further (an upside-down
    # print) or scaled further (a recrop) counts no inliers. With a few phone-like references any fit counts.
    keypoint_max_turn: float = 30.0  # degrees
    keypoint_scale: tuple[float, float] = (0.67, 1.5)
    # With the layout cue on, keypoints are matched against this many best-layout references (4 and 5 grounded
    # the same development scenes; each one more costs an ORB match and a RANSAC fit per candidate) ...
    layout_keypoint_refs: int = 4
    # ... and not at all when the other cues already put one candidate this far (logit units) ahead of every
    # other candidate it does not overlap: on the development scenes any gap from 6 up left every choice as it
    # was, and about half the scenes are that clear (the keypoint cue is the matcher's most costly one).
    keypoint_skip_gap: float = 8.0

    def check(self) -> None:
        bad = [c for c in self.components if c not in COMPONENTS]
        if bad or not self.components:
            raise ConfigError(f"unknown matcher components {bad or '(none)'}; valid: {', '.join(COMPONENTS)}")


@dataclass
class ObjectView:
    """Precomputed matching features of one object view (a reference or a candidate)."""

    crop: np.ndarray
    embedding: np.ndarray | None
    hist: np.ndarray
    descriptors: np.ndarray | None
    points: np.ndarray
    crop_mask: np.ndarray | None = None
    _layout: LayoutSignature | None = None

    @property
    def layout(self) -> LayoutSignature:
        """The print-layout signature, made on first use (it counts only with many references)."""
        if self._layout is None:
            self._layout = layout_signature(self.crop, self.crop_mask if self.crop_mask is not None
                                            else np.any(self.crop != _GREY, axis=-1))
        return self._layout


def load_reference_images(refs: Any) -> list[np.ndarray | dict]:
    """Normalise ``info["reference_images"]`` (arrays, dicts with image/mask, or file paths) to arrays/dicts.

    Raises ConfigError naming the problem when references are missing or unreadable.
    """
    if refs is None or (hasattr(refs, "__len__") and len(refs) == 0):
        raise ConfigError("no reference images given for the personal object (info['reference_images'] is empty)")
    if isinstance(refs, np.ndarray) and refs.ndim == 3:
        refs = [refs]
    out: list[np.ndarray | dict] = []
    for i, ref in enumerate(refs):
        if isinstance(ref, str | Path):
            img = cv2.imread(str(ref), cv2.IMREAD_COLOR)
            if img is None:
                raise ConfigError(f"reference image {str(ref)!r} is missing or unreadable")
            out.append(cv2.cvtColor(img, cv2.COLOR_BGR2RGB))
        elif isinstance(ref, dict):
            if "image" not in ref:
                raise ConfigError(f"reference {i} is a dict without an 'image' entry")
            out.append(ref)
        else:
            arr = np.asarray(ref)
            if arr.ndim != 3 or arr.shape[-1] != 3 or arr.size == 0:
                raise ConfigError(f"reference image {i} has shape {arr.shape}; expected H×W×3 RGB")
            out.append(arr.astype(np.uint8))
    return out


def reference_mask(image: np.ndarray, min_dist: float = 8.0) -> np.ndarray:
    """The object in a reference photo on a plain background: everything that differs from the border colour.

    The background colour is the median of the image border; a pixel is object when its Lab distance to it (full
    lightness weight: a white object on a light backdrop differs mostly in lightness) exceeds ``min_dist`` or three
    times the border's median deviation. The largest component that does not span the image (a strip of backdrop
    edge does), holes filled, is kept. A patterned object (white body, green letters) thus comes out whole; a
    colour-segment mask kept only its largest single-colour part. Falls back to the largest colour proposal when
    that fails (nothing, or nearly everything, differs).
    """
    lab = cv2.cvtColor(np.ascontiguousarray(image, np.uint8), cv2.COLOR_RGB2LAB).astype(np.float32)
    lab = cv2.GaussianBlur(lab, (3, 3), 0)
    border = np.concatenate([lab[:3].reshape(-1, 3), lab[-3:].reshape(-1, 3), lab[:, :3].reshape(-1, 3),
                             lab[:, -3:].reshape(-1, 3)])
    background = np.median(border, axis=0)
    spread = np.median(np.linalg.norm(border - background, axis=1))  # robust: a strip of another colour is not spread
    fg = (np.linalg.norm(lab - background, axis=-1) > max(min_dist, 3.0 * spread)).astype(np.uint8)
    fg = cv2.morphologyEx(fg, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    fg = cv2.morphologyEx(fg, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(fg, connectivity=8)
    h, w = fg.shape
    x0, y0, bw, bh = (stats[1:, k] for k in (cv2.CC_STAT_LEFT, cv2.CC_STAT_TOP, cv2.CC_STAT_WIDTH,
                                            cv2.CC_STAT_HEIGHT))
    spans = ((x0 == 0) & (x0 + bw == w)) | ((y0 == 0) & (y0 + bh == h))
    area = np.where(spans, -1, stats[1:, cv2.CC_STAT_AREA])
    if n > 1 and area.max() > 0:
        obj = (labels == 1 + int(np.argmax(area))).astype(np.uint8)
        outside = obj.copy()
        flood = np.zeros((obj.shape[0] + 2, obj.shape[1] + 2), np.uint8)
        cv2.floodFill(outside, flood, (0, 0), 2)  # background reachable from the corner; the rest is object
        mask = outside != 2
        if 0.01 <= mask.mean() <= 0.95:
            return mask
    cfg = ProposalConfig(min_area_frac=0.01, max_area_frac=0.95)
    masks = colour_proposals(image, cfg)
    if not masks:
        return np.ones(image.shape[:2], bool)
    return max(masks, key=lambda m: int(m.sum()))


def _digest(image: np.ndarray, mask: np.ndarray | None) -> bytes:
    h = hashlib.blake2b(np.ascontiguousarray(image).tobytes(), digest_size=16)
    h.update(str(image.shape).encode())
    if mask is not None:
        h.update(np.packbits(mask).tobytes())
    return h.digest()


def overlap_matrix(masks: Sequence[np.ndarray]) -> np.ndarray:
    """n×n bool: candidates i and j share pixels (a fragment and the union containing it); diagonal True."""
    n = len(masks)
    if n == 0:
        return np.zeros((0, 0), bool)
    flat = np.stack([np.asarray(m, bool).ravel() for m in masks]).astype(np.float32)
    return (flat @ flat.T) > 0


def margins(val: np.ndarray, overlap: np.ndarray | None = None) -> np.ndarray:
    """Each cue minus the best value among the *other* candidates it does not overlap (0 when there are none).

    Overlapping candidates are alternative masks of one object, not competitors, so they are left out.
    """
    val = np.asarray(val, float)
    n = len(val)
    excl = np.eye(n, dtype=bool) if overlap is None else np.asarray(overlap, bool) | np.eye(n, dtype=bool)
    others = np.where(excl, -np.inf, val[None, :]).max(axis=1) if n else np.zeros(0)
    return np.where(np.isfinite(others), val - others, 0.0)


def prefer_part(masks: Sequence[np.ndarray], best: int, absolute: np.ndarray, margin: float = 0.1) -> int:
    """``best``, or one of its parts when ``best`` is a union of two or more smaller candidates and that part
    alone matches the references better (absolute cue logit higher by ``margin``).

    A stacked-fragment union can join my object with the look-alike behind it; margins never compare the union
    with its own parts (they overlap), so it inherits my object's margin and can win. Fragments of one object
    score about like their union, so the margin keeps the whole object in that case.
    """
    area = np.array([int(np.count_nonzero(m)) for m in masks])
    win = np.asarray(masks[best], bool)
    parts = [j for j in range(len(masks)) if j != best and area[j] < area[best]
             and np.count_nonzero(np.asarray(masks[j], bool) & win) > 0.8 * area[j]]
    if len(parts) < 2:
        return best
    top = max(parts, key=lambda j: absolute[j])
    return top if absolute[top] > absolute[best] + margin else best


class InstanceMatcher:
    """Scores candidates against a reference set; ``set_references`` once per episode, ``score`` per detection."""

    def __init__(self, config: MatcherConfig = MatcherConfig(), embedder: Embedder | None = None) -> None:
        self.config = config
        self.embedder = embedder if embedder is not None else MobileNetEmbedder()
        self._orb = cv2.ORB_create(nfeatures=config.orb_features, edgeThreshold=8, patchSize=15)
        self._bf = cv2.BFMatcher(cv2.NORM_HAMMING, crossCheck=True)
        self.references: list[ObjectView] = []
        self._ref_cache: dict[bytes, ObjectView] = {}
        self._bank: LayoutBank | None = None  # the references' layout signatures stacked, made on first use

    # -- features ---------------------------------------------------------------------------------------------
    def views(self, image: np.ndarray, masks: Sequence[np.ndarray]) -> list[ObjectView]:
        """Matching features of the masked objects in one image (one batched embedder call)."""
        return self.views_of([(image, m) for m in masks])

    def views_of(self, objects: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[ObjectView]:
        """Matching features of (image, mask) pairs, possibly from different images (one batched embedder call)."""
        crops, crop_masks = [], []
        for image, m in objects:
            c, cm = object_crop(image, m, CROP)
            crops.append(c)
            crop_masks.append(cm)
        use = self.config.components
        emb = self.embedder.embed(np.stack(crops)) if ("embedding" in use and crops) else [None] * len(crops)
        out = []
        for c, cm, e in zip(crops, crop_masks, emb, strict=True):
            hist = self._hist(c, cm) if "colour" in use else np.zeros(1, np.float32)
            pts, desc = self._keypoints(c, cm) if "keypoints" in use else (np.zeros((0, 2), np.float32), None)
            out.append(ObjectView(crop=c, embedding=e, hist=hist, descriptors=desc, points=pts,
                                  crop_mask=cm if "layout" in use else None))
        return out

    def _hist(self, crop_img: np.ndarray, mask: np.ndarray) -> np.ndarray:
        hsv = cv2.cvtColor(crop_img, cv2.COLOR_RGB2HSV)
        hist = cv2.calcHist([hsv], [0, 1, 2], mask.astype(np.uint8), list(self.config.hist_bins),
                            [0, 180, 0, 256, 0, 256]).ravel()
        return (hist / max(hist.sum(), 1.0)).astype(np.float32)

    def _keypoints(self, crop_img: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        grey = cv2.cvtColor(crop_img, cv2.COLOR_RGB2GRAY)
        kps, desc = self._orb.detectAndCompute(grey, cv2.dilate(mask.astype(np.uint8) * 255, np.ones((3, 3))))
        pts = np.array([k.pt for k in kps], np.float32).reshape(-1, 2)
        return pts, desc

    def set_references(self, refs: Any) -> int:
        """Load and featurise the reference images; returns how many were usable.

        Featurised reference sets are cached by content (the same personal object recurs across episodes).
        """
        images = load_reference_images(refs)
        keys, todo = [], {}  # todo: key -> (image, mask) of references not featurised yet
        for ref in images:
            if isinstance(ref, dict):
                img = np.asarray(ref["image"], np.uint8)
                given = None if ref.get("mask") is None else np.asarray(ref["mask"], bool)
            else:
                img, given = ref, None
            key = _digest(img, given)
            if key not in self._ref_cache and key not in todo:
                todo[key] = (img, given if given is not None else reference_mask(img))
            keys.append(key)
        # All new references in one embedder batch: per-image network calls cost ~1.5× as much on CPU.
        for key, view in zip(todo, self.views_of(list(todo.values())), strict=True):
            self._ref_cache[key] = view
        views = [self._ref_cache[k] for k in keys]
        if len(self._ref_cache) > 256:  # bounded: drop the oldest half
            for k in list(self._ref_cache)[:128]:
                del self._ref_cache[k]
        self.references = views
        self._bank = None
        return len(views)

    def colour_similarity(self, image: np.ndarray, masks: Sequence[np.ndarray]) -> np.ndarray:
        """The colour cue alone (no network): a cheap pre-filter that ranks many proposals before scoring."""
        if not self.references or not len(masks):
            return np.zeros(len(masks))
        hsv = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2HSV)
        size = int(np.prod(self.config.hist_bins))
        ref_hists = [r.hist for r in self.references if r.hist.size == size]
        if not ref_hists:
            ref_hists = [self._hist(r.crop, np.any(r.crop != _GREY, axis=-1)) for r in self.references]
        refs = np.stack(ref_hists)  # one array op per proposal: a user object brings 20 references
        out = []
        for m in masks:
            hist = cv2.calcHist([hsv], [0, 1, 2], np.asarray(m, np.uint8), list(self.config.hist_bins),
                                [0, 180, 0, 256, 0, 256]).ravel()
            hist = hist / max(hist.sum(), 1.0)
            out.append(float(np.minimum(hist[None, :], refs).sum(axis=1).max()))
        return np.array(out)

    # -- cues -------------------------------------------------------------------------------------------------
    def _inliers(self, a: ObjectView, b: ObjectView, upright: bool = False) -> int:
        """ORB matches of ``a`` and ``b`` consistent with one similarity transform; with ``upright`` only a
        transform turned by at most ``keypoint_max_turn`` and scaled within ``keypoint_scale`` counts."""
        if a.descriptors is None or b.descriptors is None or len(a.points) < 3 or len(b.points) < 3:
            return 0
        matches = self._bf.match(a.descriptors, b.descriptors)
        if len(matches) < 3:
            return 0
        src = a.points[[m.queryIdx for m in matches]]
        dst = b.points[[m.trainIdx for m in matches]]
        fit, inl = cv2.estimateAffinePartial2D(src, dst, method=cv2.RANSAC, ransacReprojThreshold=4.0,
                                               maxIters=200, confidence=0.99, refineIters=0)
        if inl is None or fit is None:
            return 0
        if upright:
            scale = math.hypot(fit[0, 0], fit[1, 0])
            turn = abs(math.degrees(math.atan2(fit[1, 0], fit[0, 0])))
            lo, hi = self.config.keypoint_scale
            if turn > self.config.keypoint_max_turn or not lo <= scale <= hi:
                return 0
        return int(inl.sum())

    def layout_active(self) -> bool:
        """Whether the layout cue counts with the current references (it needs ``layout_min_refs`` of them)."""
        return "layout" in self.config.components and len(self.references) >= self.config.layout_min_refs

    def _clear_lead(self, out: dict[str, np.ndarray], overlap: np.ndarray | None) -> bool:
        """Whether the cues in ``out`` already put one candidate ``keypoint_skip_gap`` logit units ahead of every
        other candidate it does not overlap (False when there is no such other candidate)."""
        cfg = self.config
        n = len(next(iter(out.values())))
        logit = sum((cfg.weights_abs[c] * v + cfg.weights_rel[c] * margins(v, overlap) for c, v in out.items()),
                    np.zeros(n))
        best = int(np.argmax(logit))
        others = np.ones(n, bool) if overlap is None else ~np.asarray(overlap[best], bool)
        others[best] = False
        return bool(others.any()) and float(logit[best] - logit[others].max()) >= cfg.keypoint_skip_gap

    def cues(self, views: Sequence[ObjectView], overlap: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Per-candidate cue values (max over references), each shape (n,).

        ``overlap`` (:func:`overlap_matrix` of the candidates' masks) tells which candidates are one object; with
        the layout cue on it lets a clear lead of the other cues skip the keypoint cue (zero for every candidate).
        """
        if not self.references:
            raise ConfigError("matcher has no reference images; call set_references first")
        n, use, out = len(views), self.config.components, {}
        if "embedding" in use:
            refs = np.stack([r.embedding for r in self.references])
            cand = np.stack([v.embedding for v in views]) if n else np.zeros((0, refs.shape[1]), np.float32)
            out["embedding"] = (cand @ refs.T).max(axis=1) if n else np.zeros(0)
        if "colour" in use:
            ref_hists = np.stack([r.hist for r in self.references])
            out["colour"] = np.array([float(np.minimum(v.hist[None, :], ref_hists).sum(axis=1).max()) for v in views])
        sims = None
        if self.layout_active() and n:
            if self._bank is None:
                self._bank = layout_bank([r.layout for r in self.references])
            sims = layout_similarities([v.layout for v in views], self._bank)  # (n, references)
        if "layout" in use:
            out["layout"] = sims.max(axis=1) if sims is not None else np.zeros(n)
        if "keypoints" in use:
            if sims is None:
                refs = self.references[:max(1, self.config.keypoint_refs)]
                counts = np.array([max(self._inliers(v, r) for r in refs) for v in views], float)
            elif self._clear_lead(out, overlap):
                counts = np.zeros(n)
            else:  # against the views whose layout matches this candidate best: the same side of the object
                k = max(1, self.config.layout_keypoint_refs)
                counts = np.array([max(self._inliers(v, self.references[j], upright=True)
                                       for j in np.argsort(-sims[i], kind="stable")[:k])
                                   for i, v in enumerate(views)], float)
            out["keypoints"] = counts / (counts + 8.0)
        # the order of COMPONENTS (callers that list the cues see them as before)
        return {c: out[c] for c in COMPONENTS if c in out}

    def combine(self, cues: dict[str, np.ndarray], overlap: np.ndarray | None = None) -> np.ndarray:
        """Logistic combination of absolute cues and their margin over the best other (non-overlapping) candidate."""
        cfg = self.config
        n = len(next(iter(cues.values())))
        logit = np.full(n, cfg.bias, float)
        for name, val in cues.items():
            logit += cfg.weights_abs[name] * val + cfg.weights_rel[name] * margins(val, overlap)
        return 1.0 / (1.0 + np.exp(-logit))

    def absolute(self, cues: dict[str, np.ndarray]) -> np.ndarray:
        """The logit's absolute terms only (how well each candidate alone matches the references)."""
        return sum((self.config.weights_abs[name] * np.asarray(val, float) for name, val in cues.items()),
                   np.zeros(len(next(iter(cues.values())))))

    def score(self, image: np.ndarray, candidates: Sequence[Candidate]) -> np.ndarray:
        """Calibrated probability that each candidate is the personal object, shape (n,)."""
        return self.score_with_cues(image, candidates)[0]

    def score_with_cues(self, image: np.ndarray, candidates: Sequence[Candidate],
                        ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """:meth:`score` and the cue values it was computed from."""
        if not candidates:
            return np.zeros(0), {name: np.zeros(0) for name in self.config.components}
        overlap = overlap_matrix([c.mask for c in candidates])
        cues = self.cues(self.views(image, [c.mask for c in candidates]), overlap)
        return self.combine(cues, overlap), cues

    def fit_calibration(self, cue_rows: list[dict[str, np.ndarray]], labels: list[np.ndarray],
                        steps: int = 500, lr: float = 0.5,
                        overlaps: list[np.ndarray | None] | None = None) -> MatcherConfig:
        """Fit the logistic weights on labelled scenes (cue dicts + 0/1 arrays); returns the fitted config."""
        feats, ys = [], []
        overlaps = overlaps if overlaps is not None else [None] * len(labels)
        for cues, y, ov in zip(cue_rows, labels, overlaps, strict=True):
            cols = []
            for name in self.config.components:
                val = np.asarray(cues[name], float)
                cols += [val, margins(val, ov)]
            feats.append(np.stack(cols, axis=1))
            ys.append(np.asarray(y, float))
        X, Y = np.concatenate(feats), np.concatenate(ys)
        w, b = np.zeros(X.shape[1]), 0.0
        for _ in range(steps):  # plain gradient descent with a little L2: a handful of parameters
            p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
            w -= lr * (X.T @ (p - Y) / len(Y) + 1e-3 * w)
            b -= lr * float(np.mean(p - Y))
        comps = self.config.components
        return replace(self.config, weights_abs={c: float(w[2 * i]) for i, c in enumerate(comps)},
                       weights_rel={c: float(w[2 * i + 1]) for i, c in enumerate(comps)}, bias=float(b))


class LimitedMatcher(InstanceMatcher):
    """Uses only the first ``limit`` reference images (the reference-count ablation); ``None``: all of them."""

    def __init__(self, limit: int | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.limit = limit

    def set_references(self, refs: Any) -> int:
        if self.limit is not None and refs is not None and len(refs):
            refs = list(refs)[: self.limit]
        return super().set_references(refs)
