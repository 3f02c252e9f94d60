"""Behaviour cloning of the FiLM head on cached frozen features, with early stopping on held-out episodes.

The dataset is arrays, not an env: ``features`` (N×C×h×w, float16 to halve memory), ``text_index`` (N) into a
table of instruction embeddings, ``states`` (N×S), ``actions`` (N×7, the expert's clean labels) and ``episode``
(N) ids. Chunk targets are built from the following steps of the same episode (padded with the last action, and
masked). Training is seeded and single-threaded, so the same inputs give the same weights.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from envs.config import Options
from envs.errors import ConfigError
from envs.manipulation.scene import project_to_image
from policies.vla.checkpoint import HeadBundle
from policies.vla.checkpoint_files import freeze
from policies.vla.model import AUX_SCALE, FiLMActionHead, HeadConfig, pixels_to_input

MEMORY_SOURCES = ("estimate", "true")


@dataclass(frozen=True)
class TrainConfig(Options):
    """Optimisation settings; ``max_minutes`` is a safety cap (hitting it makes a run timing-dependent)."""

    head: HeadConfig = field(default_factory=HeadConfig)
    epochs: int = 40
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-4
    val_fraction: float = 0.1
    patience: int = 6  # epochs without validation improvement before stopping
    max_minutes: float = 10.0
    seed: int = 0
    gripper_weight: float = 2.0  # the gripper decides success; weight its error more
    aux_weight: float = 1.0  # weight of the auxiliary target-offset loss (heads with aux_dim > 0)
    xy_weight: float = 1.0  # where to go (dx, dy) is decided by few approach frames per demo; >1 stresses them
    # Random translation of the cached feature map during training, in feature cells (bilinear, border padding).
    # Moving the whole view keeps the gripper-to-object offset (what the action depends on), so the head cannot
    # key on absolute map positions of a memorised demo. 0 = off.
    shift_cells: float = 0.0
    # Object-memory heads: weight of the heatmap cross-entropy (the geometry's xy loss uses ``aux_weight``), the
    # heatmap label's Gaussian width in cells, and the noise (metres) added to the remembered positions the action
    # MLP sees, so it does not learn to trust them more than a held-out scene deserves.
    heatmap_weight: float = 0.5
    heatmap_sigma: float = 1.0
    memory_noise: float = 0.005
    frames_per_episode: int = 4  # memory heads: batches hold this many frames per episode (one first frame each)
    # What the action MLP sees as the remembered positions in training. "estimate": the head's own detached
    # first-frame estimate (centimetres off even on training scenes, so the MLP learns to discount it); "true": the
    # true start positions plus ``memory_noise``, so the action depends on where the objects are and the memory's
    # precision becomes the localiser's job (where a frame has no true position the estimate is used).
    memory_source: str = "estimate"
    # Multiplies the gripper loss on frames whose chunk holds a gripper switch (a few frames per episode decide
    # grasp and release; unweighted they are drowned by the many frames that keep the gripper as it is).
    switch_weight: float = 1.0
    # Label the last N frames of each demonstration that ends on a release as open too. The env ends a place
    # episode (success) on the step the gripper opens, so a demonstration holds one open frame after the carry, at a
    # state identical to the closed frame before it (the hand waits at the release height): a release that no input
    # can tell apart. N frames make it "open once the hand rests low over the goal". 0 = the expert's labels.
    release_frames: int = 0
    # Label the N frames before each demonstration's first close as closed too. The expert closes on the step the
    # hand arrives, a state the head cannot tell from the arriving frames before it, so it learns to close one frame
    # after the gripper command already shows closed: in closed loop it never closes. 0 = the expert's labels.
    grasp_frames: int = 0
    # Memory heads: move the remembered target by a Gaussian step of this many metres per axis on pre-grasp frames
    # and the first action's xy label by the same step where the expert's step would follow it unclipped (the label
    # is shorter than the longest step in the data): the image still shows the object where it was, so the head
    # learns that the memory, not the picture, says where to go. 0 = off.
    memory_shift: float = 0.0

    def check(self) -> None:
        if self.memory_source not in MEMORY_SOURCES:
            raise ConfigError(f"memory_source must be one of {', '.join(MEMORY_SOURCES)}, got {self.memory_source!r}")
        if self.switch_weight < 1.0:
            raise ConfigError(f"switch_weight must be >= 1, got {self.switch_weight}")
        if self.release_frames < 0:
            raise ConfigError(f"release_frames must be >= 0, got {self.release_frames}")
        if self.grasp_frames < 0:
            raise ConfigError(f"grasp_frames must be >= 0, got {self.grasp_frames}")
        if self.memory_shift < 0:
            raise ConfigError(f"memory_shift must be >= 0, got {self.memory_shift}")


@dataclass
class DemoArrays:
    """Cached training data (see module docstring)."""

    features: torch.Tensor  # N×C×h×w: float16 frozen features, or uint8 pixels for the "cnn" backbone
    text_table: np.ndarray  # T×384
    text_index: np.ndarray  # N int
    states: np.ndarray  # N×S float32
    actions: np.ndarray  # N×7 float32
    episode: np.ndarray  # N int
    targets: np.ndarray | None = None  # N×3 target start xyz (privileged, only for the auxiliary loss)
    goals: np.ndarray | None = None  # N×3 goal start xyz, NaN for pick tasks (privileged, memory heads only)
    embodiment: np.ndarray | None = None  # N embodiment names (which camera saw the frame; memory heads only)
    word_table: np.ndarray | None = None  # T×W×384 per-word embeddings of each instruction (word-additive heads)
    # N×2×2 image coordinates of the target and goal starts, recorded per episode (NaN = none); when given they
    # replace the projection by ``embodiment`` (suites whose camera moves between episodes)
    uv: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.actions.shape[0])


def chunk_targets(actions: np.ndarray, episode: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """(N×chunk×7 targets, N×chunk mask): step t's chunk is actions t..t+chunk-1 of its own episode."""
    n = actions.shape[0]
    raw = np.arange(n)[:, None] + np.arange(chunk)[None, :]
    idx = np.minimum(raw, n - 1)
    same = (raw < n) & (episode[idx] == episode[:, None])
    # Past the episode end: repeat the episode's last action, and mask it out of the loss.
    last = np.where(same, idx, 0)
    last = np.maximum.accumulate(last, axis=1)
    return actions[last].astype(np.float32), same.astype(np.float32)




