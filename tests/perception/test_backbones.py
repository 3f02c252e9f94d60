"""MobileNetV2 (offline ImageNet weights) and the MiniLM text encoder on real inputs."""

from __future__ import annotations

import os

import matplotlib
import numpy as np
import pytest
import torch
from PIL import Image

from perception.imagenet_classes import IMAGENET_CLASSES, class_synonyms
from perception.mobilenet_v2 import (
    MobileNetV2,
    class_probabilities,
    load_mobilenet_v2,
    pooled_features,
    spatial_features,
    to_input,
    weights_path,
)
from perception.text_encoder import EMBED_DIM, load_text_encoder

torch.set_num_threads(1)


def real_photo() -> np.ndarray:
    """A real photograph shipped with matplotlib (Grace Hopper in uniform)."""
    path = os.path.join(matplotlib.get_data_path(), "sample_data", "grace_hopper.jpg")
    return np.asarray(Image.open(path).convert("RGB"))


def test_class_names_are_the_imagenet_order():
    assert len(IMAGENET_CLASSES) == 1000
    assert class_synonyms(0) == ["tench", "Tinca tinca"]
    assert class_synonyms(504) == ["coffee mug"]
    assert class_synonyms(999)[0] == "toilet tissue"


def test_weights_load_strictly_and_classify_a_real_photo():
    state = torch.load(weights_path(), map_location="cpu", weights_only=True)
    MobileNetV2().load_state_dict(state, strict=True)  # raises on any missing/unexpected key
    probs = class_probabilities(real_photo())
    assert probs.shape == (1, 1000)
    assert abs(float(probs.sum()) - 1.0) < 1e-4
    top5 = [IMAGENET_CLASSES[i] for i in np.argsort(-probs[0])[:5]]
    assert top5[0] == "military uniform"
    assert any("bow tie" in name for name in top5)


def test_model_is_cached_and_frozen():
    assert load_mobilenet_v2() is load_mobilenet_v2()
    assert not any(p.requires_grad for p in load_mobilenet_v2().parameters())
    assert not load_mobilenet_v2().training


def test_pooled_features_separate_same_image_from_another():
    photo = real_photo()
    crop = photo[40:560, 30:490]  # same scene, slightly different framing
    other = np.ascontiguousarray(photo[::-1, ::-1, ::-1])  # flipped and channel-swapped: different statistics
    feats = pooled_features(np.stack([np.asarray(Image.fromarray(x).resize((224, 224))) for x in (photo, crop, other)]))
    assert feats.shape == (3, 1280)
    unit = feats / np.linalg.norm(feats, axis=1, keepdims=True)
    same, diff = float(unit[0] @ unit[1]), float(unit[0] @ unit[2])
    assert same > 0.85
    assert same - diff > 0.1


def test_spatial_features_shape_and_normalisation():
    img = real_photo()
    fmap = spatial_features(img, size=192)
    assert tuple(fmap.shape) == (1, 96, 12, 12)
    assert tuple(spatial_features(img, size=96, blocks=7).shape) == (1, 32, 12, 12)  # 32-ch stage, stride 8
    x = to_input(np.full((4, 4, 3), 255, np.uint8), size=None)
    assert torch.allclose(x[0, :, 0, 0], torch.tensor([(1 - 0.485) / 0.229, (1 - 0.456) / 0.224, (1 - 0.406) / 0.225]))
    with pytest.raises(ValueError):
        to_input(np.zeros((8, 8), np.uint8))


def test_text_encoder_ranks_related_words_and_caches():
    enc = load_text_encoder()
    vecs = enc.encode(["mug", "coffee mug", "tench"])
    assert vecs.shape == (3, EMBED_DIM)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2]) + 0.3
    before = len(enc._cache)
    again = enc.encode(["coffee mug", "mug"])
    assert len(enc._cache) == before  # nothing re-encoded
    assert np.array_equal(again[0], vecs[1])
    assert enc.encode([]).shape == (0, EMBED_DIM)


def test_batchnorm_folding_keeps_the_outputs():
    from perception.mobilenet_v2 import fold_batchnorm

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.Sequential(torch.nn.Conv2d(8, 4, 1), torch.nn.BatchNorm2d(4)))
    for bn in (net[1], net[3][1]):  # non-trivial running statistics and affine terms
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-1, 1)
    net.eval()
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        before = net(x)
        fold_batchnorm(net)
        after = net(x)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())
    assert torch.allclose(before, after, atol=1e-5)
    # The shipped network is folded too, and still classifies (the real-photo test above checks the top class).
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in load_mobilenet_v2().modules())
