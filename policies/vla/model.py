"""The generic VLA's trained part: a FiLM action head over frozen MobileNetV2 features or a small CNN of its own.

Language (frozen all-MiniLM-L6-v2) is never trained. Vision is either frozen ImageNet MobileNetV2 (first
``blocks`` layers; backbone ``mobilenet_v2_imagenet``) or a two-layer strided conv stem trained from scratch with
the head on the raw camera image (backbone ``cnn``); either way the checkpoint holds only what was trained here.
Language conditions every conv block through FiLM (per-channel scale and shift), which lets the instruction's
colour/pattern words select feature channels *before* the spatial softmax turns the map into keypoints — that is
what makes the policy act on the described object among same-category distractors. The head predicts a chunk of
``chunk`` future 7-D actions (normalised per dimension).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from envs.config import Options
from envs.errors import ConfigError


@dataclass(frozen=True)
class VisionSpec:
    """Which frozen features the head was trained on; must match at load time."""

    backbone: str = "mobilenet_v2_imagenet"  # or "cnn": raw pixels into a stem trained with the head
    blocks: int = 14  # features[:14]: 96 channels, stride 16 (unused by "cnn")
    input_size: int = 160  # the camera image is resized to this square before the backbone
    channels: int = 96  # channels the head's input layer receives (3 for "cnn")


BACKBONES = ("mobilenet_v2_imagenet", "cnn")
AUX_SCALE = 0.1  # metres: the auxiliary target offset is predicted in units of 10 cm
TABLE_CENTRE = (0.55, 0.0)  # world xy the memory's positions are predicted around (metres)
MEMORY_DESCRIPTOR = 32  # per remembered object: its heatmap-weighted features, projected to this size
WORD_FEATURES = 32  # word-additive grounding: per-pixel feature size each word's detector reads
CNN_VISION = VisionSpec(backbone="cnn", blocks=0, input_size=96, channels=3)


def pixels_to_input(images: torch.Tensor) -> torch.Tensor:
    """uint8 N×3×H×W pixels → the CNN stem's float input (zero-centred, unit range)."""
    return images.float() / 255.0 - 0.5


@dataclass(frozen=True)
class HeadConfig(Options):
    """Architecture of the FiLM action head (all sizes stored in the checkpoint)."""

    vision: VisionSpec = field(default_factory=VisionSpec)
    text_dim: int = 384
    state_dim: int = 0  # proprioceptive input size (ee_state); 0 = image + language only
    # Which ee_state entries the head sees (empty = all ``state_dim``). Leaving out the absolute x, y stops the
    # head from memorising demo trajectories by position, so where to go has to come from the image.
    state_indices: tuple[int, ...] = ()
    width: int = 128
    film_blocks: int = 2
    keypoints: int = 32
    hidden: int = 256
    chunk: int = 4
    action_dim: int = 7
    dropout: float = 0.1
    # Auxiliary output (training only): the described object's xy offset from the gripper. Supervising it on
    # every pre-grasp frame teaches grounding far faster than the few approach actions per demo do. 0 = none.
    aux_dim: int = 0
    # Object memory: how many objects the head localises on the episode's *first* frame and remembers (0 = none;
    # 2 = the described object and the goal — anchor or receptacle). A language-conditioned heatmap at half the
    # input resolution finds each object's base in the image, a small geometry MLP maps it to table xy, and the
    # action MLP receives those positions relative to the gripper. Objects stand still until grasped, so the
    # first, unoccluded view is where grounding is easiest; later frames have the gripper in front of them.
    memory: int = 0
    # Word-additive grounding (memory heads): the heatmaps are not conditioned on the sentence vector but are a sum
    # of per-word linear detectors over language-free features, one term per instruction word (up to ``words``
    # words). A product of per-word experts ("blue" × "striped" × "mug") can find attribute combinations never seen
    # together in training; a FiLM on the whole sentence memorises the combinations it saw. 0 = sentence FiLM.
    words: int = 0
    # A separate gripper classifier: a small MLP beside the action MLP, on the same inputs (image keypoints,
    # instruction, state and, on memory heads, the remembered positions relative to the hand), whose output is the
    # logit of "closed" for each chunk step, trained with a class-balanced cross-entropy. The action MLP's own
    # gripper output is then unused. A regressed gripper is dominated by the many frames that keep the gripper as
    # it is and learns to copy the last command from the state; the few switch frames decide grasp and release.
    gripper_classifier: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (nested vision spec included)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeadConfig:
        """Inverse of :meth:`to_dict`; unknown keys are a ConfigError (a checkpoint from another format)."""
        d = dict(d)
        vision = VisionSpec(**d.pop("vision", {}))
        if vision.backbone not in BACKBONES:
            raise ConfigError(f"checkpoint vision backbone {vision.backbone!r} is unknown; "
                              f"valid: {', '.join(BACKBONES)}")
        if "state_indices" in d:  # JSON stores the tuple as a list
            d["state_indices"] = tuple(int(i) for i in d["state_indices"])
        known = set(cls.__dataclass_fields__) - {"vision"}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"checkpoint head config has unknown keys {sorted(unknown)}; valid: {sorted(known)}")
        return cls(vision=vision, **d)


