"""What the learned VLABench base does with what it sees: label terms, memory sensitivity, gripper switches.

    python -m launch.study vlabench.vlabench_base_probe --checkpoint checkpoints/vlabench_vla --episodes 8 \\
        --seed 70000 --out runs/probe

On the generic track (``in_distribution``, front view; env seeds ``seed + i`` per task, never a demonstration's)
the scripted expert drives each episode while, at every visited state, the probe records:

- **Label terms.** The expert's target as a delta from the *commanded* pose (the first heads' labels) and from the
  *measured* hand (TCP), and the lag between the two. How much of each label a regressor explains from privileged
  observables (target / goal offset from the hand, hand height, gripper, the expert's phase), with and without the
  lag as an input: random-forest R² per axis, 5-fold cross-validated by episode.
- **Memory sensitivity.** How far the head's first predicted xy step moves when its remembered target position is
  moved by 1 cm along the base x and y axes (mean over frames before the grasp; 1.0 = follows fully). Frames where
  the target is within 5 cm are reported apart, and so are the *unsaturated* frames, where the expert's own label
  (its 5 cm step, re-planned for the moved target) follows the move fully: the definition shared with the SIMPLER
  head's probe (:mod:`sim_benchmarks.studies.generic_vla.memory_sensitivity`).
- **Gripper at switch frames.** At each frame where the expert's gripper command switches (grasp or release), whether
  the head's first predicted step commands the same (exactly at the frame, and within one frame either side).
- **Memory error.** The remembered target position's distance from the true start position.

``--memory-source depth|perceived`` places the head's memory with the fused three-view depth of the modular base
(policies/vla/perceived_memory.py; the suite's ``vla_memory`` policy option) in every probed and closed-loop
episode: the memory error and the "own" closed-loop column then measure that memory. ``--true-memory`` gives the
head the true start positions of the target and the box or plate in place of what it localised (in the expert-driven
frames above): separates "cannot localise" from "cannot decide" at the gripper switches. ``--closed-loop N`` adds a
paired closed-loop check on N generic-track episodes per task (the same env seeds): the head with its own memory
against the head given the true start positions of the target and the box or plate (the question "does the head act
on the positions it remembers?"). Writes ``probe.json`` and ``probe.md``.
"""

from __future__ import annotations

import copy
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from envs.manipulation.vlabench.frames import from_base, to_base
from envs.statistics import wilson_ci
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.studies.aux.results import bootstrap_ci
from sim_benchmarks.studies.generic_vla.memory_sensitivity import expert_response, frame_row, head_response, summarise

TRACK = "in_distribution"
PHASES = ("approach", "descend", "close", "lift", "carry", "lower", "release", "retreat", "withdraw")


def true_memory(env: Any, slots: int) -> np.ndarray:
    """The head's memory table (slots×2, robot base frame) holding the true start positions of the target and,
    where the task has one, the box or plate (NaN rows keep the head's own estimate)."""
    from agents.manipulation.vlabench_demonstrations import to_base_frame

    ps = env.unwrapped.privileged_state()
    start = np.asarray(ps["target"]["start"], float)
    override = np.full((slots, 2), np.nan, np.float32)
    override[0] = to_base_frame(start)[:2]
    if slots > 1 and ps["fixture"] is not None:
        override[1] = to_base_frame(np.array([*ps["fixture"]["xy"], start[2]]))[:2]
    return override


def memory_refiner(env: Any, task: str, source: str, seed: int) -> Any:
    """The suite's ``vla_memory`` placement for ``env`` (None for the head's own estimate)."""
    from sim_benchmarks.specs import PolicyContext
    from sim_benchmarks.suites.personalized_vlabench import MEMORY_OPTION, SUITE, _memory_refiner

    return _memory_refiner(PolicyContext(SUITE, task, "generic", seed, env, {MEMORY_OPTION: source}))


