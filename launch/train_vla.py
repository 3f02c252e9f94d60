"""Train Embodia's generic VLA head: collect noisy expert demos → cache inputs → BC → closed-loop eval.

    python -m launch.train_vla --out runs/generic_vla_cnn --backbone cnn --demos 1600 --workers 2 --threads 2 \
        --width 48 --epochs 30 --patience 5 --minutes 30 --shift-cells 4 --aux-weight 1 --eval-episodes 0 --seed 0

(the shipped checkpoint's command). Writes ``OUT/demos.npz`` (the input cache; reuse it with ``--demo-cache``),
``OUT/checkpoint/`` (head weights, sha256, manifest), ``OUT/metrics.jsonl`` (one record per epoch, then per
evaluated task) and ``OUT/summary.json`` (the ``embodia.train/1`` schema plus closed-loop success on held-out
test-split instances). Same seed, same demo count and an epoch-limited (not time-limited) run give
byte-identical weights.

This module declares and checks the options; the work lives in its layers: collection in
:mod:`agents.manipulation.demonstration_cache`, the training run in :mod:`sim_benchmarks.training.generic_vla`, the
closed-loop check in :mod:`sim_benchmarks.closed_loop`.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from argparse import Namespace
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from agents.manipulation.demonstrations import DEMO_SPLITS, DRIVEN_PARTS, DemoConfig
from agents.manipulation.vlabench_demonstrations import (
    BASE_TASKS,
    LABEL_FRAMES,
    PLACE_GOALS,
    VLABENCH_DRIVEN_PARTS,
    VLABenchDemoConfig,
)
from envs.errors import ConfigError, choice_error
from envs.manipulation.tasks import GENERIC_TASKS
from envs.manipulation.vlabench.tasks import TASKS as VLABENCH_TASKS
from launch.cli import ArgumentParser, main_guard, require_positive
from policies.manipulation.scripted_expert import DESCENTS
from policies.vla.checkpoint import load_checkpoint
from policies.vla.checkpoint_files import read_manifest
from policies.vla.model import BACKBONES, CNN_VISION, HeadConfig, VisionSpec
from policies.vla.training import MEMORY_SOURCES, TrainConfig
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.training.generic_vla import GenericVLARun, train_generic_vla

SUITES = ("personalized_simpler", "personalized_vlabench")
# Options that only the SIMPLER demonstrator knows, with their defaults: set on another suite they
# are an error rather than silently ignored.
SIMPLER_ONLY = {"split": DemoConfig.split, "expert_descent": DemoConfig.descent,
                "expert_regrasps": DemoConfig.regrasps, "drop_fraction": DemoConfig.drop_fraction}


def build_parser() -> ArgumentParser:
    """The command line: every option of a run, declared here and nowhere else."""
    p = ArgumentParser(prog="python -m launch.train_vla", description=__doc__.split("\n")[0])
    p.add_argument("--out", writes="folder", required=True, type=Path, help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--demos", type=int, default=600, min=1, max=1_000_000,
                   help="expert episodes to attempt (failures are dropped)")
    p.add_argument("--minutes", type=float, default=TrainConfig.max_minutes, min=0.001, max=10_080,
                   help="training time cap (a run it cuts is timing-dependent)")
    p.add_argument("--epochs", type=int, default=30, min=1, max=100_000)
    p.add_argument("--patience", type=int, default=TrainConfig.patience, min=0, max=100_000)
    p.add_argument("--batch-size", type=int, default=TrainConfig.batch_size, min=1, max=65_536)
    p.add_argument("--lr", type=float, default=TrainConfig.lr, min=0, max=10)
    p.add_argument("--suite", default="personalized_simpler",
                   help=f"whose generic tasks to learn: {' or '.join(SUITES)} (personalized_vlabench: the "
                        "in_distribution track's MuJoCo front view, expert targets relabelled as SIMPLER deltas)")
    p.add_argument("--noise", type=float, default=None, min=0, max=1,
                   help=f"DART noise std on executed xyz deltas (metres; default {DemoConfig.noise_std}, "
                        f"{VLABenchDemoConfig.noise_std} on personalized_vlabench)")
    p.add_argument("--expert-descent", default=DemoConfig.descent,
                   help="the demonstrator's descent rule: gated, funnel or coarse")
    p.add_argument("--expert-regrasps", type=int, default=DemoConfig.regrasps, min=0, max=100,
                   help="the demonstrator re-grasps an object it lost (slipped or dropped) up to this many times")
    p.add_argument("--drop-fraction", type=float, default=DemoConfig.drop_fraction, min=0, max=1,
                   help="share of expert demos whose executed gripper is forced open once the object is lifted, "
                        "so the data shows the drop being noticed and the object re-grasped (needs "
                        "--expert-regrasps >= 1)")
    p.add_argument("--split", default=DemoConfig.split,
                   help="demo instances: train, or train_extended (train + extra colour/pattern designs that are "
                        "never test designs)")
    p.add_argument("--tasks", default=None,
                   help="comma-separated generic tasks (default: "
                        f"{','.join(GENERIC_TASKS)} / {','.join(BASE_TASKS)} on personalized_vlabench)")
    p.add_argument("--backbone", default="cnn",
                   help=f"vision: {' or '.join(BACKBONES)} (cnn: a small CNN trained from scratch with the head)")
    p.add_argument("--input-size", type=int, default=None,
                   help=f"policy image size (square; default {VisionSpec.input_size}, {CNN_VISION.input_size} for cnn)")
    p.add_argument("--threads", type=int, default=1, min=1, max=256,
                   help="torch threads for training (same count, same weights)")
    p.add_argument("--width", type=int, default=HeadConfig.width, min=8, max=4096)
    p.add_argument("--chunk", type=int, default=HeadConfig.chunk, min=1, max=256)
    p.add_argument("--dropout", type=float, default=HeadConfig.dropout, min=0, max=0.999,
                   help="feature-map dropout in the head")
    p.add_argument("--shift-cells", type=float, default=TrainConfig.shift_cells, min=0, max=64,
                   help="random feature-map translation during training, in cells (0 = off)")
    p.add_argument("--aux-weight", type=float, default=0.0, min=0, max=1e6,
                   help="weight of the auxiliary target-offset loss (0 = no auxiliary output)")
    p.add_argument("--xy-weight", type=float, default=TrainConfig.xy_weight, min=0, max=1e6,
                   help="loss weight of dx, dy (gripper is 2)")
    p.add_argument("--memory", type=int, default=HeadConfig.memory,
                   help="objects localised on the first frame and remembered: 0 (none), 1 (the described object) "
                        "or 2 (+ the goal); needs the cnn backbone")
    p.add_argument("--words", type=int, default=HeadConfig.words,
                   help="memory heads: ground up to this many instruction words one by one (word-additive "
                        "heatmaps; 0 = the sentence vector conditions them)")
    p.add_argument("--heatmap-weight", type=float, default=TrainConfig.heatmap_weight, min=0, max=1e6,
                   help="memory heads: weight of the object heatmap loss (--aux-weight weighs their xy loss)")
    p.add_argument("--memory-noise", type=float, default=TrainConfig.memory_noise, min=0, max=1,
                   help="memory heads: noise (metres) on the remembered positions during training")
    p.add_argument("--memory-shift", type=float, default=TrainConfig.memory_shift, min=0, max=1,
                   help="memory heads: move the remembered target by this many metres (Gaussian, per axis) on "
                        "pre-grasp frames and the first action's label with it where the expert would follow "
                        "unclipped, so the action follows the memory (0 = off)")
    p.add_argument("--memory-source", default=TrainConfig.memory_source, choices=MEMORY_SOURCES,
                   help="memory heads: what the action MLP sees as the remembered positions in training: its own "
                        "detached estimate, or the true start positions plus --memory-noise (the estimate where "
                        "there is no true position)")
    p.add_argument("--switch-weight", type=float, default=TrainConfig.switch_weight, min=0, max=1e6,
                   help="multiplies the gripper loss on frames whose chunk holds a gripper switch (rare frames "
                        "that decide grasp and release; 1 = no extra weight)")
    p.add_argument("--release-frames", type=int, default=TrainConfig.release_frames, min=0, max=1000,
                   help="label the last N frames of demonstrations that end on a release as open (the env ends a "
                        "place episode on the step the gripper opens, so the expert's one open frame looks like the "
                        "closed frame before it; 0 = the expert's labels)")
    p.add_argument("--grasp-frames", type=int, default=TrainConfig.grasp_frames, min=0, max=1000,
                   help="label the N frames before each demonstration's first close as closed (the expert closes on "
                        "the step the hand arrives, which looks like the frames before it; 0 = the expert's labels)")
    p.add_argument("--gripper-classifier", action="store_true",
                   help="a separate gripper classifier beside the action MLP (the logit of closed per chunk step, "
                        "class-balanced cross-entropy) instead of regressing the gripper with the other dimensions")
    p.add_argument("--label-frame", default=VLABenchDemoConfig.label_frame, choices=LABEL_FRAMES,
                   help="personalized_vlabench: deltas from the commanded pose (command) or from the measured hand "
                        "pose (hand; recorded in the checkpoint so the adapter adds them to the hand)")
    p.add_argument("--look-randomisation", type=float, default=VLABenchDemoConfig.look_randomisation, min=0, max=1,
                   help="personalized_vlabench: share of demos with a randomised room look (plain/gradient "
                        "table and floor, random light; never the unseen_texture track's textures)")
    p.add_argument("--workers", type=int, default=1, min=1, max=64, help="demo collection processes")
    p.add_argument("--demo-cache", type=Path, default=None, help="reuse a demos.npz instead of collecting")
    p.add_argument("--demo-blocks", type=Path, default=None,
                   help="folder of resumable demo blocks (default OUT/demo_blocks); runs may share one")
    p.add_argument("--dagger", type=Path, default=None,
                   help="DAgger: a generic-VLA checkpoint folder that executes the approach + descent of extra "
                        "episodes while the expert labels them (added to the expert demos)")
    p.add_argument("--dagger-demos", type=int, default=0, min=0, max=1_000_000,
                   help="episodes driven by --dagger (0 = none)")
    p.add_argument("--dagger-part", default="approach",
                   help="what --dagger executes: approach (+ descent, all tasks), carry (+ lower and release, "
                        "place tasks only; the expert grasps and lifts) or, on personalized_vlabench, all (every "
                        "phase); comma-separated parts share --dagger-demos evenly")
    p.add_argument("--init", type=Path, default=None,
                   help="fine-tune: start from this checkpoint's weights, head config and normalisation (the "
                        "head-shape options are taken from it); its attribute detectors are carried over")
    p.add_argument("--eval-episodes", type=int, default=10, min=0, max=10_000,
                   help="closed-loop episodes per task (0 = skip)")
    p.add_argument("--checkpoint-out", writes="folder", type=Path, default=None,
                   help="checkpoint folder (default OUT/checkpoint)")
    return p


def _check_tasks(args: Namespace, vlabench: bool) -> list[str]:
    """The generic tasks to learn, each known to ``--suite``."""
    known_tasks = VLABENCH_TASKS if vlabench else GENERIC_TASKS
    default_tasks = BASE_TASKS if vlabench else tuple(GENERIC_TASKS)
    tasks = [t for t in (args.tasks or ",".join(default_tasks)).split(",") if t]
    if not tasks:
        raise ConfigError(f"--tasks names no task; valid: {', '.join(known_tasks)}")
    for t in tasks:
        if t not in known_tasks:
            raise ConfigError(f"unknown generic task {t!r} for {args.suite}; valid: {', '.join(known_tasks)}")
    return tasks


def _check_options(args: Namespace, vlabench: bool) -> None:
    """Options that only one suite knows, and the ranges and combinations the parser cannot check alone (sets
    the suite's default ``--noise`` and the backbone's default ``--input-size``)."""
    if vlabench:
        for name, default in SIMPLER_ONLY.items():
            if getattr(args, name) != default:
                raise ConfigError(f"--{name.replace('_', '-')} applies to --suite personalized_simpler only, "
                                  f"got {getattr(args, name)} with --suite {args.suite}")
    if not vlabench and args.look_randomisation != VLABenchDemoConfig.look_randomisation:
        raise ConfigError(f"--look-randomisation applies to --suite personalized_vlabench only, got "
                          f"{args.look_randomisation} with --suite {args.suite}")
    if not vlabench and args.label_frame != VLABenchDemoConfig.label_frame:
        raise ConfigError(f"--label-frame applies to --suite personalized_vlabench only, got {args.label_frame} "
                          f"with --suite {args.suite}")
    if args.switch_weight < 1.0:
        raise ConfigError(f"--switch-weight must be >= 1, got {args.switch_weight}")
    if not 0.0 <= args.look_randomisation <= 1.0:
        raise ConfigError(f"--look-randomisation must be in [0, 1], got {args.look_randomisation}")
    if args.noise is None:
        args.noise = VLABenchDemoConfig.noise_std if vlabench else DemoConfig.noise_std
    if args.noise < 0:
        raise ConfigError(f"--noise must be >= 0, got {args.noise}")
    require_positive(args, ("demos", "epochs", "batch_size", "workers", "chunk", "width", "threads"))
    if not 0.0 <= args.dropout < 1.0 or args.shift_cells < 0:
        raise ConfigError(f"--dropout must be in [0, 1) and --shift-cells >= 0, got {args.dropout}, "
                          f"{args.shift_cells}")
    if args.memory not in (0, 1, 2) or args.heatmap_weight < 0 or args.memory_noise < 0:
        raise ConfigError(f"--memory must be 0, 1 or 2 and --heatmap-weight, --memory-noise >= 0, got {args.memory}, "
                          f"{args.heatmap_weight}, {args.memory_noise}")
    if not 0 <= args.words <= 32 or (args.words and not args.memory):
        raise ConfigError(f"--words must be in 0..32 and needs --memory > 0, got --words {args.words}, "
                          f"--memory {args.memory}")
    if args.memory and args.backbone != "cnn":
        raise ConfigError(f"--memory needs --backbone cnn, got {args.backbone}")
    if args.minutes <= 0:
        raise ConfigError(f"--minutes must be > 0, got {args.minutes}")
    if args.width % 8:  # GroupNorm over 8 groups
        raise ConfigError(f"--width must be a multiple of 8, got {args.width}")
    if args.backbone not in BACKBONES:
        raise choice_error("--backbone", args.backbone, BACKBONES)
    if args.input_size is None:
        args.input_size = (CNN_VISION if args.backbone == "cnn" else VisionSpec()).input_size
    if args.input_size % 16 or not 64 <= args.input_size <= 320:
        raise ConfigError(f"--input-size must be a multiple of 16 in [64, 320], got {args.input_size}")
    if args.expert_descent not in DESCENTS:
        raise choice_error("--expert-descent", args.expert_descent, DESCENTS)
    if args.split not in DEMO_SPLITS:
        raise choice_error("--split", args.split, DEMO_SPLITS)


def _demo_configs(args: Namespace, tasks: list[str], vlabench: bool
                  ) -> tuple[DemoConfig | VLABenchDemoConfig, list[DemoConfig | VLABenchDemoConfig]]:
    """The expert demonstrations' configuration and those of the ``--dagger``-driven episodes (the driver's
    checkpoint verified here, so a bad folder fails before anything is collected)."""
    demo_cfg: DemoConfig | VLABenchDemoConfig
    if vlabench:
        demo_cfg = VLABenchDemoConfig(tasks=tuple(tasks), episodes=args.demos, seed=args.seed, noise_std=args.noise,
                                      look_randomisation=args.look_randomisation, label_frame=args.label_frame)
    else:
        demo_cfg = DemoConfig(tasks=tuple(tasks), episodes=args.demos, seed=args.seed, noise_std=args.noise,
                              descent=args.expert_descent, split=args.split, regrasps=args.expert_regrasps,
                              drop_fraction=args.drop_fraction)
    if (args.dagger is None) != (args.dagger_demos <= 0):
        raise ConfigError(f"--dagger and --dagger-demos > 0 go together, got --dagger {args.dagger} and "
                          f"--dagger-demos {args.dagger_demos}")
    parts = [p.strip() for p in args.dagger_part.split(",") if p.strip()]
    known_parts = VLABENCH_DRIVEN_PARTS if vlabench else DRIVEN_PARTS
    for part in parts or [args.dagger_part]:
        if part not in known_parts:
            raise choice_error("--dagger-part", part, sorted(known_parts))
    if len(set(parts)) != len(parts):
        raise ConfigError(f"--dagger-part names a part twice: {args.dagger_part!r}")
    driven_cfgs: list[DemoConfig | VLABenchDemoConfig] = []
    if args.dagger is None:
        return demo_cfg, driven_cfgs
    load_checkpoint(args.dagger)
    driver_sha = read_manifest(args.dagger)["weights_sha256"]
    place_tasks = tuple(t for t in tasks if (VLABENCH_TASKS[t].goal in PLACE_GOALS if vlabench
                                             else GENERIC_TASKS[t].kind != "pick"))
    if args.dagger_demos < len(parts):
        raise ConfigError(f"--dagger-demos must be at least the number of --dagger-part parts ({len(parts)}), "
                          f"got {args.dagger_demos}")
    for k, part in enumerate(parts):
        driven_tasks = place_tasks if part == "carry" else tuple(tasks)
        if not driven_tasks:
            raise ConfigError(f"--dagger-part carry needs a place task in --tasks, got {args.tasks}")
        # --dagger-demos is split evenly over the parts (the first parts take any remainder)
        count = args.dagger_demos // len(parts) + (k < args.dagger_demos % len(parts))
        driven_cfgs.append(replace(demo_cfg, tasks=driven_tasks, episodes=count, driver=str(args.dagger),
                                   driver_sha256=driver_sha, driven_part=part))
    return demo_cfg, driven_cfgs


def _init_checkpoint(args: Namespace, vision: VisionSpec) -> Any:
    """The ``--init`` checkpoint to fine-tune (None: train from scratch), checked against the head asked for."""
    init = load_checkpoint(args.init) if args.init is not None else None
    if init is not None and args.gripper_classifier and not init.config.gripper_classifier:
        raise ConfigError(f"--gripper-classifier changes the head's shape; --init {str(args.init)!r} has none "
                          "(train from scratch instead)")
    if init is not None and init.config.vision != vision:
        raise ConfigError(f"--init {str(args.init)!r} was trained on {init.config.vision.backbone} at "
                          f"{init.config.vision.input_size}px, not {vision.backbone} at {vision.input_size}px")
    return init


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse and check every option, then collect (or load) demos, train, evaluate, write checkpoint + metrics
    (:func:`sim_benchmarks.training.generic_vla.train_generic_vla`); returns the summary."""
    args = build_parser().parse_args(argv)
    check_out_dir(args.out)  # usable before any other check or work
    if args.checkpoint_out is not None:
        check_out_dir(args.checkpoint_out, "--checkpoint-out")
    if args.suite not in SUITES:
        raise choice_error("--suite", args.suite, SUITES)
    vlabench = args.suite == "personalized_vlabench"
    tasks = _check_tasks(args, vlabench)
    _check_options(args, vlabench)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    vision = replace(CNN_VISION if args.backbone == "cnn" else VisionSpec(), input_size=args.input_size)
    demo_cfg, driven_cfgs = _demo_configs(args, tasks, vlabench)
    init = _init_checkpoint(args, vision)
    head = HeadConfig(vision=vision, width=args.width, chunk=args.chunk, dropout=args.dropout,
                      aux_dim=2 if args.aux_weight > 0 and not args.memory else 0, memory=args.memory,
                      words=args.words, gripper_classifier=args.gripper_classifier)
    train = TrainConfig(head=head, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                        patience=args.patience, max_minutes=args.minutes, seed=args.seed,
                        shift_cells=args.shift_cells, xy_weight=args.xy_weight, aux_weight=args.aux_weight,
                        heatmap_weight=args.heatmap_weight, memory_noise=args.memory_noise,
                        memory_source=args.memory_source, switch_weight=args.switch_weight,
                        release_frames=args.release_frames, grasp_frames=args.grasp_frames,
                        memory_shift=args.memory_shift)
    command = "python -m launch.train_vla " + " ".join(shlex.quote(a) for a in (argv if argv is not None
                                                                                 else sys.argv[1:]))
    job = GenericVLARun(out=args.out, suite=args.suite, tasks=tuple(tasks), demo_cfg=demo_cfg, vision=vision,
                        head=head, train=train, command=command, driven_cfgs=tuple(driven_cfgs),
                        workers=args.workers, demo_cache=args.demo_cache, demo_blocks=args.demo_blocks,
                        words=args.words, label_frame=args.label_frame, init=args.init,
                        eval_episodes=args.eval_episodes, checkpoint_out=args.checkpoint_out)
    # only once every option has been checked: bad input writes nothing
    return train_generic_vla(job, init_bundle=init, started=start)


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point (ConfigError → one stderr line, exit 2)."""
    summary = run(argv)
    ev = summary.get("eval") or {}
    print(json.dumps({"checkpoint": summary["checkpoint"], "sha256": summary["weights_sha256"],
                      "mean_success_rate": ev.get("mean_success_rate"), "wall_s": summary["wall_s"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
