"""Base localiser for the generic VLA: where exactly, on the first frame, is the base of the object the words chose?

The object memory remembers the described object's table position from the first frame, and the action head
follows it to the centimetre: traced failures closed the gripper exactly where the memory pointed, up to 12 cm off
the object. On held-out designs the memory's heatmap (sentence FiLM + the attribute detectors' vote) is often
diffuse or split between look-alikes, and its soft-argmax lands between peaks or on the body instead of the base.

This module learns a small fully convolutional refiner that sees the image (128²), the attribute vote (which
object: compositional by construction) and the head's own object heatmap (where it thinks the base is) and
predicts a sharp heatmap of the base on a 64² grid; the remembered position is a soft-argmax within ``window``
cells of its peak, mapped to the table by the head's own geometry MLP. Its output adds to the head's heatmap
(a residual), so it starts from the head's answer. Trained on first frames of train-split and extra designs
(never a test design), labelled with the object's projected base (privileged, training only). The head and the
detectors are untouched; the localiser is attached to the checkpoint like the detectors.
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
from policies.vla.attributes import STRIDE, config_from_dict, fit_shifted
from policies.vla.checkpoint_files import attach_part, load_part, save_part
from policies.vla.conversions import resize_image
from policies.vla.model import expected_position, near_peak
from policies.vla.vision_input import image_features

WEIGHTS_FILE = "localiser.pt"
MAP_FLOOR = -40.0  # log-probabilities below this carry no information; clamping keeps the inputs bounded


@dataclass(frozen=True)
class LocaliserConfig(Options):
    """Architecture and read-out (stored with the weights)."""

    input_size: int = 128  # the image, as the attribute detectors see it
    grid: int = 64  # output heatmap side (2 px per cell at 128²)
    width: int = 32
    dilations: tuple[int, ...] = (1, 2, 4, 8, 1)  # residual 3×3 blocks: a receptive field of about two objects
    window: int = 2  # inference: soft-argmax within this many cells of the peak (the peak picks one object)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LocaliserConfig:
        """Inverse of :meth:`to_dict`; unknown keys are a ConfigError."""
        return config_from_dict(cls, d, "localiser config")


def input_maps(vote: torch.Tensor | None, heat: torch.Tensor, grid: int) -> torch.Tensor:
    """N×2×grid×grid: the attribute vote (N×h×w logit units, None = no attribute words: zeros) and the head's
    object heatmap as log-probabilities (from N×1×G×G logits), both resized to the localiser's grid."""
    logp = torch.log_softmax(heat.float().flatten(1), dim=1).view_as(heat)
    logp = F.interpolate(logp, size=(grid, grid), mode="bilinear", align_corners=False)
    if vote is None:
        v = torch.zeros_like(logp)
    else:
        v = F.interpolate(vote.float()[:, None], size=(grid, grid), mode="bilinear", align_corners=False)
    return torch.cat([v, logp], dim=1).clamp(min=MAP_FLOOR)


class LocaliserNet(nn.Module):
    """(uint8 N×3×S×S image, N×2×G×G maps) → N×G×G base logits (the head's log-probabilities plus a residual)."""

    def __init__(self, cfg: LocaliserConfig) -> None:
        super().__init__()
        if cfg.input_size % cfg.grid:
            raise ConfigError(f"localiser input size {cfg.input_size} is not a multiple of its grid {cfg.grid}")
        w, stride = cfg.width, cfg.input_size // cfg.grid
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 2 * stride + 1, stride, stride), nn.GroupNorm(8, 24), nn.ReLU())
        self.mix = nn.Sequential(nn.Conv2d(24 + 2, w, 3, padding=1), nn.GroupNorm(8, w), nn.ReLU())
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(w, w, 3, padding=d, dilation=d), nn.GroupNorm(8, w), nn.ReLU())
            for d in cfg.dilations)
        self.out = nn.Conv2d(w, 1, 1)

    def forward(self, images: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
        h = self.stem(images.float() / 255.0 - 0.5)
        h = self.mix(torch.cat([h, maps / 10.0], dim=1))
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)[:, 0] + maps[:, 1]