def probe_task(policy: Any, task: str, episodes: int, seed: int, given_memory: bool = False,
               memory_source: str = "own") -> dict[str, list]:
    """Expert-driven episodes of ``task``; per-frame rows of label terms, head predictions and switch flags
    (``given_memory``: the head remembers the true start positions instead of its own estimate; ``memory_source``:
    where its memory comes from otherwise, see :mod:`policies.vla.perceived_memory`)."""
    from agents.manipulation.vlabench_demonstrations import absolute_to_delta, to_base_frame
    from envs.manipulation.vlabench.env import make_env
    from envs.manipulation.vlabench.scene import HAND_MAX_DELTA_POS
    from policies.manipulation.vlabench_expert import VLABenchExpert

    env = make_env(task, {"track": TRACK, "action_mode": "absolute", "cameras": ("front",), "references": False})
    rows: list[dict[str, Any]] = []
    memory_err: list[float] = []
    policy.memory_refiner = memory_refiner(env, task, memory_source, seed)
    try:
        for i in range(episodes):
            obs, info = env.reset(seed=seed + i)
            expert = VLABenchExpert(env, seed=seed + i)
            expert.reset(obs["instruction"], {**info, "policy_seed": seed + i})
            policy.reset(obs["instruction"], {**info, "policy_seed": seed + i})
            if given_memory and policy.cfg.memory:
                policy.memory_override = true_memory(env, policy.cfg.memory)
            sc = env.unwrapped.scene
            ps = env.unwrapped.privileged_state()
            start = np.asarray(ps["target"]["start"], float)
            goal = None if ps["fixture"] is None else np.array([*ps["fixture"]["xy"], start[2]])
            target_base = to_base_frame(start)
            prev_grip, grasped, step = None, False, 0
            while True:
                ps = env.unwrapped.privileged_state()
                tcp = np.asarray(obs["ee_pose"][:3], float)
                target = expert.act(obs)
                phase = expert.phase
                cmd = absolute_to_delta(target, sc.target_pos, sc.target_rpy)
                hand = absolute_to_delta(target, tcp, sc.target_rpy, HAND_MAX_DELTA_POS)  # clipped as hand labels are
                lag = to_base(sc.target_pos - tcp)
                chunk = policy.predict_chunk(obs)
                if step == 0 and policy.cfg.memory and not given_memory:
                    remembered = policy._memory[0, 0, :2].numpy()  # the first frame's memory (set by predict_chunk)
                    memory_err.append(float(np.linalg.norm(remembered - target_base[:2])))
                grip = bool(target[6] > 0)
                grasped = grasped or grip
                row = {"episode": f"{task}/{seed + i}", "step": step, "phase": phase, "cmd": cmd[:3].tolist(),
                       "hand": hand[:3].tolist(), "lag": lag.tolist(),
                       "to_target": to_base(np.asarray(ps["target"]["position"]) - tcp).tolist(),
                       "to_goal": (to_base(goal - tcp) if goal is not None else np.zeros(3)).tolist(),
                       "hand_z": float(tcp[2]), "opening": float(obs["ee_state"][4]),
                       "expert_grip": grip, "head_grip": bool(chunk[0, 6] >= 0.0),
                       "switch": None if prev_grip is None or prev_grip == grip else ("grasp" if grip else "release")}
                if policy.cfg.memory and not grasped:
                    label = partial(_expert_label, expert, env.unwrapped, obs, tcp, sc.target_rpy)
                    row.update(frame_row(head_response(policy, obs, chunk), expert_response(label),
                                         np.asarray(row["to_target"])[:2]))
                rows.append(row)
                prev_grip = grip
                obs, _, terminated, truncated, _ = env.step(target)
                step += 1
                if terminated or truncated:
                    break
    finally:
        policy.memory_override = None
        policy.memory_refiner = None
        env.close()
    return {"rows": rows, "memory_err": memory_err}


