"""Per-step inference time of the generic VLA on one CPU core (target ≤ 60 ms for a 224×224 camera image).

    python -m sim_benchmarks.studies.generic_vla.vla_speed --steps 50 --repeats 5 --out runs/vla_speed.json

Times ``GenericVLA.act`` on 224×224 observations (resize + vision + FiLM head), for the shipped checkpoint and
for heads of either backbone at other policy input sizes (random weights: the time does not depend on them):
``mobilenet_v2_imagenet`` (frozen prefix) and ``cnn`` (the from-scratch stem).
Prints and saves medians over repeats; the machine is shared, so compare rows of one run, not runs.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from policies.vla.checkpoint import DEFAULT_CHECKPOINT, HeadBundle, load_checkpoint
from policies.vla.checkpoint_files import freeze
from policies.vla.generic import GenericVLA
from policies.vla.model import CNN_VISION, FiLMActionHead, HeadConfig, VisionSpec
from sim_benchmarks.cli import ArgumentParser, main_guard


def _random_bundle(input_size: int, state_dim: int = 6, backbone: str = "mobilenet_v2_imagenet",
                   width: int = HeadConfig.width) -> HeadBundle:
    vision = replace(CNN_VISION if backbone == "cnn" else VisionSpec(), input_size=input_size)
    cfg = HeadConfig(vision=vision, state_dim=state_dim, width=width)
    torch.manual_seed(0)
    return HeadBundle(cfg, freeze(FiLMActionHead(cfg)), np.zeros(7, np.float32), np.ones(7, np.float32),
                      np.zeros(state_dim, np.float32), np.ones(state_dim, np.float32))


def time_policy(policy: GenericVLA, steps: int, repeats: int, image_size: int = 224, seed: int = 0) -> dict[str, Any]:
    """Median / min milliseconds per ``act`` over ``repeats`` runs of ``steps`` steps (after a warm-up)."""
    rng = np.random.default_rng(seed)
    obs = {"image": rng.integers(0, 256, (image_size, image_size, 3), dtype=np.uint8),
           "ee_state": np.zeros(6, np.float32), "instruction": "pick up the blue striped mug"}
    policy.reset(obs["instruction"], {})
    for _ in range(3):
        policy.act(obs)
    per_run, first = [], []
    for _ in range(repeats):
        # A new episode's first act: object-memory heads localise and remember the objects there (once).
        policy.reset(obs["instruction"], {})
        t0 = time.perf_counter()
        policy.act(obs)
        first.append(1000.0 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        for _ in range(steps):
            policy.act(obs)
        per_run.append(1000.0 * (time.perf_counter() - t0) / steps)
    return {"ms_per_step_median": statistics.median(per_run), "ms_per_step_min": min(per_run), "runs": per_run,
            "first_step_ms_median": statistics.median(first)}


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.generic_vla.vla_speed", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--sizes", default="128,160,224", help="MobileNetV2 input sizes to time with random heads")
    p.add_argument("--cnn-sizes", default="96,128", help="CNN-backbone input sizes to time with random heads")
    p.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    p.add_argument("--out", writes="file", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)  # one core, as in rollout workers
    rows: dict[str, Any] = {}
    if (args.checkpoint / "manifest.json").is_file():
        bundle = load_checkpoint(args.checkpoint)
        vision = bundle.config.vision
        rows[f"shipped ({vision.backbone} {vision.input_size})"] = time_policy(GenericVLA(bundle), args.steps,
                                                                              args.repeats)
        if bundle.localiser is not None:  # what the first step's base localisation costs
            rows["shipped, localiser off"] = time_policy(GenericVLA(bundle, localiser=False), args.steps,
                                                         args.repeats)
    for size in (int(s) for s in args.sizes.split(",") if s):
        rows[f"mobilenet input {size}"] = time_policy(GenericVLA(_random_bundle(size)), args.steps, args.repeats)
    for size in (int(s) for s in args.cnn_sizes.split(",") if s):
        rows[f"cnn input {size}"] = time_policy(GenericVLA(_random_bundle(size, backbone="cnn", width=48)),
                                                args.steps, args.repeats)
    result = {"camera_image": "224x224", "threads": 1, "steps": args.steps, "repeats": args.repeats, "rows": rows}
    for name, r in rows.items():
        print(f"{name:28s} {r['ms_per_step_median']:7.2f} ms/step (min {r['ms_per_step_min']:.2f}; an episode's "
              f"first step {r['first_step_ms_median']:.2f})")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
