"""An instance embedder Embodia trains itself: a small head on frozen MobileNetV2 features, trained to tell apart
object *instances* of one category (same colour, other pattern; same pattern, other colour) across views.

Why a head on frozen features rather than a CNN from scratch: the pooled MobileNetV2 features of a crop are computed
once per augmented crop, after which the supervised-contrastive training is a few seconds of matrix work on one CPU
core, and at run time the head costs ~nothing on top of the pass the matcher and the category scorer already share.

Training (:func:`train_head`) is supervised contrastive over instance ids: every batch holds several views of
several instances of **one category**, chosen around an anchor instance so that same-colour or same-pattern
look-alikes are in it, and those hard negatives count ``hard_weight`` times in the softmax denominator.

A checkpoint is a folder with ``manifest.json`` (format, config, the weights' sha256, training facts) and
``head.pt``; :func:`load_instance_embedder` verifies the sha256 and the architecture and raises ConfigError (one
line) otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch import nn

from envs.config import Options
from envs.errors import ConfigError
from envs.weights import read_weights, write_weights
from perception.candidate import GREY

FORMAT = "embodia.instance_embedder/1"
MANIFEST_FILE = "manifest.json"
WEIGHTS_FILE = "head.pt"
FEATURE_DIM = 1280  # pooled MobileNetV2


@dataclass(frozen=True)
class HeadConfig(Options):
    """Projection head architecture: FEATURE_DIM → hidden → dim, unit-normalised output."""

    hidden: int = 512
    dim: int = 128

    def check(self) -> None:
        if self.hidden < 1 or self.dim < 1:
            raise ConfigError(f"head sizes must be positive, got hidden={self.hidden}, dim={self.dim}")


@dataclass(frozen=True)
class TrainConfig(Options):
    """Supervised-contrastive training of the head (all randomness from ``seed``)."""

    steps: int = 1200
    lr: float = 1e-3
    weight_decay: float = 1e-4
    temperature: float = 0.1
    instances_per_batch: int = 12
    views_per_instance: int = 4
    hard_weight: float = 2.0  # same-category negatives sharing colour or pattern weigh this much in the denominator
    seed: int = 0

    def check(self) -> None:
        if self.steps < 1 or self.lr <= 0 or self.temperature <= 0 or self.hard_weight <= 0:
            raise ConfigError(f"bad training config {self}: steps >= 1, lr > 0, temperature > 0, hard_weight > 0")
        if self.instances_per_batch < 2 or self.views_per_instance < 2:
            raise ConfigError("instances_per_batch and views_per_instance must be >= 2")


def build_head(config: HeadConfig) -> nn.Module:
    """The untrained projection head."""
    return nn.Sequential(nn.Linear(FEATURE_DIM, config.hidden), nn.ReLU(), nn.Linear(config.hidden, config.dim))


# -- data --------------------------------------------------------------------------------------------------------
def augment(crop: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random view of an object crop (the object on grey, as ``object_crop`` makes it): scale / shift (zoom in up
    to 25 %), mirror, light (brightness and a colour-temperature tint) and a partial occlusion by a dark bar (a
    gripper finger or a neighbour's edge)."""
    s = crop.shape[0]
    out = crop.astype(np.float32)
    zoom = float(rng.uniform(0.75, 1.0))
    side = max(8, int(round(zoom * s)))
    x0, y0 = (int(rng.integers(0, s - side + 1)) for _ in range(2))
    out = cv2.resize(out[y0:y0 + side, x0:x0 + side], (s, s), interpolation=cv2.INTER_LINEAR)
    if rng.random() < 0.5:
        out = out[:, ::-1]
    grey = np.all(np.abs(out - np.array(GREY, np.float32)) < 2, axis=-1)  # keep the background as the matcher has it
    gain = float(rng.uniform(0.75, 1.25)) * (1 + rng.uniform(-0.08, 0.08, 3))
    out = np.where(grey[..., None], out, out * gain)
    if rng.random() < 0.3:
        w, h = int(rng.integers(s // 10, s // 4)), int(rng.integers(s // 4, s // 2))
        x, y = int(rng.integers(0, s - w)), int(rng.integers(0, s - h))
        out[y:y + h, x:x + w] = rng.uniform(20, 70)
    return np.clip(out, 0, 255).astype(np.uint8)


@dataclass
class Sample:
    """One crop of a known instance (its pooled features filled in by :func:`featurise`)."""

    crop: np.ndarray
    instance_id: str
    category: str
    colour: str
    pattern: str


def featurise(samples: Sequence[Sample], augmentations: int, seed: int, batch: int = 64,
              ) -> tuple[np.ndarray, list[int]]:
    """Pooled MobileNetV2 features of every sample and ``augmentations`` random views of it; returns (features,
    index of the sample each row came from). Features are taken at the crop's own size, exactly as the matcher's
    embedder (``perception.embedders.InstanceEmbedder``) computes them at run time: a head trained on another input
    resolution sees other feature statistics when it is used."""
    from perception.mobilenet_v2 import pooled_features

    rng = np.random.default_rng(seed)
    crops, origin = [], []
    for i, s in enumerate(samples):
        crops.append(s.crop)
        origin.append(i)
        for _ in range(augmentations):
            crops.append(augment(s.crop, rng))
            origin.append(i)
    feats = [pooled_features(np.stack(crops[k:k + batch]), size=None) for k in range(0, len(crops), batch)]
    return np.concatenate(feats).astype(np.float32), origin


# -- training ------------------------------------------------------------------------------------------------------
def supcon_loss(z: torch.Tensor, labels: torch.Tensor, hard: torch.Tensor, temperature: float,
                hard_weight: float) -> torch.Tensor:
    """Supervised contrastive loss over unit rows ``z`` with instance ``labels``; ``hard[i, j]`` marks negatives
    that are look-alikes of row i (weighted ``hard_weight`` in the denominator)."""
    n = len(z)
    sim = z @ z.T / temperature
    eye = torch.eye(n, dtype=torch.bool)
    pos = (labels[:, None] == labels[None, :]) & ~eye
    logw = torch.where(hard & ~pos, torch.log(torch.tensor(hard_weight)), torch.tensor(0.0))
    denom = torch.logsumexp((sim + logw).masked_fill(eye, float("-inf")), dim=1)
    log_prob = sim - denom[:, None]
    per_row = (log_prob * pos).sum(1) / pos.sum(1).clamp(min=1)
    return -(per_row[pos.any(1)]).mean()


def _batches(samples: Sequence[Sample], origin: Sequence[int], cfg: TrainConfig, rng: np.random.Generator):
    """Rows of one batch: one category; an anchor instance and its look-alikes first, then others of the category."""
    rows_of: dict[str, list[int]] = {}
    for row, i in enumerate(origin):
        rows_of.setdefault(samples[i].instance_id, []).append(row)
    meta = {s.instance_id: s for s in samples}
    by_cat: dict[str, list[str]] = {}
    for iid in sorted(rows_of):
        by_cat.setdefault(meta[iid].category, []).append(iid)
    cats = sorted(c for c, ids in by_cat.items() if len(ids) >= 2)
    if not cats:
        raise ConfigError("training data needs two or more instances of one category")
    while True:
        ids = by_cat[cats[int(rng.integers(len(cats)))]]
        anchor = meta[ids[int(rng.integers(len(ids)))]]
        hard = [i for i in ids if i != anchor.instance_id
                and (meta[i].colour == anchor.colour or meta[i].pattern == anchor.pattern)]
        rest = [i for i in ids if i != anchor.instance_id and i not in hard]
        rng.shuffle(hard)
        rng.shuffle(rest)
        chosen = ([anchor.instance_id] + hard + rest)[: cfg.instances_per_batch]
        rows = [int(r) for iid in chosen for r in rng.choice(rows_of[iid], cfg.views_per_instance)]
        yield rows


def train_head(feats: np.ndarray, origin: Sequence[int], samples: Sequence[Sample], head_cfg: HeadConfig,
               cfg: TrainConfig) -> tuple[nn.Module, list[float]]:
    """Train the projection head; returns (head, loss per step). Deterministic for a seed on one thread."""
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    head = build_head(head_cfg)
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    x_all = torch.from_numpy(feats)
    inst = [samples[i].instance_id for i in origin]
    codes = {iid: k for k, iid in enumerate(sorted(set(inst)))}
    label_all = torch.tensor([codes[i] for i in inst])
    colour = [samples[i].colour for i in origin]
    pattern = [samples[i].pattern for i in origin]
    losses = []
    batches = _batches(samples, origin, cfg, rng)
    for _ in range(cfg.steps):
        rows = next(batches)
        col = np.array([colour[r] for r in rows])
        pat = np.array([pattern[r] for r in rows])
        hard = torch.from_numpy((col[:, None] == col[None, :]) | (pat[:, None] == pat[None, :]))
        z = nn.functional.normalize(head(x_all[rows]), dim=1)
        loss = supcon_loss(z, label_all[rows], hard, cfg.temperature, cfg.hard_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    head.eval()
    return head, losses


# -- checkpoint ----------------------------------------------------------------------------------------------------
def save_head(head: nn.Module, folder: str | Path, config: HeadConfig, training: dict[str, Any]) -> dict[str, Any]:
    """Write ``head.pt`` (+ ``head.pt.sha256``) and ``manifest.json`` into ``folder``; returns the manifest."""
    folder = Path(folder)
    digest = write_weights({"state_dict": {k: v.detach().float().clone() for k, v in head.state_dict().items()}},
                           folder / WEIGHTS_FILE, "instance embedder weights")
    manifest = {"format": FORMAT, "file": WEIGHTS_FILE, "sha256": digest, "config": asdict(config),
                "features": "mobilenet_v2 pooled (frozen) at the crop's own size, "
                            "crops from perception.candidate.object_crop",
                "training": training}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def load_head(folder: str | Path) -> tuple[HeadConfig, nn.Module]:
    """The frozen head a checkpoint folder holds, sha256- and architecture-verified (ConfigError otherwise)."""
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise ConfigError(f"instance embedder {str(folder)!r} has no {MANIFEST_FILE} (train it with "
                          "python -m launch.train_embedder)")
    try:
        manifest = json.loads(path.read_text())
        fmt, file, expected = manifest["format"], str(manifest["file"]), str(manifest["sha256"])
        config = HeadConfig(**manifest["config"])
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"instance embedder manifest {str(path)!r} is malformed ({type(exc).__name__})") from exc
    if fmt != FORMAT:
        raise ConfigError(f"instance embedder {str(folder)!r} has format {fmt!r}; expected {FORMAT!r}")
    weights = folder / file
    payload = read_weights(weights, expected, "instance embedder weights")  # manifest and .sha256 line both
    head = build_head(config)
    try:
        head.load_state_dict(payload["state_dict"], strict=True)
    except Exception as exc:  # weights of another architecture
        raise ConfigError(f"instance embedder weights {str(weights)!r} do not match their config "
                          f"({type(exc).__name__})") from exc
    head.eval()
    for p in head.parameters():
        p.requires_grad_(False)
    return config, head
