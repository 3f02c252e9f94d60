"""Attribute grounding for the generic VLA: per-pixel detectors of the words instructions use, composed at run time.

The head's object memory finds "the blue striped mug" with a heatmap conditioned on the whole sentence, which
memorises the colour × pattern combinations it was trained on and picks a look-alike sharing one attribute on a
held-out combination. This module learns one detector per *word* instead — every colour, pattern and category
of the object library — as a small fully convolutional network predicting, for each pixel, whether it belongs to an
object with that attribute. An instruction is grounded by adding the log-probabilities of its words
("blue" + "striped" + "mug"): an object scores high only when it has all of them, so combinations never seen
together compose by construction. Labels come from the simulator's segmentation of generic training scenes
(training only); the detectors are trained on train-split and extra designs, never on a test design.

At inference the map re-weights the memory's object heatmap on the episode's first frame (``weight`` × the
log-probability, in logit units): the head still decides *where* the object's base is; the words decide *which*.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from envs.config import Options
from envs.errors import ConfigError
from envs.manipulation.objects import CATEGORIES, COLOURS, PATTERNS
from policies.vla.checkpoint_files import attach_part, load_part, save_part
from policies.vla.conversions import resize_image

VOCAB: tuple[str, ...] = (*COLOURS, *PATTERNS, *CATEGORIES)
STRIDE = 4  # the detectors' output grid is the input size / 4
WEIGHTS_FILE = "attributes.pt"


@dataclass(frozen=True)
class AttributeConfig(Options):
    """Architecture and how strongly the detectors re-weight the memory heatmap (stored with the weights)."""

    vocab: tuple[str, ...] = VOCAB
    input_size: int = 128  # camera image resized to this square (patterns stay legible; the head sees 96²)
    width: int = 48
    dilations: tuple[int, ...] = (1, 2, 4, 1)  # residual 3×3 blocks at stride 4: a receptive field of a whole object
    weight: float = 4.0  # logit units per nat of attribute log-probability added to the object heatmap
    # Inference only: a pixel whose words are each at least this likely (nats; 0.7 ≈ p 0.5) gets no penalty, so
    # the vote is flat over the described object and the head keeps placing its base; and the map is max-pooled
    # over ``pool`` × ``pool`` cells so the base, at the bottom edge of the object's pixels, is covered.
    tolerance: float = 0.0
    pool: int = 3
    # Inference only: > 0 → the vote only chooses the object; the head's heatmap is kept within this many cells
    # of the voted peak (its 48² grid) and ruled out elsewhere, so the position comes from the head alone.
    window: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttributeConfig:
        """Inverse of :meth:`to_dict`; unknown keys are a ConfigError."""
        return config_from_dict(cls, d, "attribute config")


def config_from_dict(cls: Any, d: dict[str, Any], what: str) -> Any:
    """A flat config dataclass from its JSON form: lists become tuples where the field's default is a tuple;
    unknown keys are a ConfigError naming ``what`` and the valid keys."""
    fields = cls.__dataclass_fields__
    unknown = set(d) - set(fields)
    if unknown:
        raise ConfigError(f"{what} has unknown keys {sorted(unknown)}; valid: {sorted(fields)}")
    return cls(**{k: tuple(v) if isinstance(fields[k].default, tuple) else v for k, v in d.items()})


class AttributeNet(nn.Module):
    """uint8 N×3×S×S image → N×len(vocab)×(S/4)×(S/4) per-word logits."""

    def __init__(self, cfg: AttributeConfig) -> None:
        super().__init__()
        w = cfg.width
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 5, 2, 2), nn.GroupNorm(8, 32), nn.ReLU(),
                                  nn.Conv2d(32, w, 3, 2, 1), nn.GroupNorm(8, w), nn.ReLU())
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(w, w, 3, padding=d, dilation=d), nn.GroupNorm(8, w), nn.ReLU())
            for d in cfg.dilations)
        self.out = nn.Conv2d(w, len(cfg.vocab), 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        h = self.stem(images.float() / 255.0 - 0.5)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


def instruction_words(instruction: str, vocab: Sequence[str]) -> list[int]:
    """Vocabulary indices of the instruction's attribute words, in order (other words carry no attribute)."""
    tokens = instruction.lower().replace(",", " ").replace(".", " ").split()
    return [vocab.index(t) for t in tokens if t in vocab]


