"""Scripted-expert demonstrations on Personalized-VLABench's generic track, labelled as SIMPLER deltas.

The VLABench expert (``policies/manipulation/vlabench_expert.py``) emits absolute TCP targets; the generic VLA head
predicts SIMPLER's base-frame deltas. ``label_frame`` says what a delta is added to:

- ``"command"`` (the first heads): the env runs with ``action_mode=delta`` and every expert target is turned into the
  delta that moves the env's *commanded* pose to it (:func:`absolute_to_delta`). The joint-rate-limited arm trails
  its command by centimetres, so these labels carry the lag, a term no policy input shows.
- ``"hand"``: the delta from the *measured* hand pose (TCP, ``obs["ee_pose"]``) to the expert target, which is what
  the expert itself steps from, clipped per axis to the expert's own 5 cm step; the env runs with absolute targets
  and each executed delta is added to the hand
  (:func:`hand_delta_to_target`, the conversion ``policies.manipulation.delta_adapter.DeltaToAbsolute`` makes for such
  heads).

With noise (DART) the executed delta's xyz is perturbed while the recorded label stays the expert's clean delta at
the visited state.

Only the ``in_distribution`` track is used (train-split designs, instructions naming colour or colour + pattern,
never "my"); instructions are relabelled with every attribute phrase that singles the target out among its
same-category look-alikes, as for SIMPLER. Only the views the head needs are rendered (``cameras``, default the
front view), at the eval size, so the resized input matches what the policy sees at evaluation.

DAgger (``driver``): a trained generic-VLA checkpoint executes part of each episode while the expert, stepping
alongside in funnel mode (``VLABenchExpert(funnel=True)``: it takes the states the policy reaches instead of backing
up to its own waypoints), labels every frame. ``driven_part="approach"``: the checkpoint approaches and descends
until the expert would close, then the expert grasps and finishes the task; ``"carry"`` (place tasks): the expert
grasps and lifts, then the checkpoint carries, lowers and releases; ``"all"``: the checkpoint executes every phase
while the expert relabels every state it visits. Where the checkpoint would open or close the
gripper against the expert (close before the grasp, open while carrying), that step executes the expert's action,
so an episode never ends in a state no label describes. Driven episodes have their own ids and seeds
(``agents.manipulation.demonstrations.DRIVER_INDEX_OFFSET``) and are kept whether or not they succeed: every frame holds
the expert's label at a state the policy reached.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.manipulation.demonstrations import (
    CARRY_PHASES,
    DRIVEN_PARTS,
    DRIVER_INDEX_OFFSET,
    Demos,
    describe_options,
    episode_rng,
)
from envs.config import Options
from envs.errors import ConfigError, choice_error
from envs.manipulation.objects import find_instance
from envs.manipulation.scene import MAX_DELTA_POS, MAX_DELTA_ROT
from envs.manipulation.vlabench.frames import BASE_POS, to_base
from envs.manipulation.vlabench.tasks import PICK_PLACE_TASKS, TASKS, subject

GENERIC_TRACK = "in_distribution"  # the only track whose instructions name attributes instead of "my"
# The table-top tasks the shipped base learned (the suite's default tasks); the others may be named explicitly.
BASE_TASKS = tuple(PICK_PLACE_TASKS)
PLACE_GOALS = ("in_box", "on_plate")  # tasks with a carry to a fixture (what a carry-driven episode drives)
APPROACH_PHASES = ("approach", "descend")  # the expert phases an approach-driven episode hands to the driver
LABEL_FRAMES = ("command", "hand")  # what a label's delta is added to: the commanded pose or the measured hand
# This suite's driven parts: the shared ones plus "all" (the checkpoint drives every phase; own episode ids).
VLABENCH_DRIVEN_PARTS = {**DRIVEN_PARTS, "all": 3}


@dataclass(frozen=True)
class VLABenchDemoConfig(Options):
    """What to collect on the generic track: tasks, episode count, DART noise, rendering and seed."""

    tasks: tuple[str, ...] = BASE_TASKS
    episodes: int = 60
    seed: int = 0
    noise_std: float = 0.008  # metres, added to the executed xyz delta (then clipped to the frame's step)
    noise_fraction: float = 0.8  # share of episodes collected with noise (the rest clean)
    image_size: int = 224  # rendered size: the eval size, so the head's resized input matches evaluation
    cameras: tuple[str, ...] = ("front",)
    max_steps: int = 80
    relabel: bool = True
    keep_failed: bool = False
    # Share of episodes rendered with a randomised room look (plain/gradient surfaces, random light): the base then
    # sees more than the one default table; the unseen_texture track's wood/tile/noise textures are never used.
    look_randomisation: float = 0.0
    # DAgger: a generic-VLA checkpoint folder that executes ``driven_part`` ("" = the expert executes all); keyed by
    # its weights' sha256, so blocks of another checkpoint are never reused.
    driver: str = ""
    driver_sha256: str = ""
    driven_part: str = "approach"
    label_frame: str = "command"  # "hand": deltas from the measured TCP (module docstring)

    def check(self) -> None:
        for t in self.tasks:
            if t not in TASKS:
                raise choice_error("demonstration task", t, sorted(TASKS))
        if self.episodes < 1:
            raise ConfigError(f"demo episodes must be >= 1, got {self.episodes}")
        if not 0.0 <= self.look_randomisation <= 1.0:
            raise ConfigError(f"look_randomisation must be in [0, 1], got {self.look_randomisation}")
        if self.label_frame not in LABEL_FRAMES:
            raise choice_error("label frame", self.label_frame, LABEL_FRAMES)
        if self.driven_part not in VLABENCH_DRIVEN_PARTS:
            raise choice_error("driven part", self.driven_part, sorted(VLABENCH_DRIVEN_PARTS))
        if self.driver and self.driven_part == "carry" and any(TASKS[t].goal not in PLACE_GOALS for t in self.tasks):
            raise ConfigError(f"carry-driven episodes need place tasks (in_box, on_plate), got {list(self.tasks)}")
        if self.noise_std < 0 or not 0.0 <= self.noise_fraction <= 1.0:
            raise ConfigError(f"noise_std must be >= 0 and noise_fraction in [0, 1], got {self.noise_std}, "
                              f"{self.noise_fraction}")


def to_base_frame(world: np.ndarray) -> np.ndarray:
    """World xyz → the robot base frame of ``obs["ee_state"]`` (x forward = world +y, z above the base)."""
    return to_base(np.asarray(world, float) - BASE_POS).astype(np.float32)


def absolute_to_delta(target: np.ndarray, command_pos: np.ndarray, command_rpy: np.ndarray,
                      max_pos: float = MAX_DELTA_POS) -> np.ndarray:
    """The SIMPLER delta that moves the commanded pose toward an absolute target [x, y, z, r, p, yaw, gripper].

    Inverse of ``envs.manipulation.vlabench.scene.apply_delta``: the world translation is rotated into the base
    frame and clipped per axis to ``max_pos`` (hand-frame labels use the expert's larger step); the yaw change is
    taken modulo a half turn (the gripper is symmetric) and clipped.
    """
    a = np.asarray(target, float)
    d = a[:3] - np.asarray(command_pos, float)
    base = np.clip(to_base(d), -max_pos, max_pos)
    dyaw = (a[5] - float(command_rpy[2]) + math.pi / 2) % math.pi - math.pi / 2
    return np.array([*base, 0.0, 0.0, np.clip(dyaw, -MAX_DELTA_ROT, MAX_DELTA_ROT), a[6]], np.float32)


def hand_delta_to_target(delta: np.ndarray, hand_pos: np.ndarray, command_rpy: np.ndarray) -> np.ndarray:
    """The absolute target [x, y, z, r, p, yaw, gripper] a hand-frame delta asks for: its translation (at most
    ``HAND_MAX_DELTA_POS`` per axis) added to the measured hand position, its yaw change to the commanded
    orientation (roll and pitch stay top-down)."""
    from envs.manipulation.vlabench.scene import HAND_MAX_DELTA_POS, WORKSPACE_HIGH, WORKSPACE_LOW, apply_delta

    d = np.asarray(delta, float).reshape(-1)
    pos, rpy = apply_delta(np.asarray(hand_pos, float), np.asarray(command_rpy, float), d, HAND_MAX_DELTA_POS,
                           MAX_DELTA_ROT)
    return np.array([*np.clip(pos, WORKSPACE_LOW, WORKSPACE_HIGH), *rpy, d[6]], np.float32)


def relabel(instruction: str, info: dict[str, Any], with_pattern: bool, rng: np.random.Generator) -> str:
    """A random attribute phrase that singles the target out, put in place of the env's own phrase."""
    target = find_instance(info["personal_object"])
    options = describe_options(target, [find_instance(i) for i in info.get("distractors", [])])
    own = subject(target, False, with_pattern)
    if not options or own not in instruction:
        return instruction
    return instruction.replace(own, options[int(rng.integers(len(options)))], 1)


def collect_vlabench_demos(cfg: VLABenchDemoConfig, indices: Sequence[int] | None = None) -> Demos:
    """Run the (noisy) expert on episodes ``indices`` (default all) and record clean-labelled front frames.

    Episode i runs task ``cfg.tasks[i % len(tasks)]`` with seeds from
    :func:`agents.manipulation.demonstrations.episode_rng`, so blocks collected separately concatenate to exactly what
    one pass collects. ``frames`` hold the raw rendered front images (uint8); ``targets`` / ``goals`` hold the target's
    and the fixture's start positions in the robot base frame (the frame of ``ee_state``) and ``uv`` where they appear
    in that episode's front view (training-only labels, never policy inputs).
    """
    from envs.manipulation.vlabench import scene
    from envs.manipulation.vlabench.env import make_env
    from envs.manipulation.vlabench.scene import HAND_MAX_DELTA_POS
    from policies.manipulation.vlabench_expert import VLABenchExpert

    indices = range(cfg.episodes) if indices is None else indices
    hand = cfg.label_frame == "hand"
    max_pos = HAND_MAX_DELTA_POS if hand else MAX_DELTA_POS  # per-axis step a label may ask for
    opts = {"track": GENERIC_TRACK, "action_mode": "absolute" if hand else "delta", "cameras": cfg.cameras,
            "image_size": cfg.image_size,
            "max_steps": cfg.max_steps, "references": False}
    envs: dict[tuple[str, bool], Any] = {}
    demos = Demos()
    driver = None
    if cfg.driver:
        from policies.vla.generic import GenericVLA  # torch + the checkpoint: only for driven collection

        driver = GenericVLA.from_checkpoint(cfg.driver)
    driven_phases = {"carry": CARRY_PHASES, "approach": APPROACH_PHASES}.get(cfg.driven_part)  # None: every phase
    try:
        for i in indices:
            task = cfg.tasks[i % len(cfg.tasks)]
            if driver is not None:
                i += DRIVER_INDEX_OFFSET * VLABENCH_DRIVEN_PARTS[cfg.driven_part]
            rng = episode_rng(cfg.seed, i)
            env_seed = int(rng.integers(2**31 - 1))
            noisy = bool(rng.random() < cfg.noise_fraction)
            # drawn only when asked for, so runs without it keep their episodes
            randomised = bool(cfg.look_randomisation and rng.random() < cfg.look_randomisation)
            if (task, randomised) not in envs:
                envs[task, randomised] = make_env(task, {**opts, "randomise_look": randomised})
            env = envs[task, randomised]
            obs, info = env.reset(seed=env_seed)
            text = obs["instruction"]
            if cfg.relabel:
                text = relabel(text, info, info.get("instruction_style") == "colour_pattern", rng)
            expert = VLABenchExpert(env, seed=env_seed, funnel=driver is not None)
            expert.reset(text, {**info, "policy_seed": env_seed})
            if driver is not None:
                driver.reset(text, {**info, "policy_seed": env_seed})
            ps = env.unwrapped.privileged_state()
            target_start = to_base_frame(ps["target"]["start"])
            start = np.asarray(ps["target"]["start"], float)
            goal_world = None if ps["fixture"] is None else np.array([*ps["fixture"]["xy"], start[2]])
            goal_start = np.full(3, np.nan, np.float32) if goal_world is None else to_base_frame(goal_world)
            # The front camera is re-posed every episode: its own projection labels the object-memory heatmaps.
            uv = np.full((2, 2), np.nan, np.float32)
            uv[0] = env.unwrapped.scene.project("front", start)[0]
            if goal_world is not None:
                uv[1] = env.unwrapped.scene.project("front", goal_world)[0]
            frames, states, actions = [], [], []
            step_info: dict[str, Any] = {}
            driven_steps = 0
            while True:
                frames.append(obs["image"])
                states.append(np.asarray(obs["ee_state"], np.float32))
                scene = env.unwrapped.scene  # the commanded pose the env's delta mode adds to
                origin = np.asarray(obs["ee_pose"][:3], float) if hand else scene.target_pos
                label = absolute_to_delta(expert.act(obs), origin, scene.target_rpy, max_pos)
                actions.append(label)
                executed = label.copy()
                if noisy and cfg.noise_std > 0:
                    executed[:3] = np.clip(executed[:3] + rng.normal(0.0, cfg.noise_std, 3), -max_pos, max_pos)
                if driver is not None:
                    # The driver sees every frame (its object memory comes from the first) and acts in its part;
                    # a gripper command against the expert's executes the expert's action for that step instead.
                    proposed = np.asarray(driver.act(obs), np.float32)
                    if (driven_phases is None or expert.phase in driven_phases) and (proposed[6] > 0) == (label[6] > 0):
                        executed, driven_steps = proposed, driven_steps + 1
                if hand:  # the env takes absolute targets: the executed delta starts from the hand
                    executed = hand_delta_to_target(executed, obs["ee_pose"][:3], scene.target_rpy)
                obs, _, terminated, truncated, step_info = env.step(executed)
                if terminated or truncated:
                    break
            success = bool(step_info.get("success", False))
            record = {"index": int(i), "task": task, "seed": env_seed, "noisy": noisy,
                      "randomised_look": randomised,
                      "steps": len(actions), "success": success, "instruction": text,
                      "correct_object": bool(step_info.get("correct_object", False))}
            if driver is not None:
                record["driven_steps"] = driven_steps
            # every driven frame holds the expert's label at a state the policy reached
            if success or cfg.keep_failed or driven_steps > 0:
                n = len(actions)
                demos.frames += frames
                demos.states += states
                demos.actions += actions
                demos.instructions += [text] * n
                demos.episode += [int(i)] * n
                demos.task += [task] * n
                demos.targets += [target_start] * n
                demos.goals += [goal_start] * n
                demos.uv += [uv] * n
            demos.episodes.append(record)
    finally:
        for env in envs.values():
            env.close()
    return demos
