"""Expert demonstrations for the generic VLA, collected once and kept: resumable blocks, then one input cache.

Collection runs in blocks of :data:`BLOCK` episodes, each saved under a key of the demonstration and vision
configuration, so an interrupted (or longer, or differently sized) run reuses every block it shares with an earlier
one; blocks are collected in worker processes when asked and merged in episode order. The merged demonstrations are
then saved as the input cache (``demos.npz``: frozen features in fp16 or raw frames, labels, and the configurations
that produced them) that head training reads back with :func:`load_cache`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.manipulation.demonstrations import DemoConfig, Demos, collect_demos
from agents.manipulation.vlabench_demonstrations import VLABenchDemoConfig, collect_vlabench_demos
from envs.atomic_io import atomic_path
from envs.errors import ConfigError
from envs.manipulation.env import make_env
from policies.vla.model import VisionSpec
from policies.vla.vision_input import image_features

CACHE_FORMAT = "embodia.vla_demos/1"
BLOCK = 8  # episodes per saved block: an interrupted collection resumes from the last finished block


def _collect_block(args: tuple[DemoConfig, VisionSpec, list[int], Path]) -> Demos:
    cfg, vision, indices, path = args
    if path.is_file():  # finished by an earlier (interrupted) run: same config key, same episodes
        demos = _read_block(path)
        if len(demos) and not demos.targets:  # a block from before target labels were recorded
            demos.targets = recover_targets(demos, cfg)
        images = np.load(path, allow_pickle=False)["images"] if vision.backbone == "cnn" and len(demos) else None
    else:
        torch.set_num_threads(1)
        # Keep the raw frames of kept episodes (encoded in one batch afterwards, which is also faster than per
        # frame) so that another frozen-feature spec or the from-scratch CNN can be trained without re-collecting.
        demos = collect_vlabench_demos(cfg, indices=indices) if isinstance(cfg, VLABenchDemoConfig) \
            else collect_demos(cfg, indices=indices)
        images = np.stack(demos.frames) if demos.frames else np.zeros((0, 1, 1, 3), np.uint8)
        demos.frames = [] if vision.backbone == "cnn" else _encode_batch(images, vision)
        _write_block(path, demos, images)
    if vision.backbone == "cnn":  # raw-frame blocks: the head's input is the resized pixels
        demos.frames = _encode_batch(images, vision) if len(demos) else []
    return demos


def recover_targets(demos: Demos, cfg: DemoConfig) -> list[np.ndarray]:
    """Per-frame target start positions of kept episodes, re-read from the seeded scene (reset only, no steps)."""
    start: dict[int, np.ndarray] = {}
    envs: dict[str, Any] = {}
    try:
        for e in demos.episodes:
            if e["success"] or cfg.keep_failed:
                if e["task"] not in envs:
                    envs[e["task"]] = make_env(e["task"], {"image_size": cfg.image_size, "split": "train"})
                env = envs[e["task"]]
                env.reset(seed=int(e["seed"]))
                start[int(e["index"])] = np.asarray(env.unwrapped.privileged_state()["target"]["start"], np.float32)
    finally:
        for env in envs.values():
            env.close()
    return [start[i] for i in demos.episode]


def _encode_batch(images: np.ndarray, vision: VisionSpec, batch: int = 32) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for s in range(0, len(images), batch):
        feats = image_features(images[s:s + batch], vision).numpy()
        out += list(feats if feats.dtype == np.uint8 else feats.astype(np.float16))
    return out


def _write_block(path: Path, demos: Demos, images: np.ndarray | None = None) -> None:
    feats = np.stack(demos.frames) if demos.frames else np.zeros((0,), np.float16)
    extra = {"images": images} if images is not None else {}
    if demos.targets:
        extra["targets"] = np.stack(demos.targets).astype(np.float32)
    if demos.goals:
        extra["goals"] = np.stack(demos.goals).astype(np.float32)
    if demos.uv:
        extra["uv"] = np.stack(demos.uv).astype(np.float32)
    with atomic_path(path) as tmp:
        np.savez_compressed(tmp, **extra, features=feats,
                            states=np.asarray(demos.states, np.float32).reshape(len(demos), -1),
                            actions=np.asarray(demos.actions, np.float32).reshape(len(demos), -1),
                            episode=np.asarray(demos.episode, np.int64),
                            meta=json.dumps({"instructions": demos.instructions, "tasks": demos.task,
                                             "episodes": demos.episodes}))


def _read_block(path: Path) -> Demos:
    z = np.load(path, allow_pickle=False)
    meta = json.loads(str(z["meta"]))
    n = len(meta["instructions"])
    return Demos(frames=list(z["features"]) if n else [], instructions=meta["instructions"],
                 states=list(z["states"]), actions=list(z["actions"]), episode=[int(e) for e in z["episode"]],
                 task=meta["tasks"], episodes=meta["episodes"],
                 targets=list(z["targets"]) if "targets" in z.files and n else [],
                 goals=list(z["goals"]) if "goals" in z.files and n else [],
                 uv=list(z["uv"]) if "uv" in z.files and n else [])


def collect(cfg: DemoConfig, vision: VisionSpec, workers: int, block_dir: Path,
            on_progress: Callable[[int], None] | None = None) -> Demos:
    """Collect demos in blocks saved under ``block_dir`` (resumable), in ``workers`` processes when > 1;
    ``on_progress(n)`` hears of each block's ``n`` finished episodes.

    Episodes are seeded by index, so the result is the same for any worker count or interruption pattern.
    """
    # The key leaves out the episode count: a longer or shorter run reuses the blocks it shares with this one.
    # Raw-frame blocks (the CNN backbone) hold full-size frames, so every CNN input size shares them.
    # Fields added after blocks were first written enter the key only when set, so older blocks stay valid.
    defaults = {("descent", "gated"), ("driver", ""), ("driver_sha256", ""), ("split", "train"),
                ("driven_part", "approach"), ("regrasps", 0), ("drop_fraction", 0.0), ("look_randomisation", 0.0),
                ("label_frame", "command")}
    # a driver is keyed by its weights' sha256, not by the folder it was read from
    content = {k: v for k, v in asdict(cfg).items() if k not in ("episodes", "driver") and (k, v) not in defaults}
    encoded = "raw_frames" if vision.backbone == "cnn" else asdict(vision)
    key = hashlib.sha256(json.dumps([content, encoded], sort_keys=True).encode()).hexdigest()[:10]
    block_dir.mkdir(parents=True, exist_ok=True)
    spans = [(s, min(s + BLOCK, cfg.episodes)) for s in range(0, cfg.episodes, BLOCK)]
    jobs = [(cfg, vision, list(range(s, e)), block_dir / f"{key}_{s:05d}_{e:05d}.npz") for s, e in spans]
    merged = Demos()
    with ExitStack() as stack:
        if workers <= 1:
            parts = map(_collect_block, jobs)
        else:
            parts = stack.enter_context(ProcessPoolExecutor(workers)).map(_collect_block, jobs)
        for part in parts:
            merged.extend(part)
            if on_progress is not None:
                on_progress(len(part.episodes))
    return merged


def save_cache(path: Path, demos: Demos, cfg: DemoConfig, vision: VisionSpec) -> None:
    """The feature cache: features fp16 + labels + the configs that produced them."""
    table = sorted(set(demos.instructions))
    np.savez(path, features=np.stack(demos.frames), states=np.stack(demos.states),
             actions=np.stack(demos.actions), episode=np.asarray(demos.episode),
             targets=np.stack(demos.targets) if len(demos.targets) == len(demos) else np.zeros((0, 3), np.float32),
             goals=np.stack(demos.goals) if len(demos.goals) == len(demos) else np.zeros((0, 3), np.float32),
             uv=np.stack(demos.uv) if len(demos.uv) == len(demos) else np.zeros((0, 2, 2), np.float32),
             text_index=np.asarray([table.index(t) for t in demos.instructions]),
             meta=json.dumps({"format": CACHE_FORMAT, "instructions": table, "demo_config": asdict(cfg),
                              "vision": asdict(vision), "episodes": demos.episodes, "tasks": demos.task}))


def load_cache(path: Path, vision: VisionSpec) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read a feature cache; its vision spec must match the head being trained."""
    if not path.is_file():
        raise ConfigError(f"demo cache {str(path)!r} does not exist")
    try:
        z = np.load(path, allow_pickle=False)
        meta = json.loads(str(z["meta"]))
        arrays = {k: z[k] for k in ("features", "states", "actions", "episode", "text_index")}
        # privileged training-only labels; caches from older runs may lack them
        for label in ("targets", "goals", "uv"):
            if label in z.files and len(z[label]) == len(arrays["actions"]):
                arrays[label] = z[label]
    except (OSError, KeyError, ValueError) as exc:
        raise ConfigError(f"demo cache {str(path)!r} is not a readable {CACHE_FORMAT} file") from exc
    if meta.get("format") != CACHE_FORMAT:
        raise ConfigError(f"demo cache {str(path)!r} has format {meta.get('format')!r}; expected {CACHE_FORMAT!r}")
    if meta["vision"] != asdict(vision):
        raise ConfigError(f"demo cache {str(path)!r} was encoded with vision {meta['vision']}, not {asdict(vision)}")
    return meta, arrays
