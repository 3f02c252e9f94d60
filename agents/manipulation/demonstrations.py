"""Scripted-expert demonstrations for behaviour cloning, with DART-style noise injection through the env.

The expert (a privileged oracle) acts in the env; with ``noise_std > 0`` the *executed* action is perturbed while the
recorded label is the expert's clean action at the visited state, so the data covers the small drifts a learned
policy makes and shows how to recover from them. Only generic tasks on train-split instances are used: the generic
VLA never sees personal objects, "my" instructions, highlighted images or test instances.

Each frame is passed through ``encode_frame`` (e.g. frozen vision features) as it is collected, so the raw images
need not be kept. Instructions are relabelled with every attribute description that singles the target out among
its same-category distractors (colour only, pattern only, colour + pattern), so pattern words are grounded on their
own rather than only through the colour they co-occur with.

DAgger-style collection (``driver``): a trained generic-VLA checkpoint *executes* the approach and descent while the
expert, running alongside on the privileged state, supplies the labels; the episode ends when the expert would
close the gripper or the policy closes it. The data then covers the states the learned policy actually reaches
(e.g. hovering 1–3 cm off the object), labelled with what the expert would do there. With ``driven_part="carry"``
(place tasks) the expert executes the approach, grasp and lift, and the checkpoint executes the carry, lowering and
release from there: the grasp is the expert's own, so its phase machine still describes the state, and the data
covers where the policy actually carries the object (e.g. short of the spot beside the anchor, or onto it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.config import Options
from envs.errors import ConfigError, choice_error
from envs.manipulation.env import make_env
from envs.manipulation.objects import PATTERN_WORDS, ObjectInstance, find_instance
from envs.manipulation.tasks import GENERIC_TASKS, instruction
from policies.manipulation.scripted_expert import HOLD_PHASES, ExpertOptions, ScriptedExpert


@dataclass(frozen=True)
class DemoConfig(Options):
    """What to collect: tasks, episode count, noise and seed."""

    tasks: tuple[str, ...] = tuple(GENERIC_TASKS)
    episodes: int = 300
    seed: int = 0
    noise_std: float = 0.01  # metres, added to the executed xyz delta (per-step clip is 0.03)
    noise_fraction: float = 0.8  # share of episodes collected with noise (the rest clean)
    image_size: int = 224
    keep_failed: bool = False
    relabel: bool = True
    descent: str = ExpertOptions.expert_descent  # the expert's descent rule (see scripted_expert.DESCENTS)
    split: str = "train"  # instance pool: "train" or "train_extended" (+ extra designs; never a test design)
    # DAgger: a generic-VLA checkpoint folder that executes the approach + descent ("" = the expert executes all);
    # its sha256 is part of the config, so blocks of another checkpoint are never reused.
    driver: str = ""
    driver_sha256: str = ""
    driven_part: str = "approach"  # what the driver executes: "approach" (+ descent) or "carry" (+ lower, release)
    # Recovery data: the expert re-grasps a lost object up to ``regrasps`` times, and in ``drop_fraction`` of the
    # expert-executed episodes the executed gripper is forced open for DROP_STEPS steps once the object is lifted
    # (the label stays the expert's), so the data shows an empty gripper being noticed and the object re-grasped.
    regrasps: int = 0
    drop_fraction: float = 0.0

    def check(self) -> None:
        if self.regrasps < 0:
            raise ConfigError(f"expert re-grasps (--expert-regrasps) must be >= 0, got {self.regrasps}")
        if not 0.0 <= self.drop_fraction <= 1.0:
            raise ConfigError(f"drop fraction (--drop-fraction) must be in [0, 1], got {self.drop_fraction}")
        if self.drop_fraction > 0 and self.regrasps < 1:
            raise ConfigError(f"drop fraction {self.drop_fraction} needs expert re-grasps >= 1 (--expert-regrasps): "
                              "a drop the expert does not recover from only produces failed episodes")


DEMO_SPLITS = ("train", "train_extended")  # demonstrations never use test instances
DRIVER_INDEX_OFFSET = 1_000_000  # driven episodes get their own seeds and episode ids (never an expert demo's)
DRIVEN_PARTS = {"approach": 1, "carry": 2}  # part → multiple of the offset (approach- and carry-driven ids differ)
CARRY_PHASES = ("carry", "lower", "release")  # the expert phases a carry-driven episode hands to the driver
DROP_STEPS = 3  # executed steps with the gripper forced open: enough for the object to leave the fingers
DROP_AFTER = (0, 3)  # the drop comes after this many lifted steps (high exclusive): low, so the object lands upright


@dataclass
class Demos:
    """Collected frames: encoded observation, instruction, proprio state, clean action, episode/task ids."""

    frames: list[np.ndarray] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    states: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    episode: list[int] = field(default_factory=list)
    task: list[str] = field(default_factory=list)
    # The target's start position (world xyz) per frame: a privileged *training-only* label for the head's
    # auxiliary "where is the described object" loss; never an input of the policy.
    targets: list[np.ndarray] = field(default_factory=list)
    # The goal's (anchor / receptacle) start position per frame, NaN for pick tasks: training-only, like targets.
    goals: list[np.ndarray] = field(default_factory=list)
    # Where the target and goal starts appear in the frame's camera (2×2 image coordinates in [-1, 1], NaN rows
    # for no goal), for suites whose camera moves between episodes; training-only labels, like targets.
    uv: list[np.ndarray] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)  # one summary per attempted episode

    def __len__(self) -> int:
        return len(self.actions)

    def extend(self, other: Demos) -> None:
        """Append another collection's frames and episode records (e.g. the next block, or driven episodes)."""
        for name in ("frames", "instructions", "states", "actions", "episode", "task", "episodes", "targets", "goals",
                     "uv"):
            getattr(self, name).extend(getattr(other, name))


