"""The head's image input: camera images resized and, for the MobileNetV2 backbone, turned into frozen features."""

from __future__ import annotations

import numpy as np
import torch

from envs.errors import choice_error
from perception.mobilenet_v2 import spatial_features
from policies.vla.conversions import resize_image
from policies.vla.model import BACKBONES, VisionSpec


def image_features(images: np.ndarray, vision: VisionSpec) -> torch.Tensor:
    """The head's image input for uint8 images (H×W×3 or N×H×W×3), resized to the spec's input size.

    Frozen MobileNetV2 spatial features (N×C×h×w float) for ``mobilenet_v2_imagenet``; the resized pixels
    themselves (N×3×H×W uint8) for ``cnn``, whose stem is part of the trained head.
    """
    arr = np.asarray(images)
    if arr.ndim == 3:
        arr = arr[None]
    size = vision.input_size
    if arr.shape[1:3] != (size, size):
        arr = np.stack([resize_image(a, size) for a in arr])
    if vision.backbone == "cnn":
        return torch.from_numpy(np.ascontiguousarray(arr.transpose(0, 3, 1, 2)))
    if vision.backbone != "mobilenet_v2_imagenet":
        raise choice_error("vision backbone", vision.backbone, BACKBONES)
    return spatial_features(arr, size=None, blocks=vision.blocks)
