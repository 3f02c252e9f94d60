"""Train Embodia's generic VLA head: collect noisy expert demos → cache inputs → BC → closed-loop eval.

    python -m launch.train_vla --out runs/generic_vla_cnn --backbone cnn --demos 1600 --workers 2 --threads 2 \
        --width 48 --epochs 30 --patience 5 --minutes 30 --shift-cells 4 --aux-weight 1 --eval-episodes 0 --seed 0

(the shipped checkpoint's command). Writes ``OUT/demos.npz`` (the input cache; reuse it with ``--demo-cache``),
``OUT/checkpoint/`` (head weights, sha256, manifest), ``OUT/metrics.jsonl`` (one record per epoch, then per
evaluated task) and ``OUT/summary.json`` (the ``embodia.train/1`` schema plus closed-loop success on held-out
test-split instances). Same seed, same demo count and an epoch-limited (not time-limited) run give
byte-identical weights.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.demonstrations import DEMO_SPLITS, DRIVEN_PARTS, DemoConfig, Demos, collect_demos
from agents.episodic import run_episode
from agents.vlabench_demonstrations import (
    BASE_TASKS,
    GENERIC_TRACK,
    LABEL_FRAMES,
    PLACE_GOALS,
    VLABENCH_DRIVEN_PARTS,
    VLABenchDemoConfig,
    collect_vlabench_demos,
)
from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from envs.manipulation.env import make_env
from envs.manipulation.tasks import GENERIC_TASKS
from envs.manipulation.vlabench.tasks import TASKS as VLABENCH_TASKS
from launch.cli import ArgumentParser, main_guard, require_positive
from perception.text_encoder import load_text_encoder
from policies.scripted_expert import DESCENTS
from policies.vla.attributes import attach_attributes
from policies.vla.checkpoint import load_checkpoint, save_checkpoint
from policies.vla.checkpoint_files import read_manifest
from policies.vla.generic import GenericVLA, encode_words
from policies.vla.model import BACKBONES, CNN_VISION, HeadConfig, VisionSpec
from policies.vla.training import MEMORY_SOURCES, DemoArrays, TrainConfig, epoch_steps, train_head
from policies.vla.vision_input import image_features
from sim_benchmarks.progress import progress_bar
from sim_benchmarks.results_folder import FolderLock, check_out_dir
from sim_benchmarks.train_log import TrainLog

CACHE_FORMAT = "embodia.vla_demos/1"
SUITES = ("personalized_simpler", "personalized_vlabench")
# Options that only the SIMPLER demonstrator knows, with their defaults: set on another suite they
# are an error rather than silently ignored.
SIMPLER_ONLY = {"split": "train",
                "expert_descent": "gated", "expert_regrasps": 0, "drop_fraction": 0.0}


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
    tmp = path.with_name(path.stem + ".tmp.npz")
    extra = {"images": images} if images is not None else {}
    if demos.targets:
        extra["targets"] = np.stack(demos.targets).astype(np.float32)
    if demos.goals:
        extra["goals"] = np.stack(demos.goals).astype(np.float32)
    if demos.uv:
        extra["uv"] = np.stack(demos.uv).astype(np.float32)
    np.savez_compressed(tmp, **extra, features=feats,
             states=np.asarray(demos.states, np.float32).reshape(len(demos), -1),
             actions=np.asarray(demos.actions, np.float32).reshape(len(demos), -1),
             episode=np.asarray(demos.episode, np.int64),
             meta=json.dumps({"instructions": demos.instructions, "tasks": demos.task, "episodes": demos.episodes}))
    tmp.replace(path)


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


BLOCK = 8  # episodes per saved block: an interrupted collection resumes from the last finished block


def collect(cfg: DemoConfig, vision: VisionSpec, workers: int, block_dir: Path) -> Demos:
    """Collect demos in blocks saved under ``block_dir`` (resumable), in ``workers`` processes when > 1.

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
    with progress_bar(cfg.episodes, "demonstrations") as advance, ExitStack() as stack:
        if workers <= 1:
            parts = map(_collect_block, jobs)
        else:
            parts = stack.enter_context(ProcessPoolExecutor(workers)).map(_collect_block, jobs)
        for part in parts:
            merged.extend(part)
            advance(len(part.episodes))
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