def peak_soft_argmax(logits: torch.Tensor, window: int) -> torch.Tensor:
    """N×G×G logits → N×2 image positions ([-1, 1] edge-aligned, x right, y down): the softmax-weighted mean
    within ``window`` cells of each map's peak (0: the whole map)."""
    n, g = logits.shape[0], logits.shape[-1]
    flat = logits.reshape(n, -1)
    if window > 0:
        flat = torch.where(near_peak(logits, window).reshape(n, -1), flat, flat - 1e4)
    return expected_position(torch.softmax(flat, dim=1).view(n, g, g))


class BaseLocaliser:
    """The trained refiner (frozen when loaded from a checkpoint)."""

    def __init__(self, net: LocaliserNet, cfg: LocaliserConfig) -> None:
        self.net = net
        self.cfg = cfg

    def image_input(self, image: np.ndarray) -> torch.Tensor:
        """1×3×S×S uint8 of one camera image."""
        return torch.from_numpy(resize_image(np.asarray(image, np.uint8), self.cfg.input_size)).permute(2, 0, 1)[None]

    @torch.inference_mode()
    def refiner(self, image: np.ndarray, vote: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
        """The ``refine`` callable of :meth:`FiLMActionHead.localise` for one first frame and its vote (1×h×w)."""
        x = self.image_input(image)

        def refine(heat: torch.Tensor) -> torch.Tensor:
            logits = self.net(x, input_maps(vote, heat, self.cfg.grid))
            return peak_soft_argmax(logits, self.cfg.window)

        return refine


# -- training ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LocaliserTrainConfig(Options):
    """Optimisation settings (seeded; the same data, seed and threads give the same weights)."""

    epochs: int = 8
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 1e-4
    shift_cells: int = 3  # random translation augmentation, in output cells
    sigma: float = 1.0  # label: a Gaussian of this many cells around the projected base
    seed: int = 0


def localiser_inputs(bundle: Any, images: np.ndarray, head_images: np.ndarray, instructions: Sequence[str],
                     text_encoder: Any, grid: int = LocaliserConfig.grid, batch: int = 64) -> dict[str, np.ndarray]:
    """The localiser's map inputs for first frames, computed as :class:`~policies.vla.generic.GenericVLA` does at
    inference: ``maps`` (N×2×G×G float16) and the head's own soft-argmax image position ``head_uv`` (N×2).
    ``images`` at the detectors' input size, ``head_images`` at the head's, ``bundle`` with attribute detectors;
    ``grid``: the localiser's output grid."""
    if bundle.grounder is None or not bundle.config.memory:
        raise ConfigError("the base localiser needs an object-memory head with attribute detectors")
    maps, head_uv = [], []
    texts = {t: torch.as_tensor(e) for t, e in zip(sorted(set(instructions)),
                                                    text_encoder.encode(sorted(set(instructions))), strict=True)}
    weight = bundle.grounder.cfg.weight
    side = bundle.grounder.cfg.input_size // STRIDE
    zero = torch.zeros(side, side)  # an instruction naming no attribute word gets no vote, as at inference
    with torch.inference_mode():
        for s in range(0, len(images), batch):
            idx = range(s, min(s + batch, len(images)))
            votes = [bundle.grounder.log_prob_map(images[i], instructions[i]) for i in idx]
            vote = torch.stack([weight * v if v is not None else zero for v in votes])
            feats = image_features(head_images[s:s + len(idx)], bundle.config.vision)
            text = torch.stack([texts[instructions[i]] for i in idx])
            loc = bundle.head.localise(*bundle.head.trunk(feats, text), prior=vote)
            maps.append(input_maps(vote, loc["logits"][:, :1], grid).half().numpy())
            head_uv.append(loc["uv"][:, 0].numpy())
    return {"maps": np.concatenate(maps), "head_uv": np.concatenate(head_uv)}


def base_targets(uv: torch.Tensor, grid: int, sigma: float) -> torch.Tensor:
    """N×G×G probability maps: a Gaussian of ``sigma`` cells around each image position (N×2, [-1, 1])."""
    centres = torch.arange(grid, dtype=torch.float32)
    cx = (uv[:, 0] + 1) / 2 * grid - 0.5
    cy = (uv[:, 1] + 1) / 2 * grid - 0.5
    d2 = (centres[None, None, :] - cx[:, None, None]) ** 2 + (centres[None, :, None] - cy[:, None, None]) ** 2
    t = torch.exp(-d2 / (2 * sigma ** 2))
    return t / t.sum((1, 2), keepdim=True).clamp_min(1e-12)


def train_localiser(images: np.ndarray, maps: np.ndarray, uv: np.ndarray, cfg: LocaliserConfig,
                    tcfg: LocaliserTrainConfig,
                    on_epoch: Callable[[int, float, LocaliserNet], None] | None = None) -> LocaliserNet:
    """Cross-entropy to a Gaussian around the projected base, AdamW + one-cycle, shift augmentation.

    ``images``: N×S×S×3 uint8 at ``cfg.input_size``; ``maps``: N×2×G×G from :func:`localiser_inputs`; ``uv``:
    N×2 projected bases."""
    if images.shape[1:3] != (cfg.input_size, cfg.input_size):
        raise ConfigError(f"training images are {images.shape[1]}², the config expects {cfg.input_size}²")
    torch.manual_seed(tcfg.seed)
    rng = np.random.default_rng(tcfg.seed)
    net = LocaliserNet(cfg)
    stride = cfg.input_size // cfg.grid
    x_all = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))
    m_all = torch.from_numpy(maps.astype(np.float32))
    uv_all = torch.from_numpy(uv.astype(np.float32))

    def batch_loss(ix: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
        x = torch.roll(x_all[ix], (stride * dy, stride * dx), (2, 3))
        m = torch.roll(m_all[ix], (dy, dx), (2, 3))
        target = base_targets(uv_all[ix] + torch.tensor([dx, dy]) * 2.0 / cfg.grid, cfg.grid, tcfg.sigma)
        logp = torch.log_softmax(net(x, m).flatten(1), dim=1)
        return -(target.flatten(1) * logp).sum(1).mean()

    return fit_shifted(net, len(images), tcfg, rng, batch_loss, on_epoch)


@torch.inference_mode()
def predict_uv(net: LocaliserNet, cfg: LocaliserConfig, images: np.ndarray, maps: np.ndarray,
               batch: int = 128) -> np.ndarray:
    """N×2 refined image positions of the base for prepared inputs (evaluation)."""
    out = []
    for s in range(0, len(images), batch):
        x = torch.from_numpy(np.ascontiguousarray(images[s:s + batch].transpose(0, 3, 1, 2)))
        logits = net(x, torch.from_numpy(maps[s:s + batch].astype(np.float32)))
        out.append(peak_soft_argmax(logits, cfg.window).numpy())
    return np.concatenate(out)


# -- files -------------------------------------------------------------------------------------------------------
def save_localiser(net: LocaliserNet, cfg: LocaliserConfig, folder: str | Path,
                   training: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``localiser.pt`` into ``folder``; returns the manifest entry (file, sha256, config, training)."""
    return save_part(net.state_dict(), folder, WEIGHTS_FILE, cfg.to_dict(), training)


def load_localiser(folder: str | Path, entry: dict[str, Any]) -> BaseLocaliser:
    """The localiser a checkpoint manifest's ``localiser`` entry describes, sha256-verified and frozen."""
    def build(config: dict[str, Any]) -> tuple[LocaliserConfig, LocaliserNet]:
        cfg = LocaliserConfig.from_dict(config)
        return cfg, LocaliserNet(cfg)

    cfg, net = load_part(folder, entry, "base localiser", build)
    return BaseLocaliser(net, cfg)


def attach_localiser(checkpoint: str | Path, source: str | Path) -> dict[str, Any]:
    """Copy a trained localiser into a head checkpoint folder and record it in its manifest (``source``: the
    folder ``launch.train_localiser`` wrote, or a checkpoint that has one)."""
    return attach_part(checkpoint, source, "localiser", "base localiser", load_localiser)