def describe_options(target: ObjectInstance, distractors: Sequence[ObjectInstance]) -> list[str]:
    """Every noun phrase that names the target uniquely among same-category distractors."""
    cat = target.category
    out = []
    if all(d.colour != target.colour for d in distractors):
        out.append(f"the {target.colour} {cat}")
    if target.pattern != "plain" and all(d.pattern != target.pattern for d in distractors):
        out.append(f"the {PATTERN_WORDS[target.pattern]} {cat}")
    if target.pattern != "plain" and all((d.colour, d.pattern) != (target.colour, target.pattern)
                                         for d in distractors):
        out.append(f"the {target.colour} {PATTERN_WORDS[target.pattern]} {cat}")
    return out


def relabelled_instruction(kind: str, info: dict[str, Any], original: str, rng: np.random.Generator) -> str:
    """A random valid attribute instruction for the episode (the env's own when no other is valid)."""
    target = find_instance(info["personal_object"])
    distractors = [find_instance(i) for i in info.get("distractors", [])]
    options = describe_options(target, distractors)
    if not options:
        return original
    subject = options[int(rng.integers(len(options)))]
    return instruction(kind, subject, info.get("receptacle", "plate"))


def drop_schedule(cfg: DemoConfig, index: int) -> int | None:
    """After how many lifted / carried steps episode ``index`` drops its object (None: it does not).

    Its own random stream, so turning drops on leaves every other draw of the episode (seeds, noise) unchanged.
    """
    if cfg.drop_fraction <= 0:
        return None
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, index, 0xD809]))
    return int(rng.integers(*DROP_AFTER)) if rng.random() < cfg.drop_fraction else None


def episode_rng(seed: int, index: int) -> np.random.Generator:
    """The generator for episode ``index``: independent of which worker or order collects it."""
    return np.random.default_rng(np.random.SeedSequence([seed, index, 0xD3305]))