class AttributeGrounder:
    """Per-word detectors (frozen when loaded from a checkpoint); :meth:`log_prob_map` grounds an instruction."""

    def __init__(self, net: AttributeNet, cfg: AttributeConfig) -> None:
        self.net = net
        self.cfg = cfg

    @torch.inference_mode()
    def word_log_probs(self, image: np.ndarray, instruction: str) -> torch.Tensor | None:
        """k×(S/4)×(S/4) log P(word | pixel) for the instruction's k attribute words; None when it names none."""
        idx = instruction_words(instruction, self.cfg.vocab)
        if not idx:
            return None
        x = torch.from_numpy(resize_image(np.asarray(image, np.uint8), self.cfg.input_size)).permute(2, 0, 1)
        return F.logsigmoid(self.net(x[None]))[0, idx]

    @torch.inference_mode()
    def log_prob_map(self, image: np.ndarray, instruction: str) -> torch.Tensor | None:
        """(S/4)×(S/4) sum over the instruction's attribute words of log P(word | pixel), raised to 0 where every
        word is likely (``tolerance``) and max-pooled over ``pool`` cells, so an object's base (where the head's
        heatmap peaks) gets the score of the body above it; None when the instruction names no attribute the
        detectors know."""
        logp = self.word_log_probs(image, instruction)
        if logp is None:
            return None
        vote = (logp + self.cfg.tolerance).clamp(max=0.0).sum(0)
        return F.max_pool2d(vote[None, None], self.cfg.pool, 1, self.cfg.pool // 2)[0, 0]


# -- training ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AttributeTrainConfig(Options):
    """Optimisation settings (seeded; the same data, seed and threads give the same weights)."""

    epochs: int = 10
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 1e-4
    shift_cells: int = 2  # random translation augmentation, in output cells (4 px each)
    seed: int = 0


def label_maps(segmentation: np.ndarray, objects: Sequence[tuple[int, Sequence[str]]], vocab: Sequence[str],
               grid: int) -> np.ndarray:
    """len(vocab)×grid×grid uint8: a cell is 1 for a word when most of it shows an object having that attribute.

    ``objects``: (segmentation id, its attribute words) per object; every other pixel is background."""
    import cv2

    out = np.zeros((len(vocab), grid, grid), np.uint8)
    for body, words in objects:
        cells = cv2.resize((segmentation == body).astype(np.float32), (grid, grid), interpolation=cv2.INTER_AREA) >= 0.5
        for word in words:
            if word in vocab:
                out[vocab.index(word)] |= cells
    return out


def grounding_accuracy(grounder: AttributeGrounder, images: np.ndarray, instructions: Sequence[str],
                       object_cells: Sequence[dict[int, np.ndarray]], targets: Sequence[int]) -> tuple[int, int]:
    """(hits, scenes): how often the object with the highest mean word log-probability over its cells is the
    described one (objects given as boolean cell masks on the detectors' grid; scenes without cells skipped)."""
    hits = n = 0
    for image, text, cells, target in zip(images, instructions, object_cells, targets, strict=True):
        words = grounder.word_log_probs(image, text) if cells else None
        if words is None:
            continue
        logp = words.sum(0).numpy()
        scores = {body: float(logp[m].mean()) for body, m in cells.items() if m.any()}
        if scores:
            n += 1
            hits += int(max(scores, key=scores.get) == int(target))
    return hits, n


def train_attributes(images: np.ndarray, labels: np.ndarray, cfg: AttributeConfig, tcfg: AttributeTrainConfig,
                     on_epoch: Callable[[int, float, AttributeNet], None] | None = None) -> AttributeNet:
    """Per-pixel multi-label BCE (positives up-weighted by the square root of their rarity), AdamW + one-cycle.

    ``images``: N×S×S×3 uint8 at ``cfg.input_size``; ``labels``: N×len(vocab)×(S/4)×(S/4) in {0, 1}."""
    if images.shape[1:3] != (cfg.input_size, cfg.input_size):
        raise ConfigError(f"training images are {images.shape[1]}², the config expects {cfg.input_size}²")
    torch.manual_seed(tcfg.seed)
    rng = np.random.default_rng(tcfg.seed)
    net = AttributeNet(cfg)
    x_all = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))
    y_all = torch.from_numpy(labels.astype(np.float32))
    rate = y_all.mean((0, 2, 3)).clamp_min(1e-4)
    pos_weight = ((1 - rate) / rate).clamp(max=30.0).sqrt()[None, :, None, None]

    def batch_loss(ix: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
        x = torch.roll(x_all[ix], (STRIDE * dy, STRIDE * dx), (2, 3))
        y = torch.roll(y_all[ix], (dy, dx), (2, 3))
        return F.binary_cross_entropy_with_logits(net(x), y, pos_weight=pos_weight)

    return fit_shifted(net, len(images), tcfg, rng, batch_loss, on_epoch)


def fit_shifted(net: nn.Module, items: int, tcfg: Any, rng: np.random.Generator,
                batch_loss: Callable[[torch.Tensor, int, int], torch.Tensor],
                on_epoch: Callable[[int, float, Any], None] | None = None) -> nn.Module:
    """The seeded loop the first-frame trainers share (detectors, base localiser): AdamW + one-cycle over shuffled
    batches, each with one random (dy, dx) translation of up to ``tcfg.shift_cells`` output cells that
    ``batch_loss(indices, dy, dx)`` applies to its inputs and labels. ``tcfg`` has epochs, batch_size, lr,
    weight_decay and shift_cells; ``on_epoch(epoch, mean loss, net)`` after every epoch, in eval mode."""
    batches = max(1, items // tcfg.batch_size)
    opt = torch.optim.AdamW(net.parameters(), tcfg.lr, weight_decay=tcfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, tcfg.lr, total_steps=tcfg.epochs * batches)
    for epoch in range(tcfg.epochs):
        perm, total = rng.permutation(items), 0.0
        net.train()
        for b in range(batches):
            ix = torch.from_numpy(perm[b * tcfg.batch_size:(b + 1) * tcfg.batch_size])
            dy, dx = (int(v) for v in rng.integers(-tcfg.shift_cells, tcfg.shift_cells + 1, 2))
            loss = batch_loss(ix, dy, dx)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
        net.eval()
        if on_epoch is not None:
            on_epoch(epoch, total / batches, net)
    return net


# -- files -------------------------------------------------------------------------------------------------------
def save_attributes(net: AttributeNet, cfg: AttributeConfig, folder: str | Path,
                    training: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``attributes.pt`` into ``folder``; returns the manifest entry (file, sha256, config, training)."""
    return save_part(net.state_dict(), folder, WEIGHTS_FILE, cfg.to_dict(), training)


def load_attributes(folder: str | Path, entry: dict[str, Any]) -> AttributeGrounder:
    """The grounder a checkpoint manifest's ``attributes`` entry describes, sha256-verified and frozen."""
    def build(config: dict[str, Any]) -> tuple[AttributeConfig, AttributeNet]:
        cfg = AttributeConfig.from_dict(config)
        return cfg, AttributeNet(cfg)

    cfg, net = load_part(folder, entry, "attribute detectors", build)
    return AttributeGrounder(net, cfg)


def attach_attributes(checkpoint: str | Path, source: str | Path) -> dict[str, Any]:
    """Copy trained detectors into a head checkpoint folder and record them in its manifest. ``source`` is a
    folder written by ``launch.train_attributes`` or another head checkpoint that has them (a fine-tuned head keeps
    its parent's detectors). Returns the new manifest entry."""
    return attach_part(checkpoint, source, "attributes", "attribute detectors", load_attributes)
