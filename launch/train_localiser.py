"""Train the generic VLA's base localiser for one head checkpoint and optionally attach it to that checkpoint.

    python -m launch.train_localiser --checkpoint checkpoints/generic_vla --out runs/localiser --scenes 1000 \
        --eval-scenes 100 --workers 2 --threads 2 --epochs 8 --seed 0 --attach

Collects first frames of the four generic tasks on train-split + extra designs (``--scenes`` per task; resumable:
finished blocks under ``OUT/scene_blocks/`` are reused), computes the checkpoint's own inputs for them (the
attribute detectors' vote and the head's object heatmap, exactly as at inference), trains the localiser with a
progress bar, and after every epoch measures on held-out *test-split* scenes (``--eval-scenes`` per task;
measurement only) how far the remembered image position is from the described object's projected base, with and
without the localiser. Writes ``OUT/localiser.pt``, ``OUT/localiser.json`` (the manifest entry), ``OUT/metrics.jsonl``
and ``OUT/summary.json``; ``--attach`` records the localiser in the checkpoint's manifest. Same scenes, checkpoint,
seed and threads → the same weights.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from envs.manipulation.tasks import GENERIC_TASKS
from launch.cli import ArgumentParser, main_guard
from launch.train_attributes import TEST_SEED_OFFSET, add_scene_arguments, check_scene_arguments, scenes
from policies.vla.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from policies.vla.checkpoint_files import read_manifest
from policies.vla.localiser import (
    LocaliserConfig,
    LocaliserTrainConfig,
    attach_localiser,
    localiser_inputs,
    predict_uv,
    save_localiser,
    train_localiser,
)
from sim_benchmarks.progress import progress_bar
from sim_benchmarks.results_folder import FolderLock, check_out_dir
from sim_benchmarks.train_log import TrainLog

CAMERA_PX = 112  # image-position errors are reported in pixels of the 224² camera image ([-1, 1] spans 224 px)


def image_errors(uv: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Median / 90th-percentile distance in camera pixels and the share within 4 px (about 1.5 cm on the table)."""
    d = np.linalg.norm(uv - truth, axis=1) * CAMERA_PX
    return {"median_px": round(float(np.median(d)), 2), "p90_px": round(float(np.percentile(d, 90)), 2),
            "within_4px": round(float(np.mean(d <= 4.0)), 4)}


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m launch.train_localiser", description=__doc__.split("\n")[0])
    add_scene_arguments(p, LocaliserTrainConfig.epochs, LocaliserTrainConfig.batch_size, LocaliserConfig.width)
    p.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT,
                   help="head checkpoint with attribute detectors whose memory the localiser refines")
    p.add_argument("--attach", action="store_true", help="record the trained localiser in --checkpoint")
    return p


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse, collect, prepare, train, measure, write; returns the summary."""
    args = build_parser().parse_args(argv)
    check_out_dir(args.out)  # usable before any other check or work
    check_scene_arguments(args)
    bundle = load_checkpoint(args.checkpoint)  # fail before the work, not after
    if bundle.grounder is None or not bundle.config.memory:
        raise ConfigError(f"checkpoint {str(args.checkpoint)!r} needs an object memory and attribute detectors "
                          f"for a base localiser")
    from perception.text_encoder import load_text_encoder

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    out: Path = args.out
    cfg = LocaliserConfig(width=args.width)
    head_size = bundle.config.vision.input_size
    with FolderLock(out):  # one writer per output folder, for the whole run
        blocks = out / "scene_blocks"
        with progress_bar(2 * len(GENERIC_TASKS) if args.eval_scenes else len(GENERIC_TASKS), "scenes") as advance:
            train = scenes(args.split, args.scenes, args.seed, cfg.input_size, args.workers, blocks, advance, head_size)
            held = (scenes("test", args.eval_scenes, args.seed + TEST_SEED_OFFSET, cfg.input_size, args.workers, blocks,
                           advance, head_size) if args.eval_scenes else None)
        collect_s = time.perf_counter() - start
        text_encoder = load_text_encoder()
        t0 = time.perf_counter()
        train_in = localiser_inputs(bundle, train["images"], train["head_images"], list(train["instructions"]),
                                    text_encoder, cfg.grid)
        held_in = (localiser_inputs(bundle, held["images"], held["head_images"], list(held["instructions"]),
                                    text_encoder, cfg.grid) if held is not None else None)
        prepare_s = time.perf_counter() - t0
        baseline = image_errors(held_in["head_uv"], held["target_uv"]) if held is not None else {}
        tcfg = LocaliserTrainConfig(epochs=args.epochs, batch_size=args.batch_size, seed=args.seed)
        log = TrainLog(out)
        history: list[dict[str, Any]] = []
        with progress_bar(args.epochs, "training base localiser") as advance:
            def on_epoch(epoch: int, loss: float, net: Any) -> None:
                rec: dict[str, Any] = {"epoch": epoch, "loss": round(loss, 5)}
                if held is not None:
                    rec["test"] = image_errors(predict_uv(net, cfg, held["images"], held_in["maps"]), held["target_uv"])
                history.append(rec)
                log.append(rec)
                advance(1)

            t1 = time.perf_counter()
            net = train_localiser(train["images"], train_in["maps"], train["target_uv"], cfg, tcfg, on_epoch=on_epoch)
            train_s = time.perf_counter() - t1
        command = "python -m launch.train_localiser " + " ".join(
            shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
        facts = {"command": command, "seed": args.seed, "split": args.split, "scenes": int(len(train["images"])),
                 "head_sha256": read_manifest(args.checkpoint)["weights_sha256"], "collect_s": round(collect_s, 1),
                 "prepare_s": round(prepare_s, 1), "train_s": round(train_s, 1), "train_config": asdict(tcfg),
                 "test_without_localiser": baseline, "final": history[-1] if history else {}}
        entry = save_localiser(net, cfg, out, training=facts)
        write_json_atomic(out / "localiser.json", entry)
        if args.attach:
            attach_localiser(args.checkpoint, out)
        final = history[-1].get("test", {}) if history else {}
        summary = log.write_summary({
            "env": "personalized_simpler:generic", "agent": "generic_vla_localiser", "steps": args.epochs,
            "return_last100": final.get("within_4px"), "steps_per_second": args.epochs / max(train_s, 1e-9),
            "wall_s": round(time.perf_counter() - start, 1), "weights_sha256": entry["sha256"], "command": command,
            "attached_to": str(args.checkpoint) if args.attach else None, "test_without_localiser": baseline,
            "history": history,
        })
        log.close()
        return summary


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point (ConfigError → one stderr line, exit 2)."""
    summary = run(argv)
    print(json.dumps({"sha256": summary["weights_sha256"], "test_within_4px": summary["return_last100"],
                      "without_localiser": summary["test_without_localiser"].get("within_4px"),
                      "attached_to": summary["attached_to"], "wall_s": summary["wall_s"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