def switch_frames(actions: np.ndarray, episode: np.ndarray, chunk: int) -> np.ndarray:
    """N bool: frames whose chunk (this step and the next ``chunk - 1`` of the same episode) holds a gripper switch,
    i.e. a step whose gripper sign differs from the step before it."""
    closed = actions[:, 6] > 0
    switch = np.zeros(len(actions), bool)
    switch[1:] = (closed[1:] != closed[:-1]) & (episode[1:] == episode[:-1])
    out = switch.copy()
    for k in range(1, chunk):  # frame t is marked when t + k switches within the same episode
        ahead = np.zeros(len(actions), bool)
        ahead[:-k] = switch[k:] & (episode[k:] == episode[:-k])
        out |= ahead
    return out


def widen_release(actions: np.ndarray, episode: np.ndarray, frames: int) -> np.ndarray:
    """A copy of ``actions`` whose episodes that end on a release (last frame open, an earlier frame closed) have
    their last ``frames`` frames labelled open (gripper -1): see ``TrainConfig.release_frames``."""
    out = actions.copy()
    if frames <= 0:
        return out
    for e in np.unique(episode):
        idx = np.flatnonzero(episode == e)
        grip = actions[idx, 6]
        if grip[-1] < 0 and (grip[:-1] > 0).any():
            out[idx[-frames:], 6] = -1.0
    return out


def widen_grasp(actions: np.ndarray, episode: np.ndarray, frames: int) -> np.ndarray:
    """A copy of ``actions`` where the ``frames`` frames before each episode's first close (gripper from open to
    closed) are labelled closed too: see ``TrainConfig.grasp_frames``."""
    out = actions.copy()
    if frames <= 0:
        return out
    for e in np.unique(episode):
        idx = np.flatnonzero(episode == e)
        closed = np.flatnonzero(actions[idx, 6] > 0)
        if len(closed) and closed[0] > 0:
            first = closed[0]
            out[idx[max(0, first - frames):first], 6] = 1.0
    return out