def _r2(x: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int) -> list[float]:
    """Per-axis out-of-fold R² of a random forest, folds by episode."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.metrics import r2_score
    from sklearn.model_selection import GroupKFold

    pred = np.zeros_like(y)
    for tr, te in GroupKFold(n_splits=min(5, len(np.unique(groups)))).split(x, y, groups):
        model = RandomForestRegressor(n_estimators=100, min_samples_leaf=3, random_state=seed, n_jobs=1)
        pred[te] = model.fit(x[tr], y[tr]).predict(x[te])
    return [round(float(r2_score(y[:, k], pred[:, k])), 3) for k in range(y.shape[1])]


def label_terms(rows: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """Lag size and how much of each label privileged observables explain (with and without the lag)."""
    phase = np.array([[r["phase"] == p for p in PHASES] for r in rows], float)
    obs = np.column_stack([np.array([r["to_target"] for r in rows]), np.array([r["to_goal"] for r in rows]),
                           [r["hand_z"] for r in rows], [r["opening"] for r in rows],
                           [r["expert_grip"] for r in rows], phase])
    lag = np.array([r["lag"] for r in rows])
    groups = np.unique([r["episode"] for r in rows], return_inverse=True)[1]
    cmd, hand = np.array([r["cmd"] for r in rows]), np.array([r["hand"] for r in rows])
    return {"frames": len(rows), "lag_median_cm": round(float(np.median(np.linalg.norm(lag, axis=1))) * 100, 2),
            "lag_p90_cm": round(float(np.percentile(np.linalg.norm(lag, axis=1), 90)) * 100, 2),
            "label_std_cm": {"command": (cmd.std(0) * 100).round(2).tolist(),
                             "hand": (hand.std(0) * 100).round(2).tolist(),
                             "lag": (lag.std(0) * 100).round(2).tolist()},
            "r2_command_labels": _r2(obs, cmd, groups, seed),
            "r2_command_labels_with_lag": _r2(np.column_stack([obs, lag]), cmd, groups, seed),
            "r2_hand_labels": _r2(obs, hand, groups, seed)}


def switch_agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Head vs expert gripper command at the expert's switch frames (exactly, and within one frame)."""
    out: dict[str, Any] = {}
    for kind in ("grasp", "release", "all"):
        exact = near = n = 0
        for k, r in enumerate(rows):
            if r["switch"] is None or (kind != "all" and r["switch"] != kind):
                continue
            n += 1
            exact += r["head_grip"] == r["expert_grip"]
            window = [rows[j] for j in (k - 1, k, k + 1) if 0 <= j < len(rows) and rows[j]["episode"] == r["episode"]]
            near += any(w["head_grip"] == r["expert_grip"] for w in window)
        out[kind] = {"frames": n, "agree": exact, "agree_rate": exact / n if n else None,
                     "ci95": list(wilson_ci(exact, n)) if n else None, "agree_within_1": near}
    flat = [r for r in rows if r["switch"] is None]
    out["other_frames_agree_rate"] = float(np.mean([r["head_grip"] == r["expert_grip"] for r in flat]))
    # per switch frame, so two heads probed on the same seeds can be compared frame by frame
    out["frames_list"] = [{"episode": r["episode"], "step": r.get("step"), "switch": r["switch"],
                           "agree": bool(r["head_grip"] == r["expert_grip"])} for r in rows if r["switch"] is not None]
    return out


def moved_target(ps: dict[str, Any], move: np.ndarray) -> dict[str, Any]:
    """The privileged state with the target moved by ``move`` (base-frame xy, the head's memory frame)."""
    target = dict(ps["target"])
    target["position"] = np.asarray(target["position"], float) + from_base(np.array([*move, 0.0]))
    return {**ps, "target": target}