def collect_demos(
    cfg: DemoConfig,
    encode_frame: Callable[[np.ndarray], np.ndarray] = lambda image: image,
    on_progress: Callable[[int], None] | None = None,
    indices: Sequence[int] | None = None,
) -> Demos:
    """Run the noisy expert on episodes ``indices`` (default all ``cfg.episodes``) and record clean-labelled frames.

    Episode i runs task ``cfg.tasks[i % len(tasks)]`` with seeds drawn from :func:`episode_rng`, so shards collected
    by several processes concatenate (in index order) to exactly what one process collects.
    """
    for t in cfg.tasks:
        if t not in GENERIC_TASKS:
            raise choice_error("demonstration task (generic only)", t, sorted(GENERIC_TASKS))
    if cfg.episodes < 1:
        raise ConfigError(f"demo episodes must be >= 1, got {cfg.episodes}")
    if cfg.split not in DEMO_SPLITS:
        raise choice_error("demonstration split", cfg.split, DEMO_SPLITS)
    if cfg.driven_part not in DRIVEN_PARTS:
        raise choice_error("driven part", cfg.driven_part, sorted(DRIVEN_PARTS))
    carry = cfg.driven_part == "carry"
    if carry and cfg.driver and any(GENERIC_TASKS[t].kind == "pick" for t in cfg.tasks):
        raise ConfigError(f"carry-driven episodes need place tasks (a pick task has no carry), got {list(cfg.tasks)}")
    indices = range(cfg.episodes) if indices is None else indices
    envs: dict[str, Any] = {}
    demos = Demos()
    driver = None
    if cfg.driver:
        from policies.vla.generic import GenericVLA  # torch + the checkpoint: only for driven collection

        driver = GenericVLA.from_checkpoint(cfg.driver)
    try:
        for i in indices:
            task = cfg.tasks[i % len(cfg.tasks)]
            if task not in envs:
                envs[task] = make_env(task, {"image_size": cfg.image_size, "split": cfg.split})
            env = envs[task]
            if driver is not None:
                i += DRIVER_INDEX_OFFSET * DRIVEN_PARTS[cfg.driven_part]
            rng = episode_rng(cfg.seed, i)
            env_seed = int(rng.integers(2**31 - 1))
            noisy = bool(rng.random() < cfg.noise_fraction)
            expert = ScriptedExpert(env, noise_std=cfg.noise_std if noisy else 0.0, seed=env_seed,
                                    descent=cfg.descent, max_regrasps=cfg.regrasps)
            drop_after = drop_schedule(cfg, i) if driver is None else None
            held_steps, drop_left, dropped = 0, 0, False
            obs, info = env.reset(seed=env_seed)
            text = relabelled_instruction(env.task.kind, info, obs["instruction"], rng) if cfg.relabel \
                else obs["instruction"]
            expert.reset(text, {**info, "policy_seed": env_seed})
            if driver is not None:
                driver.reset(text, {**info, "policy_seed": env_seed})
            privileged = env.unwrapped.privileged_state()
            target_start = np.asarray(privileged["target"]["start"], np.float32)
            goal = privileged["goal_position"]
            goal_start = np.full(3, np.nan, np.float32) if goal is None else np.asarray(goal, np.float32)
            frames, states, actions = [], [], []
            step_info: dict[str, Any] = {}
            driven_steps = 0
            while True:
                frames.append(encode_frame(obs["image"]))
                states.append(np.asarray(obs["ee_state"], np.float32))
                executed = expert.act(obs)  # always: it advances the expert's phases and gives the label
                actions.append(expert.last_clean_action.copy())
                if drop_after is not None and not dropped and expert.phase in ("lift", "carry"):
                    held_steps += 1
                    if held_steps > drop_after:
                        dropped, drop_left = True, DROP_STEPS
                if drop_left > 0:  # the executed gripper opens; the recorded label is still the expert's
                    executed = np.asarray(executed, np.float32).copy()
                    executed[6], drop_left = -1.0, drop_left - 1
                if driver is not None and carry:
                    # The driver sees every frame (its object memory comes from the first) but acts only once
                    # the expert's own grasp is lifted. If it opens the gripper while the expert would still
                    # hold, that frame keeps the label "hold" and the episode ends (the object is dropped).
                    proposed = np.asarray(driver.act(obs), np.float32)
                    if expert.phase in CARRY_PHASES:
                        executed, driven_steps = proposed, driven_steps + 1
                        if proposed[6] <= 0 and expert.phase != "release":
                            break
                elif driver is not None:
                    # Driven episodes record the approach + descent only: once the expert would close, or the
                    # policy closes, the expert's phase machine no longer describes the state (it cannot tell
                    # whether the policy's grasp holds), so the episode ends there. The frame where the policy
                    # closes keeps the expert's label ("not yet", when it closes early).
                    if expert.phase not in ("approach", "descend"):
                        break
                    executed = np.asarray(driver.act(obs), np.float32)
                    if executed[6] > 0:
                        break
                obs, _, terminated, truncated, step_info = env.step(executed)
                if terminated or truncated:
                    break
            success = bool(step_info.get("success", False))
            record = {"index": int(i), "task": task, "seed": env_seed, "noisy": noisy, "steps": len(actions),
                      "success": success, "instruction": text}
            if cfg.regrasps:
                record.update(dropped=dropped, regrasps=expert.regrasps)
            # A dropped episode whose re-grasp held is kept even when the time limit cut it: every frame carries
            # the expert's label, and the recovery is what it was collected for.
            regrasped = dropped and expert.regrasps > 0 and expert.phase in (*HOLD_PHASES, "release")
            keep = success or cfg.keep_failed or regrasped
            if driver is not None:
                record["driven_steps"] = driven_steps if carry else len(actions)
                # every driven frame carries the expert's label at a state the policy reached; a carry-driven
                # episode the driver never took over (the noisy expert missed its grasp) is an expert demo
                keep = keep or not carry or driven_steps > 0
            demos.episodes.append(record)
            if keep:
                demos.frames += frames
                demos.states += states
                demos.actions += actions
                demos.instructions += [text] * len(actions)
                demos.episode += [int(i)] * len(actions)
                demos.task += [task] * len(actions)
                demos.targets += [target_start] * len(actions)
                demos.goals += [goal_start] * len(actions)
            if on_progress is not None:
                on_progress(1)
    finally:
        for env in envs.values():
            env.close()
    return demos
