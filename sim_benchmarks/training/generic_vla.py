"""One training run of Embodia's generic VLA head: demonstrations → input cache → behaviour cloning → checkpoint
→ closed-loop evaluation, written to one results folder.

``python -m launch.train_vla`` checks its options and builds a :class:`GenericVLARun`; this module does the work:
the demonstrations come from :mod:`agents.manipulation.demonstration_cache` (resumable blocks, then ``OUT/demos.npz``),
the head is fitted by :func:`policies.vla.training.train_head`, the closed-loop check is
:func:`sim_benchmarks.closed_loop.evaluate`. Writes ``OUT/metrics.jsonl`` (one record per epoch, then per evaluated
task), ``OUT/summary.json`` (``embodia.train/1``) and the checkpoint folder (weights, sha256, manifest,
``metrics.json``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.manipulation.demonstration_cache import collect, load_cache, save_cache
from agents.manipulation.demonstrations import DemoConfig
from agents.manipulation.vlabench_demonstrations import VLABenchDemoConfig
from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from envs.manipulation.tasks import GENERIC_TASKS
from perception.text_encoder import load_text_encoder
from policies.vla.attributes import attach_attributes
from policies.vla.checkpoint import load_checkpoint, save_checkpoint
from policies.vla.checkpoint_files import read_manifest
from policies.vla.generic import GenericVLA, encode_words
from policies.vla.model import HeadConfig, VisionSpec
from policies.vla.training import DemoArrays, TrainConfig, epoch_steps, train_head
from sim_benchmarks.closed_loop import evaluate
from sim_benchmarks.progress import progress_bar
from sim_benchmarks.results_folder import FolderLock
from sim_benchmarks.train_log import TrainLog


@dataclass(frozen=True)
class GenericVLARun:
    """Everything one run needs, already checked (``launch.train_vla`` builds it from its options).

    ``head`` is the head to train from scratch (its ``state_dim`` is read from the demonstrations); a fine-tune
    (``init``) keeps its starting checkpoint's head instead. ``train.head`` is replaced by the head trained.
    """

    out: Path
    suite: str
    tasks: tuple[str, ...]
    demo_cfg: DemoConfig | VLABenchDemoConfig
    vision: VisionSpec
    head: HeadConfig
    train: TrainConfig
    command: str
    driven_cfgs: tuple[DemoConfig | VLABenchDemoConfig, ...] = ()
    workers: int = 1
    demo_cache: Path | None = None
    demo_blocks: Path | None = None
    words: int = 0
    label_frame: str = "command"
    init: Path | None = None
    eval_episodes: int = 0
    checkpoint_out: Path | None = None


def demonstrations(run: GenericVLARun) -> tuple[Path, float]:
    """The input cache to train on (collected into ``OUT/demos.npz`` unless it exists or one is given) and the
    seconds spent collecting."""
    cache = run.demo_cache or run.out / "demos.npz"
    if run.demo_cache is not None or cache.exists():
        return cache, 0.0
    t0 = time.perf_counter()
    blocks = run.demo_blocks or run.out / "demo_blocks"
    with progress_bar(run.demo_cfg.episodes, "demonstrations") as advance:
        demos = collect(run.demo_cfg, run.vision, run.workers, blocks, on_progress=advance)
    for driven_cfg in run.driven_cfgs:
        with progress_bar(driven_cfg.episodes, "demonstrations") as advance:
            demos.extend(collect(driven_cfg, run.vision, run.workers, blocks, on_progress=advance))
    if not demos.actions:
        raise ConfigError("the expert succeeded in no demonstration episode; nothing to train on")
    save_cache(cache, demos, run.demo_cfg, run.vision)
    return cache, time.perf_counter() - t0


def training_arrays(run: GenericVLARun, meta: dict[str, Any], arr: dict[str, np.ndarray]) -> DemoArrays:
    """The head's training inputs from a loaded cache: features, encoded instructions, states, action labels and
    the privileged training-only labels."""
    encoder = load_text_encoder()
    texts = encoder.encode(meta["instructions"])
    # which camera saw each frame: object-memory heads project SIMPLER positions with it (VLABench's front
    # camera moves between episodes, so its demos record the image positions instead)
    embodiment = (None if run.suite == "personalized_vlabench"
                  else np.asarray([GENERIC_TASKS[t].embodiment for t in meta["tasks"]]))
    return DemoArrays(torch.from_numpy(arr["features"]), texts, arr["text_index"], arr["states"],
                      arr["actions"].astype(np.float32), arr["episode"], arr.get("targets"), arr.get("goals"),
                      embodiment, encode_words(encoder, meta["instructions"], run.words) if run.words else None,
                      arr.get("uv"))


def train_generic_vla(run: GenericVLARun, init_bundle: Any = None, started: float | None = None) -> dict[str, Any]:
    """Collect (or load) the demonstrations, train, save the checkpoint, evaluate; returns the summary.

    ``init_bundle`` is ``run.init``'s loaded checkpoint (a fine-tune); ``started`` the ``perf_counter`` time the
    run's wall clock counts from (default: now).
    """
    start = time.perf_counter() if started is None else started
    with FolderLock(run.out):  # one writer per results folder
        cache, collect_s = demonstrations(run)
        meta, arr = load_cache(cache, run.vision)
        cached_frame = meta["demo_config"].get("label_frame", "command")
        if cached_frame != run.label_frame:
            raise ConfigError(f"demo cache {str(cache)!r} holds {cached_frame}-frame labels, not --label-frame "
                              f"{run.label_frame}")
        data = training_arrays(run, meta, arr)
        head_cfg = init_bundle.config if init_bundle is not None else replace(
            run.head, state_dim=int(arr["states"].shape[1]))
        train_cfg = replace(run.train, head=head_cfg)
        log = TrainLog(run.out)
        with progress_bar(train_cfg.epochs * epoch_steps(data, train_cfg), "training head") as advance:
            bundle, stats = train_head(data, train_cfg, on_progress=advance, on_epoch=log.append, init=init_bundle)
        episodes = meta["episodes"]
        demo_stats = {"attempted": len(episodes), "kept": int(sum(e["success"] for e in episodes)),
                      "frames": len(data), "collect_s": round(collect_s, 1),
                      "driven": int(sum("driven_steps" in e for e in episodes))}
        ckpt = run.checkpoint_out or run.out / "checkpoint"
        training_facts = {"command": run.command, "seed": train_cfg.seed, "demos": demo_stats,
                          # a fine-tune names its starting weights by content: the --init folder may be replaced
                          **({"init_sha256": read_manifest(run.init)["weights_sha256"]}
                             if init_bundle is not None else {}),
                          "train": {k: v for k, v in stats.items() if k != "history"},
                          "train_config": {k: v for k, v in asdict(train_cfg).items() if k != "head"}}
        bundle = replace(bundle, action_frame=run.label_frame)
        digest = save_checkpoint(bundle, ckpt, training=training_facts)
        if init_bundle is not None and "attributes" in read_manifest(run.init):
            attach_attributes(ckpt, run.init)
            bundle = load_checkpoint(ckpt)  # the evaluation below then runs the policy as it ships
        evaluation: dict[str, Any] = {}
        if run.eval_episodes > 0:
            evaluation = evaluate(GenericVLA(bundle), list(run.tasks), run.eval_episodes, train_cfg.seed,
                                  suite=run.suite)
            for task, rec in evaluation.items():
                if isinstance(rec, dict):
                    log.append({"eval_task": task, **rec})
        wall = time.perf_counter() - start
        grad_steps = stats["epochs_run"] * stats["steps_per_epoch"]
        summary = log.write_summary({
            "env": f"{run.suite}:generic", "agent": "generic_vla_bc", "steps": grad_steps,
            "return_last100": evaluation.get("mean_success_rate"), "steps_per_second": grad_steps / max(
                stats["train_s"], 1e-9), "wall_s": round(wall, 1), "checkpoint": str(ckpt), "weights_sha256": digest,
            "command": run.command, "demos": demo_stats, "train": training_facts["train"], "eval": evaluation,
        })
        write_json_atomic(Path(ckpt) / "metrics.json", {"command": run.command, "weights_sha256": digest,
                                                       "demos": demo_stats, "train": training_facts["train"],
                                                       "eval_test_split": evaluation})
        log.close()
        return summary
