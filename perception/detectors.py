"""Category detectors: ``detect(image, category, depth=None, segmentation=None) -> list[Candidate]``.

Backends (all swappable behind :class:`Detector`):
- ``proposals`` (offline default): class-agnostic RGB-D proposals scored for the category by MobileNetV2 ImageNet
  probabilities matched to the category word through MiniLM.
- ``oracle``: the simulator's segmentation and the personal object's body id (privileged; an upper bound only).
- ``transformers``: an open-vocabulary detector (OWLv2 / GroundingDINO) loaded from a local folder.
- ``groundingdino``: the groundingdino-py package with a local config + checkpoint (optional extra).
Open-vocabulary backends return boxes; each box's mask is the class-agnostic proposal that best fills it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from envs.errors import ConfigError, choice_error
from perception.candidate import Candidate, box_iou, box_of_mask, mask_of_box
from perception.category import CategoryScorer
from perception.proposals import ProposalConfig, fit_inverse_depth_plane, propose


@runtime_checkable
class Detector(Protocol):
    """Finds instances of a category in one RGB image (depth/segmentation are used only by backends that can).

    Optional hooks VAP calls at an episode's reset when a backend has them: ``reset(info)`` (episode facts, e.g.
    the oracle's body ids) and ``prepare(category)`` (image-free work such as text encodings).
    """

    def detect(self, image: np.ndarray, category: str, depth: np.ndarray | None = None,
               segmentation: np.ndarray | None = None) -> list[Candidate]: ...


def first_view(a: np.ndarray | None) -> np.ndarray | None:
    """Several cameras stack as N×H×W(×3); the detectors work on the first (main) view."""
    if a is None:
        return None
    a = np.asarray(a)
    return a[0] if a.ndim == 4 or (a.ndim == 3 and a.shape[-1] != 3) else a


class ProposalDetector:
    """Offline default: RGB-D proposals, each scored P(category | crop) with MobileNetV2 + MiniLM.

    ``ranker(image, masks) -> scores`` (optional; VAP passes the matcher's network-free colour cue) orders the
    proposals before the network runs, so only the ``max_candidates`` most plausible ones are scored.
    """

    def __init__(self, config: ProposalConfig = ProposalConfig(), scorer: CategoryScorer | None = None,
                 max_candidates: int = 12, ranker: Callable[[np.ndarray, list[np.ndarray]], np.ndarray] | None = None,
                 embedder: Any = None) -> None:
        self.config = config
        self.scorer = scorer or CategoryScorer(embedder=embedder)
        self.max_candidates = max_candidates
        self.ranker = ranker
        self.plane: np.ndarray | None = None  # the last frame's table plane (a tracker can reuse it)
        # Every proposal of the last frame, ranked (not only the scored ones): VAP's recolour colour must differ
        # from all of them, or it can name an object the ranking dropped.
        self.all_masks: list[np.ndarray] = []

    def prepare(self, category: str) -> None:
        """Do the category's image-free work (its text encoding) now, e.g. at an episode's reset."""
        self.scorer.class_weights(category)

    def proposals(self, image: np.ndarray, depth: np.ndarray | None = None) -> list[np.ndarray]:
        """Class-agnostic masks, the ``max_candidates`` best by the ranker (else largest first); no network."""
        self.plane = None if depth is None else fit_inverse_depth_plane(np.asarray(depth, np.float64), self.config)
        masks = sorted(propose(image, depth, self.config, plane=self.plane), key=lambda m: -int(m.sum()))
        if self.ranker is not None and len(masks) > self.max_candidates:
            order = np.argsort(-np.asarray(self.ranker(image, masks), float), kind="stable")
            masks = [masks[i] for i in order]
        self.all_masks = masks
        return masks[: self.max_candidates]

    def detect(self, image: np.ndarray, category: str, depth: np.ndarray | None = None,
               segmentation: np.ndarray | None = None) -> list[Candidate]:
        image, depth = first_view(image), first_view(depth)
        masks = self.proposals(image, depth)
        boxes = [box_of_mask(m) for m in masks]
        scores = self.scorer.score(image, masks, boxes, category)
        cands = [Candidate(box=b, mask=m, score=float(s), label=category, source="proposals")
                 for m, b, s in zip(masks, boxes, scores, strict=True)]
        return sorted(cands, key=lambda c: -c.score)


class OracleDetector:
    """Privileged upper bound: the personal object's mask straight from the simulator segmentation.

    ``reset(info)`` reads the body id from ``info[id_key]``; distractor ids from ``info[distractor_key]`` (when
    present) are returned too with score 0.5 so matching still has a choice to make. ``scene_ids_fn()`` (optional)
    lists the other table-top bodies: their masks are not candidates but fill ``all_masks``, so a prompt colour is
    chosen against every object in view, as with the proposals detector.
    """

    def __init__(self, id_key: str = "personal_body_id", distractor_key: str = "distractor_body_ids",
                 target_id_fn: Any = None, scene_ids_fn: Callable[[], Sequence[int]] | None = None) -> None:
        self.id_key, self.distractor_key = id_key, distractor_key
        self.target_id_fn = target_id_fn  # fallback when info does not carry the id (e.g. read from the env)
        self.scene_ids_fn = scene_ids_fn
        self.target_id: int | None = None
        self.distractor_ids: tuple[int, ...] = ()
        self.all_masks: list[np.ndarray] = []  # every object mask of the last frame, candidates first

    def reset(self, info: dict[str, Any]) -> None:
        if info.get(self.id_key) is not None:
            self.target_id = int(info[self.id_key])
        else:
            self.target_id = self.target_id_fn() if self.target_id_fn is not None else None
        self.distractor_ids = tuple(int(i) for i in info.get(self.distractor_key, ()) or ())

    def detect(self, image: np.ndarray, category: str, depth: np.ndarray | None = None,
               segmentation: np.ndarray | None = None) -> list[Candidate]:
        segmentation = first_view(segmentation)
        if segmentation is None or self.target_id is None:
            return []
        seg = np.asarray(segmentation)
        seg = np.where(seg >= 0, seg & ((1 << 24) - 1), seg)  # PyBullet packs link indices into the high bits
        out = []
        for oid, score in [(self.target_id, 1.0)] + [(d, 0.5) for d in self.distractor_ids]:
            mask = seg == oid
            if mask.any():
                out.append(Candidate(box=box_of_mask(mask), mask=mask, score=score, label=category, source="oracle",
                                     extra={"body_id": oid}))
        self.all_masks = [c.mask for c in out]
        taken = {self.target_id, *self.distractor_ids}
        for oid in self.scene_ids_fn() if self.scene_ids_fn is not None else ():
            mask = seg == oid
            if oid not in taken and mask.any():
                self.all_masks.append(mask)
        return out


def boxes_to_candidates(image: np.ndarray, depth: np.ndarray | None, boxes: np.ndarray, scores: np.ndarray,
                        category: str, source: str, cfg: ProposalConfig = ProposalConfig()) -> list[Candidate]:
    """Attach a mask to each detector box: the proposal with the best box IoU (≥ 0.3), else the box itself."""
    h, w = image.shape[:2]
    masks = propose(image, depth, cfg)
    mboxes = [box_of_mask(m) for m in masks]
    out = []
    for box, score in zip(boxes, scores, strict=True):
        x0, y0 = int(np.clip(np.floor(box[0]), 0, w - 1)), int(np.clip(np.floor(box[1]), 0, h - 1))
        x1, y1 = int(np.clip(np.ceil(box[2]), x0 + 1, w)), int(np.clip(np.ceil(box[3]), y0 + 1, h))
        b = (x0, y0, x1, y1)  # at least one pixel, inside the image
        ious = [box_iou(b, mb) for mb in mboxes]
        if ious and max(ious) >= 0.3:
            mask = masks[int(np.argmax(ious))]
        else:
            mask = mask_of_box(b, (h, w))
        out.append(Candidate(box=b, mask=mask, score=float(score), label=category, source=source))
    return sorted(out, key=lambda c: -c.score)


class TransformersDetector:
    """OWLv2 / GroundingDINO from a local folder via ``AutoModelForZeroShotObjectDetection`` (offline)."""

    def __init__(self, model_dir: str | Path, box_threshold: float = 0.1, text_threshold: float = 0.1,
                 device: str = "cpu") -> None:
        folder = Path(model_dir)
        if not (folder / "config.json").is_file():
            raise ConfigError(f"detector folder {str(folder)!r} has no config.json (expected a saved "
                              "OWLv2/GroundingDINO model)")
        from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor

        self.processor = AutoProcessor.from_pretrained(str(folder), local_files_only=True)
        self.model = AutoModelForZeroShotObjectDetection.from_pretrained(str(folder), local_files_only=True)
        self.model.eval().to(device)
        self.device = device
        self.box_threshold, self.text_threshold = box_threshold, text_threshold
        self.kind = self.model.config.model_type  # "owlv2", "owlvit", "grounding-dino", ...

    def detect(self, image: np.ndarray, category: str, depth: np.ndarray | None = None,
               segmentation: np.ndarray | None = None) -> list[Candidate]:
        import torch

        image, depth = first_view(image), first_view(depth)
        h, w = image.shape[:2]
        if self.kind.startswith("owl"):
            text: Any = [[f"a photo of a {category}"]]
        else:  # GroundingDINO wants lower-case phrases ending with a period
            text = f"{category.lower()}."
        inputs = self.processor(images=image, text=text, return_tensors="pt").to(self.device)
        with torch.no_grad():
            outputs = self.model(**inputs)
        # Own post-processing (boxes are normalised cx, cy, w, h): stable across transformers versions.
        logits = outputs.logits[0]
        if not self.kind.startswith("owl"):  # GroundingDINO: per-token logits; ignore padding tokens
            logits = logits[:, : int(inputs["attention_mask"][0].sum())]
        scores = torch.sigmoid(logits).max(dim=-1).values.cpu().numpy()
        cxcywh = outputs.pred_boxes[0].cpu().numpy()
        # OWLv2 pads the image to a square (bottom/right) before resizing: boxes are relative to that square.
        scale = np.array([max(h, w)] * 2 if self.kind == "owlv2" else [w, h], float)
        half = cxcywh[:, 2:] / 2
        xyxy = np.concatenate([(cxcywh[:, :2] - half) * scale, (cxcywh[:, :2] + half) * scale], axis=1)
        keep = scores >= self.box_threshold
        boxes, scores = xyxy[keep], scores[keep]
        return boxes_to_candidates(image, depth, boxes, scores, category, source=self.kind)


class GroundingDinoDetector:
    """groundingdino-py with a local config file and checkpoint (optional; needs transformers < 5).

    The package is not installed in the default environment and its BERT text encoder must point at a local
    folder (``text_encoder_type`` in the config); construction raises ConfigError with the reason otherwise.
    """

    def __init__(self, config_path: str | Path, checkpoint_path: str | Path, box_threshold: float = 0.3,
                 text_threshold: float = 0.25) -> None:
        for p in (config_path, checkpoint_path):
            if not Path(p).is_file():
                raise ConfigError(f"groundingdino file {str(p)!r} does not exist")
        try:
            from groundingdino.util.inference import load_model
        except Exception as exc:  # ImportError, or its transformers-version incompatibility
            raise ConfigError(f"the groundingdino backend needs groundingdino-py and transformers 4.x: {exc}") from exc
        self.model = load_model(str(config_path), str(checkpoint_path), device="cpu")
        self.box_threshold, self.text_threshold = box_threshold, text_threshold

    def detect(self, image: np.ndarray, category: str, depth: np.ndarray | None = None,
               segmentation: np.ndarray | None = None) -> list[Candidate]:
        from groundingdino.util.inference import predict

        from perception.mobilenet_v2 import to_input  # same ImageNet normalisation GroundingDINO expects

        image, depth = first_view(image), first_view(depth)
        h, w = image.shape[:2]
        tensor = to_input(image, size=None)[0].contiguous()  # to_input is channels-last (MobileNetV2's layout)
        boxes, logits, _ = predict(self.model, tensor, f"{category}.", self.box_threshold, self.text_threshold,
                                   device="cpu")
        cxcywh = boxes.numpy().reshape(-1, 4) * np.array([w, h, w, h])
        xyxy = np.concatenate([cxcywh[:, :2] - cxcywh[:, 2:] / 2, cxcywh[:, :2] + cxcywh[:, 2:] / 2], axis=1)
        return boxes_to_candidates(image, depth, xyxy, logits.numpy().reshape(-1), category, "groundingdino")


DETECTORS = ("proposals", "oracle", "transformers", "groundingdino")


def make_detector(name: str, **options: Any) -> Detector:
    """Build a detector backend by name; weight-needing backends take local paths in ``options``."""
    if name == "proposals":
        return ProposalDetector(**{k: v for k, v in options.items() if k in ("embedder", "max_candidates")})
    if name == "oracle":
        return OracleDetector(**{k: v for k, v in options.items() if k in ("id_key", "distractor_key")})
    if name == "transformers":
        if "model_dir" not in options:
            raise ConfigError("detector 'transformers' needs option model_dir=<local OWLv2/GroundingDINO folder>")
        return TransformersDetector(options["model_dir"])
    if name == "groundingdino":
        if "config_path" not in options or "checkpoint_path" not in options:
            raise ConfigError("detector 'groundingdino' needs options config_path=... and checkpoint_path=...")
        return GroundingDinoDetector(options["config_path"], options["checkpoint_path"])
    raise choice_error("detector", name, DETECTORS)