class FiLMBlock(nn.Module):
    """3×3 conv → GroupNorm → FiLM(text) → ReLU, with a residual connection."""

    def __init__(self, width: int, text_dim: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.norm = nn.GroupNorm(8, width, affine=False)
        self.film = nn.Linear(text_dim, 2 * width)
        nn.init.zeros_(self.film.weight)  # start as identity modulation: scale 1, shift 0
        nn.init.zeros_(self.film.bias)

    def forward(self, x: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.film(text).chunk(2, dim=1)
        h = self.norm(self.conv(x)) * (1 + gamma[:, :, None, None]) + beta[:, :, None, None]
        return x + F.relu(h)


def spatial_softmax(x: torch.Tensor) -> torch.Tensor:
    """Expected (x, y) image coordinates in [-1, 1] of each channel's softmax over positions: N×C×H×W → N×2C."""
    n, c, h, w = x.shape
    probs = torch.softmax(x.flatten(2), dim=-1).view(n, c, h, w)
    ys = torch.linspace(-1.0, 1.0, h, dtype=x.dtype)
    xs = torch.linspace(-1.0, 1.0, w, dtype=x.dtype)
    ex = (probs.sum(2) * xs).sum(-1)
    ey = (probs.sum(3) * ys).sum(-1)
    return torch.cat([ex, ey], dim=1)


def near_peak(scores: torch.Tensor, window: int) -> torch.Tensor:
    """N×G×G boolean: the cells within ``window`` cells (Chebyshev) of each map's highest score."""
    side = scores.shape[-1]
    peak = scores.flatten(1).argmax(1)
    rows = torch.arange(side)[None, :, None] - (peak // side)[:, None, None]
    cols = torch.arange(side)[None, None, :] - (peak % side)[:, None, None]
    return (rows.abs() <= window) & (cols.abs() <= window)


def expected_position(probs: torch.Tensor) -> torch.Tensor:
    """(…×G×G probability maps) → …×2 expected image position (x right, y down) in [-1, 1], edge-aligned: cell i
    has centre (2i + 1) / G - 1, so ±1 are the image edges (what ``project_to_image`` labels use)."""
    g = probs.shape[-1]
    centres = (torch.arange(g, dtype=probs.dtype) * 2 + 1) / g - 1
    return torch.stack([(probs.sum(-2) * centres).sum(-1), (probs.sum(-1) * centres).sum(-1)], dim=-1)


class FiLMActionHead(nn.Module):
    """(spatial features, instruction embedding, state) → normalised action chunk (N × chunk × action_dim)."""

    def __init__(self, cfg: HeadConfig) -> None:
        super().__init__()
        self.cfg = cfg
        if cfg.vision.backbone == "cnn":
            # Stride 4 overall: at 96² input the FiLM blocks see a 24² map, fine enough for ~12 px objects.
            self.inp = nn.Sequential(
                nn.Conv2d(cfg.vision.channels, 32, 5, stride=2, padding=2), nn.GroupNorm(8, 32), nn.ReLU(),
                nn.Conv2d(32, cfg.width, 3, stride=2, padding=1), nn.GroupNorm(8, cfg.width), nn.ReLU(),
            )
        else:
            self.inp = nn.Sequential(nn.Conv2d(cfg.vision.channels, cfg.width, 1), nn.GroupNorm(8, cfg.width),
                                     nn.ReLU())
        self.drop = nn.Dropout2d(cfg.dropout)
        self.blocks = nn.ModuleList(FiLMBlock(cfg.width, cfg.text_dim) for _ in range(cfg.film_blocks))
        self.keypoint_conv = nn.Conv2d(cfg.width, cfg.keypoints, 1)
        self.text_proj = nn.Linear(cfg.text_dim, 64)
        self.state_proj = nn.Linear(cfg.state_dim, 32) if cfg.state_dim > 0 else None
        mlp_in = 2 * cfg.keypoints + 64 + (32 if cfg.state_dim > 0 else 0)
        if cfg.words and not cfg.memory:
            raise ConfigError("word-additive grounding (words > 0) needs an object-memory head (memory > 0)")
        if cfg.memory:
            if cfg.vision.backbone != "cnn" or cfg.state_dim < 2 or cfg.state_indices[:2] not in ((), (0, 1)):
                raise ConfigError("an object-memory head needs the cnn backbone and ee_state x, y as its first inputs")
            if cfg.words:
                # Language-free grounding features: two more convs on the stem, upsampled to the stem's first
                # (stride-2) layer and fused with it; each word projects to one linear detector per object.
                self.ground = nn.Sequential(
                    nn.Conv2d(cfg.width, cfg.width, 3, padding=1), nn.GroupNorm(8, cfg.width), nn.ReLU(),
                    nn.Conv2d(cfg.width, cfg.width, 3, padding=1), nn.GroupNorm(8, cfg.width), nn.ReLU())
                self.heat = nn.Sequential(nn.Conv2d(cfg.width + 32, WORD_FEATURES, 1), nn.ReLU())
                self.word_proj = nn.Linear(cfg.text_dim, cfg.memory * WORD_FEATURES)
                self.heat_bias = nn.Conv2d(WORD_FEATURES, cfg.memory, 1)
            else:
                # Heatmap decoder: the FiLM map upsampled to the stem's first (stride-2) layer, plus that layer.
                self.heat = nn.Sequential(nn.Conv2d(cfg.width + 32, 16, 1), nn.ReLU(),
                                          nn.Conv2d(16, cfg.memory, 3, padding=1))
            self.geometry = nn.Sequential(nn.Linear(2 + cfg.width, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                                          nn.Linear(128, 2))
            self.descriptor = nn.Linear(cfg.width, MEMORY_DESCRIPTOR)
            # ee_state x, y normalisation (set by training): the memory is compared with the gripper in metres.
            self.register_buffer("ee_xy_mean", torch.zeros(2))
            self.register_buffer("ee_xy_std", torch.ones(2))
            mlp_in += cfg.memory * (4 + MEMORY_DESCRIPTOR)
        self.mlp = nn.Sequential(
            nn.Linear(mlp_in, cfg.hidden), nn.ReLU(),
            nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(),
            nn.Linear(cfg.hidden, cfg.chunk * cfg.action_dim),
        )
        self.aux = nn.Linear(cfg.hidden, cfg.aux_dim) if cfg.aux_dim > 0 else None
        self.gripper = nn.Sequential(nn.Linear(mlp_in, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                                     nn.Linear(128, cfg.chunk)) if cfg.gripper_classifier else None

    def forward(self, feats: torch.Tensor, text: torch.Tensor, state: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, words: torch.Tensor | None = None) -> torch.Tensor:
        return self.forward_with_aux(feats, text, state, memory, words=words)[0]

    def trunk(self, feats: torch.Tensor, text: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor,
                                                                       torch.Tensor]:
        """(stride-2 stem features or None, stem output, language-modulated feature map) of a batch of inputs."""
        x = pixels_to_input(feats) if feats.dtype == torch.uint8 else feats.float()
        fine = None
        if self.cfg.memory:  # keep the stem's first layer for the heatmap decoder
            fine = self.inp[:3](x)
            x = self.inp[3:](fine)
        else:
            x = self.inp(x)
        stem = x
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, text)
        return fine, stem, x

    def localise(self, fine: torch.Tensor, stem: torch.Tensor, coarse: torch.Tensor,
                 words: torch.Tensor | None = None, prior: torch.Tensor | None = None,
                 prior_window: int = 0, refine: Callable[[torch.Tensor], torch.Tensor] | None = None
                 ) -> dict[str, torch.Tensor]:
        """Each remembered object's heatmap logits (N×M×G×G), image position ``uv`` (N×M×2, [-1, 1] edge-aligned,
        y down), table position ``xy`` (N×M×2, metres) and heatmap-weighted feature descriptor (N×M×width).

        Word-additive heads need ``words`` (N×W×384 word embeddings, zero rows = padding). ``prior`` (N×h×w, any
        grid over the same image, in logit units) is added to the described object's heatmap — the attribute
        detectors' vote on *which* object (``policies/vla/attributes.py``); the goal's heatmap is left alone. With
        ``prior_window`` > 0 the vote only picks the object: the heatmap keeps its own logits within that many cells
        of the voted peak and is ruled out elsewhere, so the vote cannot pull the position off the object's base.
        ``refine`` (object logits N×1×G×G → image position N×2) replaces the soft-argmax position of the described
        object (the base localiser, ``policies/vla/localiser.py``); the descriptors keep the heatmap's weights."""
        n, m = coarse.shape[0], self.cfg.memory
        if self.cfg.words:
            if words is None:
                raise ValueError("this head grounds words one by one; pass the instruction's word embeddings")
            g_in = F.interpolate(self.ground(stem), size=fine.shape[-2:], mode="bilinear", align_corners=False)
            feat = self.heat(torch.cat([g_in, fine], dim=1))  # N×D×G×G
            present = (words.abs().sum(-1) > 0).float()  # N×W
            detectors = self.word_proj(words).view(n, -1, m, WORD_FEATURES) * present[:, :, None, None]
            logits = torch.einsum("nwkd,ndyx->nkyx", detectors, feat) / WORD_FEATURES ** 0.5 + self.heat_bias(feat)
        else:
            up = F.interpolate(coarse, size=fine.shape[-2:], mode="bilinear", align_corners=False)
            logits = self.heat(torch.cat([up, fine], dim=1))
        if prior is not None:
            vote = F.interpolate(prior[:, None].float(), size=logits.shape[-2:], mode="bilinear", align_corners=False)
            obj = logits[:, :1] + vote
            if prior_window > 0:
                near = near_peak(obj[:, 0], prior_window)
                obj = torch.where(near[:, None], logits[:, :1], logits[:, :1] - 1e4)
            logits = torch.cat([obj, logits[:, 1:]], dim=1)
        g = logits.shape[-1]
        probs = torch.softmax(logits.flatten(2), dim=-1).view(n, m, g, g)
        uv = expected_position(probs)
        if refine is not None:
            uv = torch.cat([refine(logits[:, :1]).to(uv.dtype)[:, None], uv[:, 1:]], dim=1)
        factor = g // coarse.shape[-1]
        pooled = F.avg_pool2d(probs, factor) * factor * factor  # the same distribution on the coarse grid
        desc = torch.einsum("nmhw,nchw->nmc", pooled, coarse)
        scene = coarse.mean((2, 3))[:, None, :].expand(n, m, coarse.shape[1])
        xy = self.geometry(torch.cat([uv, scene], dim=-1)) * AUX_SCALE + torch.tensor(TABLE_CENTRE)
        return {"logits": logits, "uv": uv, "xy": xy, "desc": desc}

    def remember(self, feats: torch.Tensor, text: torch.Tensor, words: torch.Tensor | None = None,
                 prior: torch.Tensor | None = None, prior_window: int = 0,
                 refine: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        """The object memory of a first frame: N×M×(2 + width) = table xy (metres) ‖ descriptor."""
        loc = self.localise(*self.trunk(feats, text), words=words, prior=prior, prior_window=prior_window,
                            refine=refine)
        return torch.cat([loc["xy"], loc["desc"]], dim=-1)

    def forward_with_aux(self, feats: torch.Tensor, text: torch.Tensor, state: torch.Tensor | None = None,
                         memory: torch.Tensor | None = None, trunk: tuple[torch.Tensor, ...] | None = None,
                         words: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(action chunk, auxiliary prediction or None) — the auxiliary output is only used by training.

        Object-memory heads take ``memory`` from :meth:`remember` on the episode's first frame (computed from
        ``feats`` when omitted, i.e. when this is the first frame); ``trunk`` reuses an already computed trunk.
        With a gripper classifier the chunk's gripper channel holds its logits of "closed" (not normalised units).
        """
        x = (trunk if trunk is not None else self.trunk(feats, text))[-1]
        parts = [spatial_softmax(self.keypoint_conv(x)), F.relu(self.text_proj(text))]
        if self.state_proj is not None:
            if state is None:
                raise ValueError("this head was trained with a state input; pass state")
            parts.append(F.relu(self.state_proj(state.float())))
        if self.cfg.memory:
            if memory is None:
                memory = self.remember(feats, text, words)
            ee_xy = state[:, :2].float() * self.ee_xy_std + self.ee_xy_mean
            xy, desc = memory[..., :2], memory[..., 2:]
            centre = torch.tensor(TABLE_CENTRE)
            rel = (xy - ee_xy[:, None, :]) / AUX_SCALE
            parts += [rel.flatten(1), ((xy - centre) / AUX_SCALE).flatten(1), F.relu(self.descriptor(desc)).flatten(1)]
        inputs = torch.cat(parts, dim=1)
        hidden = self.mlp[:-1](inputs)
        out = self.mlp[-1](hidden).view(-1, self.cfg.chunk, self.cfg.action_dim)
        if self.gripper is not None:
            out = torch.cat([out[..., :-1], self.gripper(inputs)[..., None]], dim=-1)
        return out, (self.aux(hidden) if self.aux is not None else None)
