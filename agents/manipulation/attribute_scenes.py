"""First frames of generic scenes with per-word attribute labels: the training data of the attribute detectors.

A scene costs one env reset and one segmentation render (no expert, no stepping), so tens of thousands of object
views come far cheaper than demonstrations. Each object's colour, pattern and category words label its pixels
(privileged segmentation: a training-only label). Training scenes come from train-split and extra designs only
(``split="train_extended"``); test-split scenes are collected only to *measure* grounding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.config import Options
from envs.errors import choice_error
from envs.manipulation.env import make_env
from envs.manipulation.objects import find_instance
from envs.manipulation.tasks import GENERIC_TASKS
from policies.vla.attributes import STRIDE, VOCAB, label_maps
from policies.vla.conversions import resize_image

SCENE_SPLITS = ("train", "train_extended", "test")
MAX_OBJECTS = 12  # object ids per scene are stored padded to this many


@dataclass(frozen=True)
class SceneConfig(Options):
    """Which scenes: one task, a split, a count and the first seed (scene i uses seed ``seed + i``)."""

    task: str = "fractal_pick"
    split: str = "train_extended"
    scenes: int = 100
    seed: int = 0
    input_size: int = 128
    head_size: int = 0  # > 0: also keep each frame at the VLA head's input size (the base localiser's training)

    def check(self) -> None:
        if self.task not in GENERIC_TASKS:
            raise choice_error("generic task", self.task, list(GENERIC_TASKS))
        if self.split not in SCENE_SPLITS:
            raise choice_error("scene split", self.split, SCENE_SPLITS)


def collect_scenes(cfg: SceneConfig, on_progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Arrays of ``cfg.scenes`` first frames: ``images`` (N×S×S×3 uint8), ``labels`` (N×len(VOCAB)×G×G uint8),
    ``segmentation`` (N×G×G int32, nearest-sampled body ids), ``objects`` (N×MAX_OBJECTS body ids, -1 padded),
    ``targets`` (N, the described object's body id), ``target_uv`` (N×2, where the described object's base projects
    in the image, [-1, 1] edge-aligned, y down: a training-only label) and ``instructions`` (N strings); G = S / 4.
    With ``head_size`` also ``head_images`` (N×H×H×3 uint8, the frames at the head's input size)."""
    import cv2

    from envs.manipulation.scene import project_to_image

    grid = cfg.input_size // STRIDE
    env = make_env(cfg.task, {"split": cfg.split, "privileged": True})
    images, labels, segs, objects, targets, instructions = [], [], [], [], [], []
    head_images, target_uv = [], []
    try:
        for i in range(cfg.scenes):
            obs, _ = env.reset(seed=cfg.seed + i)
            image = np.asarray(obs["image"])
            image = image[0] if image.ndim == 4 else image
            seg = np.asarray(obs["segmentation"])
            seg = seg[0] if seg.ndim == 3 else seg
            state = env.unwrapped.privileged_state()
            described = []
            for o in state["objects"]:
                inst = find_instance(o["instance_id"])
                described.append((int(o["body"]), (inst.colour, inst.pattern, inst.category)))
            images.append(resize_image(image, cfg.input_size))
            labels.append(label_maps(seg, described, VOCAB, grid))
            segs.append(cv2.resize(seg.astype(np.int32), (grid, grid), interpolation=cv2.INTER_NEAREST))
            ids = np.full(MAX_OBJECTS, -1, np.int32)
            ids[: len(described)] = [b for b, _ in described][:MAX_OBJECTS]
            objects.append(ids)
            targets.append(int(state["target_body_id"]))
            base = np.asarray(state["target"]["position"], np.float64)[None]
            target_uv.append(project_to_image(env.unwrapped.task.embodiment, base)[0].astype(np.float32))
            if cfg.head_size:
                head_images.append(resize_image(image, cfg.head_size))
            instructions.append(str(obs["instruction"]))
            if on_progress is not None:
                on_progress(1)
    finally:
        env.close()
    out = {"images": np.stack(images), "labels": np.stack(labels), "segmentation": np.stack(segs),
           "objects": np.stack(objects), "targets": np.asarray(targets, np.int32),
           "target_uv": np.stack(target_uv), "instructions": np.asarray(instructions)}
    if cfg.head_size:
        out["head_images"] = np.stack(head_images)
    return out


def object_cells(data: dict[str, Any]) -> list[dict[int, np.ndarray]]:
    """Per scene: body id → its boolean cells on the label grid (for :func:`grounding_accuracy`)."""
    out = []
    for seg, ids in zip(data["segmentation"], data["objects"], strict=True):
        out.append({int(b): seg == b for b in ids if b >= 0})
    return out