def gripper_classes(targets: np.ndarray, mask: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N×chunk 0/1 "closed" labels, N×chunk class-balancing weights) of the chunk targets: each class weighs
    half of the training frames' (masked) chunk steps, so the rarer state of the gripper counts as much."""
    closed = (targets[..., -1] > 0).astype(np.float32)
    seen = mask[train] > 0
    frac = float(closed[train][seen].mean()) if seen.any() else 0.5
    frac = min(max(frac, 1e-3), 1 - 1e-3)
    weights = np.where(closed > 0, 0.5 / frac, 0.5 / (1 - frac)).astype(np.float32)
    return closed, weights


def aux_targets(data: DemoArrays) -> tuple[np.ndarray, np.ndarray]:
    """(N×2 target-minus-gripper xy offset / AUX_SCALE, N mask): frames before the episode's first grasp only.

    Before the gripper first closes the target still stands at its start position, so the label is exact there.
    """
    if data.targets is None:
        raise ConfigError("this head has an auxiliary output but the demonstrations carry no target positions")
    offset = (data.targets[:, :2] - data.states[:, :2]) / AUX_SCALE
    closed = data.actions[:, 6] > 0
    mask = np.zeros(len(data), np.float32)
    for e in np.unique(data.episode):
        idx = np.flatnonzero(data.episode == e)
        mask[idx] = np.maximum.accumulate(closed[idx]) == 0
    return offset.astype(np.float32), mask


def memory_labels(data: DemoArrays, memory: int) -> dict[str, np.ndarray]:
    """Per-frame labels of the remembered objects (described object, goal): table ``xy`` (N×M×2, metres), image
    ``uv`` (N×M×2, see :func:`envs.manipulation.scene.project_to_image`) and ``valid`` (N×M): the described object
    only until the episode's first grasp (it moves after), the goal wherever the task has one. Recorded
    ``data.uv`` is used as is; otherwise the points are projected with each frame's embodiment camera."""
    if data.targets is None or (data.embodiment is None and data.uv is None) or (memory > 1 and data.goals is None):
        raise ConfigError("an object-memory head needs demonstrations with target/goal positions and embodiments "
                          "or recorded image positions")
    points = [data.targets, data.goals][:memory]
    _, pre_grasp = aux_targets(data)
    xy = np.zeros((len(data), memory, 2), np.float32)
    uv = np.zeros((len(data), memory, 2), np.float32)
    valid = np.zeros((len(data), memory), np.float32)
    for k, pts in enumerate(points):
        ok = np.isfinite(pts).all(1)
        xy[ok, k] = pts[ok, :2]
        if data.uv is not None:
            ok &= np.isfinite(data.uv[:, k]).all(1)
            uv[ok, k] = data.uv[ok, k]
        else:
            for name in np.unique(data.embodiment):
                sel = ok & (data.embodiment == name)
                uv[sel, k] = project_to_image(str(name), pts[sel])
        inside = (np.abs(uv[:, k]) < 1).all(1)
        valid[:, k] = ok & inside & ((pre_grasp > 0) if k == 0 else True)
    return {"xy": xy, "uv": uv, "valid": valid}


def memory_seen(estimate: torch.Tensor, true_xy: torch.Tensor, valid: torch.Tensor, source: str, noise: float,
                gen: torch.Generator) -> torch.Tensor:
    """The remembered positions (N×M×2) the action MLP trains on: the detached ``estimate``, or with ``source`` =
    "true" the true positions where ``valid`` (N×M) says there are some; plus Gaussian ``noise`` (metres)."""
    seen = estimate.detach()
    if source == "true":
        seen = torch.where(valid[..., None] > 0, true_xy, seen)
    if noise > 0:
        seen = seen + torch.randn(seen.shape, generator=gen) * noise
    return seen