def evaluate(policy: GenericVLA, tasks: list[str], episodes: int, seed: int, split: str = "test",
             suite: str = "personalized_simpler") -> dict[str, Any]:
    """Closed-loop success / correct-object rates per generic task on ``split`` instances.

    On ``personalized_vlabench`` the generic track (train designs; unseen seeds) is the only one a generic
    policy can be asked about without a personal object, so ``split`` is not used there.
    """
    out: dict[str, Any] = {}
    total = max(1, episodes * len(tasks))
    label = split if suite == "personalized_simpler" else GENERIC_TRACK
    with progress_bar(total, f"closed-loop eval ({label})") as advance:
        for task in tasks:
            if suite == "personalized_simpler":
                env = make_env(task, {"split": split})
                metrics = None
            else:  # MuJoCo (the vlabench extra) only when asked for
                from envs.manipulation.vlabench.env import episode_metrics as vlabench_metrics
                from envs.manipulation.vlabench.env import make_env as make_vlabench_env

                hand = getattr(policy, "action_frame", "command") == "hand"
                env = make_vlabench_env(task, {"track": GENERIC_TRACK, "action_mode": "absolute" if hand else "delta",
                                               "cameras": ("front",), "references": False})
                metrics = vlabench_metrics
                if hand:  # hand-frame deltas are added to the measured hand, which the env's delta mode does not do
                    from policies.delta_adapter import DeltaToAbsolute

                    policy = DeltaToAbsolute(policy)
            succ = correct = any_ok = 0
            for ep in range(episodes):
                res = run_episode(env, policy, env_seed=10_000 * (seed + 1) + ep, policy_seed=ep,
                                  episode_metrics=metrics)
                succ += res.metrics["success"]
                correct += res.metrics["success"] and res.metrics["correct_object"]
                any_ok += res.metrics["correct_object"]
                advance(1)
            env.close()
            out[task] = {"episodes": episodes, "success_rate": succ / max(1, episodes),
                         "correct_among_successes": correct / max(1, succ) if succ else None,
                         "correct_object_rate": any_ok / max(1, episodes)}
    rates = [v["success_rate"] for v in out.values()]
    out["mean_success_rate"] = float(np.mean(rates)) if rates else 0.0
    return out


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m launch.train_vla", description=__doc__.split("\n")[0])
    p.add_argument("--out", writes="folder", required=True, type=Path, help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--demos", type=int, default=600, min=1, max=1_000_000,
                   help="expert episodes to attempt (failures are dropped)")
    p.add_argument("--minutes", type=float, default=10.0, min=0.001, max=10_080,
                   help="training time cap (a run it cuts is timing-dependent)")
    p.add_argument("--epochs", type=int, default=30, min=1, max=100_000)
    p.add_argument("--patience", type=int, default=6, min=0, max=100_000)
    p.add_argument("--batch-size", type=int, default=128, min=1, max=65_536)
    p.add_argument("--lr", type=float, default=1e-3, min=0, max=10)
    p.add_argument("--suite", default="personalized_simpler",
                   help=f"whose generic tasks to learn: {' or '.join(SUITES)} (personalized_vlabench: the "
                        "in_distribution track's MuJoCo front view, expert targets relabelled as SIMPLER deltas)")
    p.add_argument("--noise", type=float, default=None, min=0, max=1,
                   help="DART noise std on executed xyz deltas (metres; default 0.01, "
                        f"{VLABenchDemoConfig.noise_std} on personalized_vlabench)")
    p.add_argument("--expert-descent", default="gated", help="the demonstrator's descent rule: gated, funnel or coarse")
    p.add_argument("--expert-regrasps", type=int, default=0, min=0, max=100,
                   help="the demonstrator re-grasps an object it lost (slipped or dropped) up to this many times")
    p.add_argument("--drop-fraction", type=float, default=0.0, min=0, max=1,
                   help="share of expert demos whose executed gripper is forced open once the object is lifted, "
                        "so the data shows the drop being noticed and the object re-grasped (needs "
                        "--expert-regrasps >= 1)")
    p.add_argument("--split", default="train",
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
    p.add_argument("--shift-cells", type=float, default=0.0, min=0, max=64,
                   help="random feature-map translation during training, in cells (0 = off)")
    p.add_argument("--aux-weight", type=float, default=0.0, min=0, max=1e6,
                   help="weight of the auxiliary target-offset loss (0 = no auxiliary output)")
    p.add_argument("--xy-weight", type=float, default=1.0, min=0, max=1e6, help="loss weight of dx, dy (gripper is 2)")
    p.add_argument("--memory", type=int, default=0,
                   help="objects localised on the first frame and remembered: 0 (none), 1 (the described object) "
                        "or 2 (+ the goal); needs the cnn backbone")
    p.add_argument("--words", type=int, default=0,
                   help="memory heads: ground up to this many instruction words one by one (word-additive "
                        "heatmaps; 0 = the sentence vector conditions them)")
    p.add_argument("--heatmap-weight", type=float, default=TrainConfig.heatmap_weight, min=0, max=1e6,
                   help="memory heads: weight of the object heatmap loss (--aux-weight weighs their xy loss)")
    p.add_argument("--memory-noise", type=float, default=TrainConfig.memory_noise, min=0, max=1,
                   help="memory heads: noise (metres) on the remembered positions during training")
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
    p.add_argument("--label-frame", default="command", choices=LABEL_FRAMES,
                   help="personalized_vlabench: deltas from the commanded pose (command) or from the measured hand "
                        "pose (hand; recorded in the checkpoint so the adapter adds them to the hand)")
    p.add_argument("--look-randomisation", type=float, default=0.0, min=0, max=1,
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


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse, collect (or load) demos, train, evaluate, write checkpoint + metrics; returns the summary."""
    args = build_parser().parse_args(argv)
    check_out_dir(args.out)  # usable before any other check or work
    if args.checkpoint_out is not None:
        check_out_dir(args.checkpoint_out, "--checkpoint-out")
    if args.suite not in SUITES:
        raise choice_error("--suite", args.suite, SUITES)
    vlabench = args.suite == "personalized_vlabench"
    known_tasks = VLABENCH_TASKS if vlabench else GENERIC_TASKS
    default_tasks = BASE_TASKS if vlabench else tuple(GENERIC_TASKS)
    tasks = [t for t in (args.tasks or ",".join(default_tasks)).split(",") if t]
    if not tasks:
        raise ConfigError(f"--tasks names no task; valid: {', '.join(known_tasks)}")
    for t in tasks:
        if t not in known_tasks:
            raise ConfigError(f"unknown generic task {t!r} for {args.suite}; valid: {', '.join(known_tasks)}")
    if vlabench:
        for name, default in SIMPLER_ONLY.items():
            if getattr(args, name) != default:
                raise ConfigError(f"--{name.replace('_', '-')} applies to --suite personalized_simpler only, "
                                  f"got {getattr(args, name)} with --suite {args.suite}")
    if not vlabench and args.look_randomisation != 0.0:
        raise ConfigError(f"--look-randomisation applies to --suite personalized_vlabench only, got "
                          f"{args.look_randomisation} with --suite {args.suite}")
    if not vlabench and args.label_frame != "command":
        raise ConfigError(f"--label-frame applies to --suite personalized_vlabench only, got {args.label_frame} "
                          f"with --suite {args.suite}")
    if args.switch_weight < 1.0:
        raise ConfigError(f"--switch-weight must be >= 1, got {args.switch_weight}")
    if not 0.0 <= args.look_randomisation <= 1.0:
        raise ConfigError(f"--look-randomisation must be in [0, 1], got {args.look_randomisation}")
    if args.noise is None:
        args.noise = VLABenchDemoConfig.noise_std if vlabench else 0.01
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
    base_vision = CNN_VISION if args.backbone == "cnn" else VisionSpec()
    if args.input_size is None:
        args.input_size = base_vision.input_size
    if args.input_size % 16 or not 64 <= args.input_size <= 320:
        raise ConfigError(f"--input-size must be a multiple of 16 in [64, 320], got {args.input_size}")
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    out: Path = args.out
    vision = replace(base_vision, input_size=args.input_size)
    if args.expert_descent not in DESCENTS:
        raise choice_error("--expert-descent", args.expert_descent, DESCENTS)
    if args.split not in DEMO_SPLITS:
        raise choice_error("--split", args.split, DEMO_SPLITS)
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
    driven_cfgs = []
    if args.dagger is not None:
        load_checkpoint(args.dagger)  # verified here, so a bad folder fails before anything is collected
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
    init = load_checkpoint(args.init) if args.init is not None else None
    if init is not None and args.gripper_classifier and not init.config.gripper_classifier:
        raise ConfigError(f"--gripper-classifier changes the head's shape; --init {str(args.init)!r} has none "
                          "(train from scratch instead)")
    if init is not None and init.config.vision != vision:
        raise ConfigError(f"--init {str(args.init)!r} was trained on {init.config.vision.backbone} at "
                          f"{init.config.vision.input_size}px, not {vision.backbone} at {vision.input_size}px")
    with FolderLock(out):  # only once every option has been checked: bad input writes nothing; one writer
        cache = args.demo_cache or out / "demos.npz"
        if args.demo_cache is None and not cache.exists():
            t0 = time.perf_counter()
            blocks = args.demo_blocks or out / "demo_blocks"
            demos = collect(demo_cfg, vision, args.workers, blocks)
            for driven_cfg in driven_cfgs:
                demos.extend(collect(driven_cfg, vision, args.workers, blocks))
            if not demos.actions:
                raise ConfigError("the expert succeeded in no demonstration episode; nothing to train on")
            save_cache(cache, demos, demo_cfg, vision)
            collect_s = time.perf_counter() - t0
        else:
            collect_s = 0.0
        meta, arr = load_cache(cache, vision)
        cached_frame = meta["demo_config"].get("label_frame", "command")
        if cached_frame != args.label_frame:
            raise ConfigError(f"demo cache {str(cache)!r} holds {cached_frame}-frame labels, not --label-frame "
                              f"{args.label_frame}")
        encoder = load_text_encoder()
        texts = encoder.encode(meta["instructions"])
        # which camera saw each frame: object-memory heads project SIMPLER positions with it (VLABench's front
        # camera moves between episodes, so its demos record the image positions instead)
        embodiment = None if vlabench else np.asarray([GENERIC_TASKS[t].embodiment for t in meta["tasks"]])
        data = DemoArrays(torch.from_numpy(arr["features"]), texts, arr["text_index"], arr["states"],
                          arr["actions"].astype(np.float32), arr["episode"], arr.get("targets"), arr.get("goals"),
                          embodiment, encode_words(encoder, meta["instructions"], args.words) if args.words else None,
                          arr.get("uv"))
        head_cfg = init.config if init is not None else HeadConfig(
            vision=vision, state_dim=int(arr["states"].shape[1]), width=args.width, chunk=args.chunk,
            dropout=args.dropout, aux_dim=2 if args.aux_weight > 0 and not args.memory else 0, memory=args.memory,
            words=args.words, gripper_classifier=args.gripper_classifier)
        train_cfg = TrainConfig(head=head_cfg, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                                patience=args.patience, max_minutes=args.minutes, seed=args.seed,
                                shift_cells=args.shift_cells, xy_weight=args.xy_weight, aux_weight=args.aux_weight,
                                heatmap_weight=args.heatmap_weight, memory_noise=args.memory_noise,
                                memory_source=args.memory_source, switch_weight=args.switch_weight,
                                release_frames=args.release_frames, grasp_frames=args.grasp_frames)
        log = TrainLog(out)
        with progress_bar(args.epochs * epoch_steps(data, train_cfg), "training head") as advance:
            bundle, stats = train_head(data, train_cfg, on_progress=advance, on_epoch=log.append, init=init)
        command = "python -m launch.train_vla " + " ".join(shlex.quote(a) for a in (argv if argv is not None
                                                                                     else sys.argv[1:]))
        episodes = meta["episodes"]
        demo_stats = {"attempted": len(episodes), "kept": int(sum(e["success"] for e in episodes)),
                      "frames": len(data), "collect_s": round(collect_s, 1),
                      "driven": int(sum("driven_steps" in e for e in episodes))}
        ckpt = args.checkpoint_out or out / "checkpoint"
        training_facts = {"command": command, "seed": args.seed, "demos": demo_stats,
                          # a fine-tune names its starting weights by content: the --init folder may be replaced
                          **({"init_sha256": read_manifest(args.init)["weights_sha256"]} if init is not None else {}),
                          "train": {k: v for k, v in stats.items() if k != "history"},
                          "train_config": {k: v for k, v in asdict(replace(train_cfg, head=head_cfg)).items()
                                           if k != "head"}}
        bundle = replace(bundle, action_frame=args.label_frame)
        digest = save_checkpoint(bundle, ckpt, training=training_facts)
        if init is not None and "attributes" in read_manifest(args.init):
            attach_attributes(ckpt, args.init)
            bundle = load_checkpoint(ckpt)  # the evaluation below then runs the policy as it ships
        evaluation: dict[str, Any] = {}
        if args.eval_episodes > 0:
            policy = GenericVLA(bundle)
            evaluation = evaluate(policy, tasks, args.eval_episodes, args.seed, suite=args.suite)
            for task, rec in evaluation.items():
                if isinstance(rec, dict):
                    log.append({"eval_task": task, **rec})
        wall = time.perf_counter() - start
        grad_steps = stats["epochs_run"] * stats["steps_per_epoch"]
        summary = log.write_summary({
            "env": f"{args.suite}:generic", "agent": "generic_vla_bc", "steps": grad_steps,
            "return_last100": evaluation.get("mean_success_rate"), "steps_per_second": grad_steps / max(
                stats["train_s"], 1e-9), "wall_s": round(wall, 1), "checkpoint": str(ckpt), "weights_sha256": digest,
            "command": command, "demos": demo_stats, "train": training_facts["train"], "eval": evaluation,
        })
        write_json_atomic(Path(ckpt) / "metrics.json", {"command": command, "weights_sha256": digest,
                                                       "demos": demo_stats, "train": training_facts["train"],
                                                       "eval_test_split": evaluation})
        log.close()
        return summary


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
