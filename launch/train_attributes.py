"""Train the generic VLA's attribute detectors (per-word grounding) and optionally attach them to a checkpoint.

    python -m launch.train_attributes --out runs/attributes --scenes 1000 --eval-scenes 100 --workers 2 \
        --threads 2 --epochs 10 --seed 0 --attach checkpoints/generic_vla --weight 4

Collects first frames of the four generic tasks on train-split + extra designs (``--scenes`` per task; resumable:
finished blocks under ``OUT/scene_blocks/`` are reused), trains the detectors with a progress bar, measures
object-level grounding on held-out *test-split* scenes after every epoch (``--eval-scenes`` per task; measurement
only), and writes ``OUT/attributes.pt``, ``OUT/attributes.json`` (the manifest entry: sha256, config, training
facts), ``OUT/metrics.jsonl`` and ``OUT/summary.json``. ``--attach CHECKPOINT`` copies the detectors into a head
checkpoint folder and records them (with ``--weight``) in its manifest. Same scenes, seed and threads → the same
weights.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.manipulation.attribute_scenes import SceneConfig, collect_scenes, object_cells
from envs.atomic_io import atomic_path, write_json_atomic
from envs.errors import ConfigError
from envs.manipulation.tasks import GENERIC_TASKS
from envs.statistics import wilson_ci
from launch.cli import ArgumentParser, main_guard, require_positive
from policies.vla.attributes import (
    AttributeConfig,
    AttributeGrounder,
    AttributeTrainConfig,
    attach_attributes,
    grounding_accuracy,
    save_attributes,
    train_attributes,
)
from sim_benchmarks.progress import progress_bar
from sim_benchmarks.results_folder import FolderLock, check_out_dir
from sim_benchmarks.train_log import TrainLog

TEST_SEED_OFFSET = 700_000  # held-out test-split scenes get seeds no training scene uses


def _block(args: tuple[SceneConfig, Path]) -> Path:
    cfg, path = args
    if not path.is_file():  # a finished block of an interrupted run is reused as is
        data = collect_scenes(cfg)
        with atomic_path(path) as tmp:
            np.savez(tmp, **data)
    return path


def scenes(split: str, per_task: int, seed: int, size: int, workers: int, folder: Path,
           on_block: Any = None, head_size: int = 0) -> dict[str, np.ndarray]:
    """Every generic task's scenes of one split, merged (collected in parallel, one block per task); with
    ``head_size`` the frames at the VLA head's input size too (``SceneConfig.head_size``)."""
    folder.mkdir(parents=True, exist_ok=True)
    suffix = f"_h{head_size}" if head_size else ""
    jobs = [(SceneConfig(task=t, split=split, scenes=per_task, seed=seed + 100_000 * k, input_size=size,
                         head_size=head_size),
             folder / f"{split}_{t}_{seed + 100_000 * k}_{per_task}_{size}{suffix}.npz")
            for k, t in enumerate(GENERIC_TASKS)]
    paths = []
    with ProcessPoolExecutor(max_workers=workers) if workers > 1 else nullcontext() as pool:
        for path in (pool.map if pool is not None else map)(_block, jobs):
            paths.append(path)
            if on_block is not None:
                on_block(1)
    parts = []
    for p in paths:
        with np.load(p) as z:
            parts.append({k: z[k] for k in z.files})
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def add_scene_arguments(p: ArgumentParser, epochs: int, batch_size: int, width: int) -> None:
    """The options every first-frame trainer shares (this one and ``launch.train_localiser``): output, seed, scene
    counts and split, epochs, batch size, network width, workers and threads."""
    p.add_argument("--out", writes="folder", required=True, type=Path, help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scenes", type=int, default=1000, help="training scenes per generic task")
    p.add_argument("--eval-scenes", type=int, default=100, help="held-out test-split scenes per task (0 = none)")
    p.add_argument("--split", default="train_extended", help="training designs: train or train_extended")
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--width", type=int, default=width)
    p.add_argument("--workers", type=int, default=1, help="scene collection processes")
    p.add_argument("--threads", type=int, default=1, help="torch threads for training (same count, same weights)")


def check_scene_arguments(args: Any) -> None:
    """ConfigError (exit 2) for a bad shared option, before any work."""
    require_positive(args, ("scenes", "epochs", "batch_size", "workers", "threads"))
    if args.eval_scenes < 0:
        raise ConfigError(f"--eval-scenes must be >= 0, got {args.eval_scenes}")
    if args.split not in ("train", "train_extended"):
        raise ConfigError(f"--split {args.split!r} is not a training split; valid: train, train_extended")
    if args.width % 8 or args.width < 8:
        raise ConfigError(f"--width must be a positive multiple of 8, got {args.width}")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m launch.train_attributes", description=__doc__.split("\n")[0])
    add_scene_arguments(p, AttributeTrainConfig.epochs, AttributeTrainConfig.batch_size, AttributeConfig.width)
    p.add_argument("--input-size", type=int, default=AttributeConfig.input_size)
    p.add_argument("--weight", type=float, default=AttributeConfig.weight,
                   help="heatmap weight stored with the detectors (logit units per nat)")
    p.add_argument("--attach", type=Path, default=None, help="a head checkpoint folder to attach the detectors to")
    return p


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse, collect, train, measure, write; returns the summary."""
    args = build_parser().parse_args(argv)
    check_out_dir(args.out)  # usable before any other check or work
    check_scene_arguments(args)
    if args.input_size % 16 or not 64 <= args.input_size <= 224:
        raise ConfigError(f"--input-size must be a multiple of 16 in [64, 224], got {args.input_size}")
    if args.weight < 0:
        raise ConfigError(f"--weight must be >= 0, got {args.weight}")
    if args.attach is not None:
        from policies.vla.checkpoint_files import read_manifest

        read_manifest(args.attach)  # fail before the work, not after
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    out: Path = args.out
    with FolderLock(out):  # one writer per output folder, for the whole run
        blocks = out / "scene_blocks"
        with progress_bar(2 * len(GENERIC_TASKS) if args.eval_scenes else len(GENERIC_TASKS), "scenes") as advance:
            train = scenes(args.split, args.scenes, args.seed, args.input_size, args.workers, blocks, advance)
            held = (scenes("test", args.eval_scenes, args.seed + TEST_SEED_OFFSET, args.input_size, args.workers,
                           blocks, advance) if args.eval_scenes else None)
        collect_s = time.perf_counter() - start
        cfg = AttributeConfig(input_size=args.input_size, width=args.width, weight=args.weight)
        tcfg = AttributeTrainConfig(epochs=args.epochs, batch_size=args.batch_size, seed=args.seed)
        log = TrainLog(out)
        cells = object_cells(held) if held is not None else None

        def measure(net: Any) -> dict[str, Any]:
            if held is None:
                return {}
            hits, n = grounding_accuracy(AttributeGrounder(net, cfg), held["images"], list(held["instructions"]), cells,
                                         list(held["targets"]))
            lo, hi = wilson_ci(hits, n)
            return {"test_grounding": hits / max(n, 1), "test_hits": hits, "test_scenes": n, "test_ci95": [lo, hi]}

        history: list[dict[str, Any]] = []
        with progress_bar(args.epochs, "training attribute detectors") as advance:
            def on_epoch(epoch: int, loss: float, net: Any) -> None:
                rec = {"epoch": epoch, "loss": round(loss, 5), **measure(net)}
                history.append(rec)
                log.append(rec)
                advance(1)

            t0 = time.perf_counter()
            net = train_attributes(train["images"], train["labels"], cfg, tcfg, on_epoch=on_epoch)
            train_s = time.perf_counter() - t0
        command = "python -m launch.train_attributes " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        facts = {"command": command, "seed": args.seed, "split": args.split, "scenes": int(len(train["images"])),
                 "collect_s": round(collect_s, 1), "train_s": round(train_s, 1), "train_config": asdict(tcfg),
                 "final": history[-1] if history else {}}
        entry = save_attributes(net, cfg, out, training=facts)
        write_json_atomic(out / "attributes.json", entry)
        attached = None
        if args.attach is not None:
            attach_attributes(args.attach, out)
            attached = str(args.attach)
        summary = log.write_summary({
            "env": "personalized_simpler:generic", "agent": "generic_vla_attributes", "steps": args.epochs,
            "return_last100": (history[-1].get("test_grounding") if history else None),
            "steps_per_second": args.epochs / max(train_s, 1e-9), "wall_s": round(time.perf_counter() - start, 1),
            "weights_sha256": entry["sha256"], "command": command, "attached_to": attached, "history": history,
        })
        log.close()
        return summary


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point (ConfigError → one stderr line, exit 2)."""
    summary = run(argv)
    print(json.dumps({"sha256": summary["weights_sha256"], "test_grounding": summary["return_last100"],
                      "attached_to": summary["attached_to"], "wall_s": summary["wall_s"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