def displace_memory(seen: torch.Tensor, y: torch.Tensor, raw_first: torch.Tensor, eligible: torch.Tensor,
                    scale: float, step_cap: float, a_std: torch.Tensor, gen: torch.Generator
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(``seen``, ``y``) with the remembered target (row 0 of N×M×2 ``seen``) moved by δ ~ N(0, ``scale``²) per axis
    and the first chunk step's normalised xy label moved by δ / ``a_std`` on frames where ``eligible`` (N, pre-grasp
    with a known target) and the raw first label (N×3, metres) moved by δ stays within ``step_cap`` (the expert's
    step would follow the move unclipped); other frames are returned unchanged (see ``TrainConfig.memory_shift``)."""
    delta = torch.randn(seen.shape[0], 2, generator=gen) * scale
    moved = torch.cat([raw_first[:, :2] + delta, raw_first[:, 2:3]], dim=1)
    ok = (eligible > 0) & (moved.norm(dim=1) <= step_cap)
    delta = delta * ok[:, None]
    seen = torch.cat([seen[:, :1] + delta[:, None], seen[:, 1:]], dim=1)
    y = y.clone()
    y[:, 0, :2] = y[:, 0, :2] + delta / a_std[:2]
    return seen, y


def heatmap_loss(logits: torch.Tensor, uv: torch.Tensor, valid: torch.Tensor, sigma_cells: float) -> torch.Tensor:
    """Cross-entropy of N×M×G×G heatmap logits against Gaussian labels centred at ``uv`` (masked by ``valid``)."""
    g = logits.shape[-1]
    centres = (torch.arange(g, dtype=torch.float32) * 2 + 1) / g - 1
    s2 = 2 * (sigma_cells * 2 / g) ** 2
    lx = torch.exp(-(centres[None, None, :] - uv[..., 0:1]) ** 2 / s2)
    ly = torch.exp(-(centres[None, None, :] - uv[..., 1:2]) ** 2 / s2)
    label = ly[..., :, None] * lx[..., None, :]
    label = label / label.sum((-2, -1), keepdim=True)
    ce = -(label * torch.log_softmax(logits.flatten(2), -1).view_as(logits)).sum((-2, -1))
    return (ce * valid).sum() / valid.sum().clamp(min=1.0)


def episode_batches(idx: np.ndarray, episode: np.ndarray, per_episode: int, batch_size: int,
                    rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of frame indices in groups of ``per_episode`` frames of one episode, so a batch needs
    only ``batch_size / per_episode`` first frames for the object memory."""
    groups = []
    for e in np.unique(episode[idx]):
        frames = rng.permutation(idx[episode[idx] == e])
        groups += [frames[i:i + per_episode] for i in range(0, len(frames), per_episode)]
    order = rng.permutation(len(groups))
    per_batch = max(1, batch_size // per_episode)
    return [np.concatenate([groups[j] for j in order[b:b + per_batch]]) for b in range(0, len(order), per_batch)]


def shift_features(feats: torch.Tensor, max_cells: float, gen: torch.Generator,
                   offsets: torch.Tensor | None = None) -> torch.Tensor:
    """Translate each N×C×h×w map by a random (dx, dy) in [-max_cells, max_cells] cells, edges replicated
    (or by the given N×2 ``offsets``, in cells: content moves by −offset)."""
    n, _, h, w = feats.shape
    offs = (torch.rand(n, 2, generator=gen) * 2 - 1) * max_cells if offsets is None else offsets
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0] = theta[:, 1, 1] = 1.0
    theta[:, 0, 2] = offs[:, 0] * 2 / w  # affine_grid works in [-1, 1] units: one cell is 2/w
    theta[:, 1, 2] = offs[:, 1] * 2 / h
    grid = F.affine_grid(theta, list(feats.shape), align_corners=False)
    return F.grid_sample(feats, grid, mode="bilinear", padding_mode="border", align_corners=False)