def _expert_label(expert: Any, env: Any, obs: Any, tcp: np.ndarray, rpy: np.ndarray, move: np.ndarray) -> np.ndarray:
    """The expert's hand-frame xy label (base frame) had the target stood ``move`` (base-frame xy) away."""
    from agents.manipulation.vlabench_demonstrations import absolute_to_delta
    from envs.manipulation.vlabench.scene import HAND_MAX_DELTA_POS

    twin = copy.copy(expert)  # the phase machine's state is plain values: a shallow copy plans without moving it
    twin.state = lambda _obs: moved_target(env.privileged_state(), move)
    return absolute_to_delta(twin.act(obs), tcp, rpy, HAND_MAX_DELTA_POS)[:2]


sensitivity = summarise  # the summary shared with the SIMPLER head's probe (one definition for both)


def closed_loop(checkpoint: str, task: str, episodes: int, seed: int, memory_source: str = "own"
                ) -> list[dict[str, Any]]:
    """Paired generic-track episodes: the head with its own memory (placed by ``memory_source``), then given the
    true start positions."""
    from agents.episodic import run_episode
    from envs.manipulation.vlabench.env import episode_metrics, make_env
    from policies.manipulation.delta_adapter import DeltaToAbsolute
    from policies.vla.generic import GenericVLA

    env = make_env(task, {"track": TRACK, "action_mode": "absolute", "cameras": ("front",), "references": False})
    vla = GenericVLA.from_checkpoint(checkpoint)
    policy = DeltaToAbsolute(vla)
    rows = []
    refiner = memory_refiner(env, task, memory_source, seed)
    try:
        for i in range(episodes):
            row: dict[str, Any] = {"episode": f"{task}/{seed + i}"}
            for mode in ("own", "true"):
                vla.memory_override = None
                vla.memory_refiner = refiner if mode == "own" else None
                if mode == "true":
                    env.reset(seed=seed + i)
                    vla.memory_override = true_memory(env, vla.cfg.memory)
                res = run_episode(env, policy, env_seed=seed + i, policy_seed=seed + i, episode_metrics=episode_metrics)
                row[mode] = {k: bool(res.metrics[k]) for k in ("success", "correct_object")}
            rows.append(row)
    finally:
        vla.memory_override = None
        env.close()
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The probe's summary as a short Markdown report."""
    lt, sw, se = result["label_terms"], result["gripper_switch"], result["sensitivity"]
    lines = [f"checkpoint `{result['checkpoint']}` (sha256 {result['weights_sha256'][:8]}…), {result['episodes']} "
             f"expert-driven episodes, {lt['frames']} frames",
             "", f"- lag command − hand: median {lt['lag_median_cm']} cm, p90 {lt['lag_p90_cm']} cm",
             f"- R² (x/y/z) command labels {lt['r2_command_labels']}, + lag {lt['r2_command_labels_with_lag']}; "
             f"hand labels {lt['r2_hand_labels']}",
             f"- sensitivity to a 1 cm memory move: mean {se.get('mean')} over {se.get('frames')} pre-grasp frames; "
             f"within 5 cm of the target {se.get('near_mean')} ({se.get('near_frames')} frames); unsaturated "
             f"frames {se.get('unsaturated', {}).get('mean')} ({se.get('unsaturated', {}).get('frames')} frames, "
             f"expert {se.get('unsaturated', {}).get('expert_mean')}); expert over all {se.get('expert_mean')}",
             f"- memory error: median {result['memory_err_median_cm']} cm"]
    for kind in ("grasp", "release", "all"):
        s = sw[kind]
        if s["frames"]:
            lines.append(f"- gripper at {kind} switches: {s['agree']}/{s['frames']} = {100 * s['agree_rate']:.0f} % "
                         f"[{100 * s['ci95'][0]:.0f}-{100 * s['ci95'][1]:.0f}], within one frame {s['agree_within_1']}")
    if result.get("closed_loop"):
        cl = result["closed_loop"]
        lines.append(f"- closed loop ({cl['episodes']} episodes): success own memory {cl['own']}, true positions "
                     f"{cl['true']}; paired true − own {cl['diff_pp']} pp")
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, probe the checkpoint, write probe.json / probe.md; returns the result."""
    from envs.manipulation.vlabench.tasks import PICK_PLACE_TASKS, TASKS
    from policies.vla.checkpoint_files import read_manifest
    from policies.vla.generic import GenericVLA
    from policies.vla.perceived_memory import check_memory_source

    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="checkpoints/vlabench_vla", help="generic-VLA checkpoint folder")
    ap.add_argument("--episodes", type=int, default=8, help="expert-driven episodes per task")
    ap.add_argument("--seed", type=int, default=70000, help="first env seed (episode i uses seed + i)")
    ap.add_argument("--tasks", default=",".join(PICK_PLACE_TASKS), help="comma-separated tasks")
    ap.add_argument("--true-memory", action="store_true",
                    help="the head remembers the true start positions (target, box or plate) in the probed frames")
    ap.add_argument("--memory-source", default="own", help="own, depth or perceived: where the head's memory comes "
                    "from (the suite's vla_memory option)")
    ap.add_argument("--closed-loop", type=int, default=0, help="paired own/true-memory episodes per task (0 = none)")
    ap.add_argument("--out", type=Path, required=True, help="results folder (created; must be empty or absent)")
    args = ap.parse_args(argv)
    if args.episodes < 1 or args.closed_loop < 0:
        raise ConfigError(f"--episodes must be >= 1 and --closed-loop >= 0, got {args.episodes}, {args.closed_loop}")
    tasks = [t for t in args.tasks.split(",") if t]
    for t in tasks:
        if t not in TASKS:
            raise choice_error("task", t, sorted(TASKS))
    check_memory_source(args.memory_source)
    check_out_dir(args.out)
    policy = GenericVLA.from_checkpoint(args.checkpoint)
    t0 = time.time()
    rows, mem_err = [], []
    for task in tasks:
        part = probe_task(policy, task, args.episodes, args.seed, given_memory=args.true_memory,
                          memory_source=args.memory_source)
        rows += part["rows"]
        mem_err += part["memory_err"]
        print(f"  probed {task}", file=sys.stderr, flush=True)
    result: dict[str, Any] = {
        "command": "python -m launch.study vlabench.vlabench_base_probe " + " ".join(argv if argv is not None
                                                                                     else sys.argv[1:]),
        "checkpoint": str(args.checkpoint), "weights_sha256": read_manifest(args.checkpoint)["weights_sha256"],
        "action_frame": policy.action_frame, "seed": args.seed, "true_memory": bool(args.true_memory),
        "memory_source": args.memory_source,
        "episodes": args.episodes * len(tasks),
        "label_terms": label_terms(rows, args.seed), "sensitivity": sensitivity(rows),
        "gripper_switch": switch_agreement(rows),
        "memory_err_median_cm": round(float(np.median(mem_err)) * 100, 2) if mem_err else None}
    if args.closed_loop:
        pairs = []
        for task in tasks:
            pairs += closed_loop(args.checkpoint, task, args.closed_loop, args.seed, args.memory_source)
        own = np.array([p["own"]["success"] for p in pairs], float)
        true = np.array([p["true"]["success"] for p in pairs], float)
        _, lo, hi = bootstrap_ci(true - own, seed=0)
        result["closed_loop"] = {"episodes": len(pairs), "own": f"{int(own.sum())}/{len(pairs)}",
                                 "true": f"{int(true.sum())}/{len(pairs)}",
                                 "own_ci95": list(wilson_ci(int(own.sum()), len(pairs))),
                                 "true_ci95": list(wilson_ci(int(true.sum()), len(pairs))),
                                 "diff_pp": [round(100 * float((true - own).mean()), 1), round(100 * lo, 1),
                                             round(100 * hi, 1)], "rows": pairs}
    result["wall_s"] = round(time.time() - t0, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "probe.json", result)
    text = markdown(result)
    (args.out / "probe.md").write_text(text + "\n")
    print(text)
    return result


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point: exit 2 with one line on bad input."""
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