def split_episodes(episode: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean train/validation masks over frames, splitting by whole episodes (frames of one demo correlate)."""
    eps = np.unique(episode)
    rng = np.random.default_rng(seed)
    n_val = max(1, int(round(val_fraction * len(eps)))) if len(eps) > 1 else 0
    val_eps = set(rng.permutation(eps)[:n_val].tolist())
    val = np.array([e in val_eps for e in episode])
    return ~val, val


def epoch_steps(data: DemoArrays, cfg: TrainConfig) -> int:
    """Gradient steps per epoch (memory heads batch episode-grouped frames: the count depends on the episodes'
    lengths, not on the order)."""
    train_m, _ = split_episodes(data.episode, cfg.val_fraction, cfg.seed)
    if not cfg.head.memory:
        return max(1, -(-int(train_m.sum()) // cfg.batch_size))
    _, lengths = np.unique(data.episode[train_m], return_counts=True)
    groups = int(np.sum(-(-lengths // cfg.frames_per_episode)))
    return max(1, -(-groups // max(1, cfg.batch_size // cfg.frames_per_episode)))


@dataclass
class TrainingTensors:
    """Everything a run indexes by frame, as tensors: normalised chunk targets and inputs, per-dimension and
    per-frame loss weights, and the optional gripper-class, auxiliary and object-memory labels."""

    y: torch.Tensor  # N×chunk×7 normalised chunk targets
    mask: torch.Tensor  # N×chunk: 1 where the chunk step lies inside the episode
    text: torch.Tensor  # T×384 instruction embeddings
    tidx: torch.Tensor  # N: each frame's row of ``text``
    states: torch.Tensor  # N×S normalised states
    dim_w: torch.Tensor  # action_dim weights of the squared error
    grip_w: torch.Tensor  # N multipliers of the gripper error
    closed: torch.Tensor | None = None  # N×chunk gripper classes (gripper-classifier heads)
    class_w: torch.Tensor | None = None  # N×chunk class-balancing weights
    aux_y: torch.Tensor | None = None  # N×2 auxiliary target offsets (heads with aux_dim > 0)
    aux_m: torch.Tensor | None = None  # N
    mem: dict[str, torch.Tensor] | None = None  # object-memory labels (see :func:`memory_labels`)
    first_of: torch.Tensor | None = None  # N: index of each frame's episode's first frame (memory heads)
    words: torch.Tensor | None = None  # T×W×384 per-word embeddings (word-additive heads)
    raw_first: torch.Tensor | None = None  # N×3 first chunk step in metres (memory_shift)
    step_cap: float = 0.0  # metres: a moved first label longer than this would have been clipped (memory_shift)
    a_std: torch.Tensor | None = None  # action_dim normalisation scale (memory_shift)


@dataclass(frozen=True)
class Normalisation:
    """Action and state statistics the head's outputs and inputs are normalised with."""

    a_mean: np.ndarray
    a_std: np.ndarray
    s_mean: np.ndarray
    s_std: np.ndarray


def normalisation(actions: np.ndarray, raw_states: np.ndarray, train_m: np.ndarray, head_cfg: HeadConfig,
                  init: HeadBundle | None) -> Normalisation:
    """Statistics of the training frames, or the initial bundle's (fine-tuning keeps what its outputs mean)."""
    if init is not None:
        if init.config != head_cfg:
            raise ConfigError("the initial checkpoint's head config differs from the one to train")
        return Normalisation(init.action_mean, init.action_std, init.state_mean, init.state_std)
    return Normalisation(
        actions[train_m].mean(0), actions[train_m].std(0) + 1e-3,
        raw_states[train_m].mean(0) if raw_states.shape[1] else np.zeros(0, np.float32),
        raw_states[train_m].std(0) + 1e-3 if raw_states.shape[1] else np.zeros(0, np.float32))


def training_tensors(data: DemoArrays, cfg: TrainConfig, train_m: np.ndarray, init: HeadBundle | None,
                     ) -> tuple[TrainingTensors, Normalisation]:
    """Labels (widened gripper windows, chunks), normalisation and loss weights of every frame."""
    head_cfg = cfg.head
    raw_states = data.states[:, list(head_cfg.state_indices)] if head_cfg.state_indices else data.states
    if head_cfg.state_dim != raw_states.shape[1]:
        raise ConfigError(f"head state_dim {head_cfg.state_dim} != data state size {raw_states.shape[1]}")
    actions = widen_grasp(widen_release(data.actions, data.episode, cfg.release_frames), data.episode,
                          cfg.grasp_frames)
    targets, mask = chunk_targets(actions, data.episode, head_cfg.chunk)
    norm = normalisation(actions, raw_states, train_m, head_cfg, init)
    dim_w = torch.ones(head_cfg.action_dim)
    dim_w[-1] = cfg.gripper_weight
    dim_w[:2] = cfg.xy_weight
    grip_w = torch.ones(len(data))  # per-frame multiplier of the gripper error
    if cfg.switch_weight != 1.0:
        grip_w[torch.as_tensor(switch_frames(actions, data.episode, head_cfg.chunk))] = cfg.switch_weight
    t = TrainingTensors(
        y=torch.as_tensor((targets - norm.a_mean) / norm.a_std, dtype=torch.float32), mask=torch.as_tensor(mask),
        text=torch.as_tensor(data.text_table, dtype=torch.float32),
        tidx=torch.as_tensor(data.text_index, dtype=torch.long),
        states=torch.as_tensor((raw_states - norm.s_mean) / np.where(norm.s_std > 0, norm.s_std, 1),
                               dtype=torch.float32),
        dim_w=dim_w, grip_w=grip_w,
        raw_first=torch.as_tensor(targets[:, 0, :3], dtype=torch.float32),
        step_cap=0.98 * float(np.max(np.linalg.norm(targets[:, 0, :3], axis=1))) if len(targets) else 0.0,
        a_std=torch.as_tensor(norm.a_std, dtype=torch.float32))
    if head_cfg.gripper_classifier:
        t.closed, t.class_w = (torch.as_tensor(a) for a in gripper_classes(targets, mask, train_m))
    if head_cfg.aux_dim not in (0, 2):
        raise ConfigError(f"aux_dim must be 0 or 2 (target xy offset), got {head_cfg.aux_dim}")
    if head_cfg.aux_dim:
        t.aux_y, t.aux_m = (torch.as_tensor(a) for a in aux_targets(data))
    return t, norm


def new_head(head_cfg: HeadConfig, init: HeadBundle | None) -> FiLMActionHead:
    """A head initialised from the (seeded) global generator, or a trainable copy of ``init``'s weights."""
    head = FiLMActionHead(head_cfg)
    if init is not None:  # a trainable copy (checkpoints load frozen)
        head.load_state_dict(init.head.state_dict())
    return head


def add_memory_tensors(t: TrainingTensors, data: DemoArrays, head_cfg: HeadConfig) -> None:
    """Object-memory labels and each frame's episode start (memory heads); per-word embeddings (word heads)."""
    if head_cfg.memory:
        t.mem = {k: torch.as_tensor(v) for k, v in memory_labels(data, head_cfg.memory).items()}
        starts = np.zeros(len(data), np.int64)  # each frame's episode's first frame
        for e in np.unique(data.episode):
            idx_e = np.flatnonzero(data.episode == e)
            starts[idx_e] = idx_e[0]
        t.first_of = torch.as_tensor(starts)
    if head_cfg.words:
        if data.word_table is None or data.word_table.shape[1] != head_cfg.words:
            raise ConfigError(f"a word-additive head needs per-word instruction embeddings ({head_cfg.words} words)")
        t.words = torch.as_tensor(data.word_table, dtype=torch.float32)


def memory_forward(head: FiLMActionHead, t: TrainingTensors, data: DemoArrays, cfg: TrainConfig,
                   idx: torch.Tensor, feats: torch.Tensor, txt: torch.Tensor, st: torch.Tensor | None,
                   offs: torch.Tensor | None, augment: bool, gen: torch.Generator, yb: torch.Tensor,
                   ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """(prediction, aux output, heatmap + localisation loss, labels ``yb`` — moved with the memory under
    ``memory_shift``) of a memory head on frames ``idx``."""
    assert t.mem is not None and t.first_of is not None
    words = t.words
    # The memory comes from each episode's first frame (never shifted: its geometry is the camera's).
    firsts, inverse = torch.unique(t.first_of[idx], return_inverse=True)
    first_loc = head.localise(*head.trunk(data.features[firsts], t.text[t.tidx[firsts]]),
                              words=None if words is None else words[t.tidx[firsts]])
    xy = first_loc["xy"][inverse]
    seen = memory_seen(xy, t.mem["xy"][firsts][inverse], t.mem["valid"][firsts][inverse], cfg.memory_source,
                       cfg.memory_noise if augment else 0.0, gen)
    if augment and cfg.memory_shift > 0:  # the memory, not the picture, says where to go
        seen, yb = displace_memory(seen, yb, t.raw_first[idx], t.mem["valid"][idx][:, 0] * t.mask[idx][:, 0],
                                   cfg.memory_shift, t.step_cap, t.a_std, gen)
    memory = torch.cat([seen, first_loc["desc"][inverse]], dim=-1)
    trunk = head.trunk(feats, txt)
    pred, aux = head.forward_with_aux(feats, txt, st, memory=memory, trunk=trunk)
    # Heatmaps on the first frames (what the memory uses) and on the current frames (more supervision).
    cur_uv = t.mem["uv"][idx]
    if offs is not None:
        g = trunk[-1].shape[-1]
        cur_uv = cur_uv - (offs * 2 / g)[:, None, :]
    valid = t.mem["valid"][idx] * (cur_uv.abs() < 1).all(-1)
    cur_logits = head.localise(*trunk, words=None if words is None else words[t.tidx[idx]])["logits"]
    extra = cfg.heatmap_weight * 0.5 * (
        heatmap_loss(first_loc["logits"], t.mem["uv"][firsts], t.mem["valid"][firsts], cfg.heatmap_sigma)
        + heatmap_loss(cur_logits, cur_uv, valid, cfg.heatmap_sigma))
    xy_err = ((first_loc["xy"] - t.mem["xy"][firsts]) / AUX_SCALE).pow(2).sum(-1) * t.mem["valid"][firsts]
    extra = extra + cfg.aux_weight * xy_err.sum() / t.mem["valid"][firsts].sum().clamp(min=1.0)
    return pred, aux, extra, yb


def batch_loss(head: FiLMActionHead, t: TrainingTensors, data: DemoArrays, cfg: TrainConfig, idx: torch.Tensor,
               gen: torch.Generator, augment: bool = False) -> torch.Tensor:
    """Masked, weighted loss of frames ``idx``: chunk MSE (or the gripper's class-balanced cross-entropy), plus
    the auxiliary and object-memory terms; ``augment`` shifts the feature maps and noises the memory."""
    feats = data.features[idx]
    feats = pixels_to_input(feats) if feats.dtype == torch.uint8 else feats.float()
    offs = None
    if augment and cfg.shift_cells > 0:
        offs = (torch.rand(len(idx), 2, generator=gen) * 2 - 1) * cfg.shift_cells
        feats = shift_features(feats, cfg.shift_cells, gen, offs)
    txt = t.text[t.tidx[idx]]
    st = t.states[idx] if cfg.head.state_dim else None
    extra = torch.zeros(())
    yb = t.y[idx]
    if t.mem is None:
        pred, aux = head.forward_with_aux(feats, txt, st)
    else:
        pred, aux, extra, yb = memory_forward(head, t, data, cfg, idx, feats, txt, st, offs, augment, gen, yb)
    err = (pred - yb).pow(2) * t.dim_w
    if t.closed is not None:  # the gripper channel holds logits: class-balanced cross-entropy instead
        bce = F.binary_cross_entropy_with_logits(pred[..., -1], t.closed[idx], reduction="none")
        err = torch.cat([err[..., :-1], (bce * t.class_w[idx] * t.dim_w[-1])[..., None]], dim=-1)
    if cfg.switch_weight != 1.0:
        err = torch.cat([err[..., :-1], err[..., -1:] * t.grip_w[idx][:, None, None]], dim=-1)
    m = t.mask
    loss = (err * m[idx][:, :, None]).sum() / (m[idx].sum() * cfg.head.action_dim) + extra
    if aux is not None and cfg.aux_weight > 0:
        aux_err = (aux - t.aux_y[idx]).pow(2).sum(1) * t.aux_m[idx]
        loss = loss + cfg.aux_weight * aux_err.sum() / t.aux_m[idx].sum().clamp(min=1.0)
    return loss


def epoch_batches(train_idx: torch.Tensor, data: DemoArrays, cfg: TrainConfig, epoch: int, steps_per_epoch: int,
                  gen: torch.Generator) -> list[torch.Tensor]:
    """One epoch's shuffled batches of training frames (memory heads: grouped by episode, see
    :func:`episode_batches`)."""
    if not cfg.head.memory:
        perm = train_idx[torch.randperm(len(train_idx), generator=gen)]
        return [perm[b * cfg.batch_size:(b + 1) * cfg.batch_size] for b in range(steps_per_epoch)]
    return [torch.as_tensor(b) for b in episode_batches(
        train_idx.numpy(), data.episode, cfg.frames_per_episode, cfg.batch_size,
        np.random.default_rng([cfg.seed, epoch]))]


def train_epoch(head: FiLMActionHead, t: TrainingTensors, data: DemoArrays, cfg: TrainConfig,
                batches: list[torch.Tensor], opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler,
                gen: torch.Generator, on_progress: Callable[[int], None] | None) -> float:
    """One pass of gradient steps over ``batches`` (augmented); returns the frame-weighted sum of the losses."""
    head.train()
    total = 0.0
    for idx in batches:
        loss = batch_loss(head, t, data, cfg, idx, gen, augment=True)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        total += float(loss.detach()) * len(idx)
        if on_progress is not None:
            on_progress(1)
    return total


def validation_loss(head: FiLMActionHead, t: TrainingTensors, data: DemoArrays, cfg: TrainConfig,
                    val_idx: torch.Tensor, gen: torch.Generator, empty: float) -> float:
    """Mean un-augmented loss over held-out frames, in slices (smaller for memory heads, which run two trunks);
    ``empty`` without held-out frames. Leaves the head in eval mode."""
    head.eval()
    if not len(val_idx):
        return empty
    step = 1024 if t.mem is None else 256
    with torch.no_grad():
        return float(np.mean([float(batch_loss(head, t, data, cfg, val_idx[i:i + step], gen))
                              for i in range(0, len(val_idx), step)]))


def train_head(
    data: DemoArrays,
    cfg: TrainConfig,
    on_progress: Callable[[int], None] | None = None,
    on_epoch: Callable[[dict[str, Any]], None] | None = None,
    init: HeadBundle | None = None,
) -> tuple[HeadBundle, dict[str, Any]]:
    """Fit the head by masked, weighted MSE on normalised chunk targets; keep the best-validation weights.

    ``init`` (fine-tuning) starts from a trained bundle's weights and keeps its normalisation statistics, so the
    outputs it was trained to produce keep their meaning; its config must be ``cfg.head``.
    """
    if len(data) < 2:
        raise ConfigError(f"need at least 2 demonstration frames to train, got {len(data)}")
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    train_m, val_m = split_episodes(data.episode, cfg.val_fraction, cfg.seed)
    t, norm = training_tensors(data, cfg, train_m, init)
    head = new_head(cfg.head, init)
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    train_idx = torch.as_tensor(np.flatnonzero(train_m))
    val_idx = torch.as_tensor(np.flatnonzero(val_m))
    steps_per_epoch = epoch_steps(data, cfg)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs * steps_per_epoch)
    add_memory_tensors(t, data, cfg.head)
    if cfg.head.memory and init is None:  # a fine-tuned head keeps the buffers it was trained with
        head.ee_xy_mean.copy_(torch.as_tensor(norm.s_mean[:2]))
        head.ee_xy_std.copy_(torch.as_tensor(np.where(norm.s_std[:2] > 0, norm.s_std[:2], 1)))

    best_val, best_state, best_epoch, bad = float("inf"), copy.deepcopy(head.state_dict()), -1, 0
    history: list[dict[str, Any]] = []
    start = time.perf_counter()
    stopped_by = "epochs"
    for epoch in range(cfg.epochs):
        total = train_epoch(head, t, data, cfg, epoch_batches(train_idx, data, cfg, epoch, steps_per_epoch, gen),
                            opt, sched, gen, on_progress)
        val = validation_loss(head, t, data, cfg, val_idx, gen, empty=total / len(train_idx))
        record = {"epoch": epoch + 1, "train_loss": total / len(train_idx), "val_loss": val,
                  "wall_s": round(time.perf_counter() - start, 2)}
        history.append(record)
        if on_epoch is not None:
            on_epoch(record)
        if val < best_val - 1e-5:
            best_val, best_state, best_epoch, bad = val, copy.deepcopy(head.state_dict()), epoch + 1, 0
        else:
            bad += 1
            if bad >= cfg.patience:
                stopped_by = "early_stop"
                break
        if time.perf_counter() - start > 60.0 * cfg.max_minutes:
            stopped_by = "time"
            break
    head.load_state_dict(best_state)
    freeze(head)
    bundle = HeadBundle(cfg.head, head, norm.a_mean.astype(np.float32), norm.a_std.astype(np.float32),
                        norm.s_mean.astype(np.float32), np.where(norm.s_std > 0, norm.s_std, 1).astype(np.float32))
    stats = {"best_val_loss": best_val, "best_epoch": best_epoch, "epochs_run": len(history),
             "stopped_by": stopped_by, "steps_per_epoch": steps_per_epoch, "train_frames": int(train_m.sum()),
             "val_frames": int(val_m.sum()),
             "train_s": round(time.perf_counter() - start, 2), "history": history}
    return bundle, stats
