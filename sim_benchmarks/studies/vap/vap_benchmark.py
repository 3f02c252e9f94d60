"""VAP benchmarks on Personalized-SIMPLER: grounding accuracy, ablations, per-step time, matcher calibration.

    python -m sim_benchmarks.studies.vap.vap_benchmark grounding --episodes 30 --seed 10000 --out runs/vap_grounding
    python -m sim_benchmarks.studies.vap.vap_benchmark ablation --episodes 20 --seed 20000 --out runs/vap_ablation
    python -m sim_benchmarks.studies.vap.vap_benchmark speed --episodes 3 --repeats 3 --out runs/vap_speed
    python -m sim_benchmarks.studies.vap.vap_benchmark calibrate --episodes 30 --seed 0 --out runs/vap_calibration

*Grounding accuracy* = the candidate VAP chooses at the first step is the personal object (majority body id of the
chosen mask in the simulator segmentation; privileged, used only to score). It does not depend on the base policy,
so it is measured with the scripted expert underneath. Ablations also report success / correct-object through
``sim_benchmarks.evaluation.run_evaluation`` when the generic VLA checkpoint exists. ``calibrate`` fits the
matcher's logistic weights on **train-split** objects only (``generic_simpler``, ``split=train``, references on),
never on the test-split instances that ``personalized_simpler`` uses. Each command writes JSON + a markdown table.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from envs.paths import CHECKPOINTS
from envs.statistics import wilson_ci
from sim_benchmarks import registry
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.jobs import derive_seed
from sim_benchmarks.options import parse_options
from sim_benchmarks.registry import PolicyContext

SUITE = "personalized_simpler"
GENERIC_CHECKPOINT = CHECKPOINTS / "generic_vla"


def _pct(k: int, n: int) -> str:
    lo, hi = wilson_ci(k, n)
    return f"{100 * k / max(n, 1):.0f} % ({k}/{n}; CI {100 * lo:.0f}–{100 * hi:.0f})"


def generic_available() -> bool:
    """Whether the built-in generic VLA checkpoint is present (else speed/ablation fall back to the expert)."""
    return "generic" in registry.policies() and GENERIC_CHECKPOINT.is_dir() and any(GENERIC_CHECKPOINT.iterdir())


def make_vap(env: Any, task: str, options: dict[str, Any], oracle: bool = False, seed: int = 0) -> Any:
    """The registered ``vap`` (or ``oracle_mask``) policy for an env, configured by ``options``."""
    name = "oracle_mask" if oracle else "vap"
    ctx = PolicyContext(SUITE, task, name, seed, env, {"vap_base": "scripted_expert", **options})
    return registry.policies()[name].factory(ctx)


def grounding_task(task: str, episodes: int, seed: int, vap_options: dict[str, Any] | None = None,
                   env_options: dict[str, Any] | None = None, table_seeds: bool = False) -> dict[str, Any]:
    """First-step grounding on ``episodes`` seeded episodes of one task; per-episode rows + totals."""
    return grounding_variants(task, episodes, seed, {"vap": vap_options or {}}, env_options, table_seeds)["vap"]


def episode_seed(task: str, seed: int, i: int, table_seeds: bool) -> int:
    """Episode ``i``'s env seed: ``seed + i``, or with ``table_seeds`` the seed ``launch.eval --seed seed`` gives its
    episode ``i`` (so first-step grounding is measured on an evaluation table's very scenes)."""
    return derive_seed(seed, SUITE, task, i) if table_seeds else seed + i


def grounding_variants(task: str, episodes: int, seed: int, variants: dict[str, dict[str, Any]],
                       env_options: dict[str, Any] | None = None, table_seeds: bool = False
                       ) -> dict[str, dict[str, Any]]:
    """Like :func:`grounding_task` for several VAP configurations on the very same frames (one reset each)."""
    suite = registry.suites()[SUITE]
    env = suite.make_env(task, {"privileged": True, **(env_options or {})})
    policies = {name: make_vap(env, task, opts) for name, opts in variants.items()}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    try:
        for i in range(episodes):
            env_seed = episode_seed(task, seed, i, table_seeds)
            obs, info = env.reset(seed=env_seed)
            for name, policy in policies.items():
                t0 = time.perf_counter()
                policy.reset(obs["instruction"], {**info, "policy_seed": env_seed})
                policy.act(obs)
                rec = policy.episode_info()
                rows[name].append({"seed": env_seed, "correct": bool(rec["grounding_correct"]),
                                   "fallback": rec["fallback"], "candidates": rec["candidates"],
                                   "height_rejected": rec.get("height_rejected", 0),
                                   "chosen_score": rec["chosen_score"],
                                   "ground_ms": round(1000 * (time.perf_counter() - t0), 1)})
    finally:
        env.close()
    out = {}
    for name, rs in rows.items():
        k = sum(r["correct"] for r in rs)
        lo, hi = wilson_ci(k, len(rs))
        out[name] = {"task": task, "episodes": len(rs), "correct": k, "accuracy": k / max(len(rs), 1),
                     "ci95": [lo, hi], "fallbacks": sum(r["fallback"] for r in rs),
                     "ground_ms_median": statistics.median(r["ground_ms"] for r in rs), "rows": rs}
    return out


def grounding(episodes: int, seed: int, tasks: Sequence[str] | None = None, vap_options: dict | None = None,
              env_options: dict | None = None, table_seeds: bool = False) -> dict[str, Any]:
    """Grounding accuracy per task (+ overall) with Wilson 95 % intervals."""
    tasks = list(tasks or registry.suites()[SUITE].tasks)
    per = {}
    for t in tasks:
        per[t] = grounding_task(t, episodes, seed, vap_options, env_options, table_seeds)
        print(f"  {t}: {_pct(per[t]['correct'], per[t]['episodes'])}", file=sys.stderr, flush=True)
    k, n = sum(p["correct"] for p in per.values()), sum(p["episodes"] for p in per.values())
    return {"per_task": per, "overall": {"correct": k, "episodes": n, "accuracy": k / max(n, 1),
                                         "ci95": list(wilson_ci(k, n))}}


def grounding_markdown(result: dict[str, Any]) -> str:
    lines = ["| task | grounding correct (Wilson 95 % CI) | fallbacks | first-step ms (median) |",
             "| --- | --- | --- | --- |"]
    for t, p in result["per_task"].items():
        lines.append(f"| {t} | {_pct(p['correct'], p['episodes'])} | {p['fallbacks']} | {p['ground_ms_median']:.0f} |")
    o = result["overall"]
    lines.append(f"| **all** | {_pct(o['correct'], o['episodes'])} | | |")
    return "\n".join(lines)


# -- ablation -----------------------------------------------------------------------------------------------------
ABLATION_VARIANTS: dict[str, dict[str, Any]] = {
    "refs=1": {"vap_refs": 1}, "refs=3": {"vap_refs": 3}, "refs=5, all cues (default)": {},
    # Cue subsets: the logistic bias is set for all three cues, so no confidence floor (pure ranking accuracy).
    "embedding only": {"vap_components": "embedding", "vap_min_score": 0.0},
    "colour only": {"vap_components": "colour", "vap_min_score": 0.0},
    "keypoints only": {"vap_components": "keypoints", "vap_min_score": 0.0},
    "embedding+colour": {"vap_components": "embedding,colour", "vap_min_score": 0.0},
    "all cues, 64 px embedder crops": {"vap_embed_size": 64},  # the cheaper option (speed section of docs/vap.md)
    # How many proposals (best first by the colour cue) reach the network and ORB: the first-step cost (default 4).
    "all cues, 10 candidates": {"vap_candidates": 10},
    "all cues, 3 candidates": {"vap_candidates": 3},
    # The trained instance head as the embedding cue (docs/results/instance_embedder.md); its time column is paired
    # with the default row's: the same frames, the variants taking turns on each, so machine load hits both alike.
    # The default embedding cue is the blend (the mean of the head's and MobileNetV2's cosines).
    "all cues, MobileNetV2 embedder": {"vap_matcher_embedder": "mobilenet_v2"},
    "all cues, instance embedder": {"vap_matcher_embedder": "instance"},
    "all cues, blended embedder": {"vap_matcher_embedder": "blend"},
}
STYLES = ("recolour", "overlay", "outline", "dim", "crop")


def ablation(episodes: int, seed: int, tasks: Sequence[str] | None = None, eval_episodes: int | None = None,
             out: Path | None = None, variants: Sequence[str] | None = None) -> dict[str, Any]:
    """Reference count and matcher components as grounding accuracy; styles (and all) via run_evaluation."""
    env_options = {"reference_count": 5}  # the same scenes for every variant; refs=N keeps the first N
    tasks = list(tasks or registry.suites()[SUITE].tasks)
    chosen = {k: v for k, v in ABLATION_VARIANTS.items() if not variants or k in variants}
    per_task = {t: grounding_variants(t, episodes, seed, chosen, env_options) for t in tasks}
    rows: dict[str, Any] = {}
    for name, opts in chosen.items():
        k = sum(per_task[t][name]["correct"] for t in tasks)
        n = sum(per_task[t][name]["episodes"] for t in tasks)
        ms = [r["ground_ms"] for t in tasks for r in per_task[t][name]["rows"]]
        rows[name] = {"options": opts, "overall": {"correct": k, "episodes": n, "accuracy": k / max(n, 1),
                                                   "ci95": list(wilson_ci(k, n))},
                      "ground_ms_median": statistics.median(ms),
                      "per_task": {t: {"correct": per_task[t][name]["correct"],
                                       "episodes": per_task[t][name]["episodes"]} for t in tasks}}
        print(f"  {name}: {_pct(k, n)}", file=sys.stderr, flush=True)
    result: dict[str, Any] = {"grounding": rows, "env_options": env_options, "styles": None,
                              "eval_episodes": eval_episodes}
    if generic_available() and eval_episodes != 0:  # --eval-episodes 0: grounding rows only
        from sim_benchmarks.evaluation import EvalConfig, run_evaluation

        styles = {}
        for style in STYLES:
            cfg = EvalConfig(env=SUITE, policies=["vap"], episodes=eval_episodes or episodes, seed=seed,
                             out=(out or Path("runs/vap_ablation")) / f"style_{style}",
                             policy_options={"vap_base": "generic", "vap_style": style})
            summary, _ = run_evaluation(cfg)
            p = summary["policies"]["vap"]
            styles[style] = {"success_rate": p["success_rate"], "correct_object_rate": p["correct_object_rate"],
                             "episodes": p["episodes"]}
            print(f"  style {style}: success {p['success_rate']:.2f} correct-object {p['correct_object_rate']:.2f}",
                  flush=True)
        result["styles"] = styles
    return result


def ablation_markdown(result: dict[str, Any]) -> str:
    tasks = list(next(iter(result["grounding"].values()))["per_task"])
    lines = ["| variant | " + " | ".join(tasks) + " | all (Wilson 95 % CI) | reset + first step ms (median) |",
             "| --- " * (len(tasks) + 3) + "|"]
    for name, r in result["grounding"].items():
        cells = [f"{p['correct']}/{p['episodes']}" for p in r["per_task"].values()]
        overall = _pct(r["overall"]["correct"], r["overall"]["episodes"])
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {overall} | {r['ground_ms_median']:.0f} |")
    if result["styles"]:
        lines += ["", "| highlight style (base generic) | success | correct-object |", "| --- | --- | --- |"]
        for style, s in result["styles"].items():
            lines.append(f"| {style} | {100 * s['success_rate']:.0f} % | {100 * s['correct_object_rate']:.0f} % |")
    elif result.get("eval_episodes") == 0:
        lines += ["", "Highlight-style rows not run (`--eval-episodes 0`)."]
    else:
        lines += ["", "Highlight styles change what the base policy sees, not grounding: their success / "
                  "correct-object rows need the generic VLA checkpoint (`checkpoints/generic_vla/`), absent here."]
    return "\n".join(lines)


# -- speed --------------------------------------------------------------------------------------------------------
def _episode_times(env: Any, policy: Any, seed: int, max_steps: int,
                   inner_resets: list[float] | None = None, inner_acts: list[float] | None = None,
                   own: list[float] | None = None, parts: dict[str, list[float]] | None = None,
                   step_parts: list[dict[str, float]] | None = None) -> tuple[float, list[float]]:
    """(seconds in ``reset``, seconds per ``act``) over one episode (env stepping not timed).

    ``inner_resets`` collects the time of a wrapped base policy's ``reset`` when the wrapper calls it from inside
    ``act`` (VAP does, on its first step, with the rewritten instruction); that time is moved from the ``act`` to the
    ``reset`` total, where the bare base's own instruction encoding is counted too. With ``inner_acts`` (the wrapped
    base's ``act`` durations, see :func:`_timed`) ``own`` receives the wrapper's own work per step: its ``act``
    minus the base's ``act`` and ``reset`` inside it. ``parts`` (name → duration log of timed components) adds one
    ``{name: seconds}`` per step to ``step_parts``.
    """
    obs, info = env.reset(seed=seed)
    t0 = time.perf_counter()
    policy.reset(obs["instruction"], {**info, "policy_seed": seed})
    reset_s = time.perf_counter() - t0
    times = []
    for _ in range(max_steps):
        logged = len(inner_resets) if inner_resets is not None else 0
        acted = len(inner_acts) if inner_acts is not None else 0
        marks = {name: len(log) for name, log in (parts or {}).items()}
        t0 = time.perf_counter()
        action = policy.act(obs)
        elapsed = time.perf_counter() - t0
        moved = sum(inner_resets[logged:]) if inner_resets is not None else 0.0  # resets made inside this act
        times.append(elapsed - moved)
        reset_s += moved
        if own is not None and inner_acts is not None:
            own.append(elapsed - moved - sum(inner_acts[acted:]))
        if step_parts is not None and parts:
            step_parts.append({name: sum(log[marks[name]:]) for name, log in parts.items()})
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    return reset_s, times


def _timed(policy: Any, method: str, log: list[float]) -> None:
    """Make ``policy.<method>`` append its duration to ``log`` (instance attribute; the class is untouched)."""
    inner = getattr(policy, method)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            log.append(time.perf_counter() - t0)

    setattr(policy, method, timed)


# VAP's own components, timed inside its act (owner attribute path on the policy, method). "ground" is the whole
# first-step grounding (detect + match + choose + tracker start + prompt colour); "detect" and "match" are inside it.
VAP_PARTS: dict[str, tuple[str, str]] = {
    "ground": ("", "_ground"), "detect": ("detector", "detect"), "match": ("matcher", "score_with_cues"),
    "track": ("tracker", "update"), "visible_mask": ("tracker", "visible_mask"), "recolour": ("prompter", "apply"),
}
FIRST_STEP_BUDGET_MS, LATER_STEP_BUDGET_MS = 30.0, 1.0  # medians on one core


def _resolve(obj: Any, path: str) -> Any:
    for name in filter(None, path.split(".")):
        obj = getattr(obj, name)
    return obj


def speed(episodes: int, repeats: int, seed: int, task: str = "fractal_pick_my", max_steps: int = 40,
          image_size: int = 224, vap_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per-step ``act`` time of the base vs VAP around it, one torch thread; medians over repeats.

    The base row times VAP's own base object (the same weights and options) in its own episodes on the same seeds,
    so the difference is what VAP adds. Those episodes differ in length (VAP succeeds sooner, over which its
    one-off grounding is spread), so the *paired* figure also times the base's ``act`` calls made inside VAP's
    episodes: VAP's time over exactly the base's work on the same steps and frames. The env is privileged so depth
    arrives with the frame (as from an RGB-D camera) and VAP renders nothing extra.
    """
    import torch

    torch.set_num_threads(1)
    load_before = os.getloadavg()  # timings on a shared machine mean little without it
    vap_options = dict(vap_options or {})
    base_name = str(vap_options.setdefault("vap_base", "generic" if generic_available() else "scripted_expert"))
    suite = registry.suites()[SUITE]
    env = suite.make_env(task, {"privileged": True, "image_size": image_size, "max_steps": max_steps})
    try:
        vap = make_vap(env, task, vap_options, seed=seed)
        base = vap.base
        inner_resets: list[float] = []
        _timed(vap.base, "reset", inner_resets)
        _episode_times(env, vap, seed, 3, inner_resets)  # warm-up: weights, text encoder, first-episode caches
        inner_acts: list[float] = []  # the base's act calls (timed from here on)
        _timed(base, "act", inner_acts)
        parts: dict[str, list[float]] = {name: [] for name in VAP_PARTS}
        for name, (owner, method) in VAP_PARTS.items():
            _timed(_resolve(vap, owner), method, parts[name])
        runs = []
        for r in range(repeats):
            b, v, steady, paired, b_reset, v_reset = [], [], [], [], 0.0, 0.0
            first_own, later_own, first_parts, later_parts = [], [], [], []
            for e in range(episodes):
                s = seed + 100 * r + e
                br, bt = _episode_times(env, base, s, max_steps)
                inner_acts.clear()  # keep only the calls VAP makes in its own episode
                own: list[float] = []
                step_parts: list[dict[str, float]] = []
                vr, vt = _episode_times(env, vap, s, max_steps, inner_resets, inner_acts, own, parts, step_parts)
                b, v, steady, paired = b + bt, v + vt, steady + vt[1:], paired + inner_acts
                b_reset, v_reset = b_reset + br, v_reset + vr
                first_own, later_own = first_own + own[:1], later_own + own[1:]
                first_parts, later_parts = first_parts + step_parts[:1], later_parts + step_parts[1:]
            # "with reset": the per-episode set-up (instruction encoding; VAP: also the reference images) spread
            # over the episode's steps, for both policies alike.
            runs.append({"base_ms": 1000 * statistics.mean(b), "vap_ms": 1000 * statistics.mean(v),
                         "vap_steady_ms": 1000 * statistics.median(steady),
                         "base_median_ms": 1000 * statistics.median(b), "steps": len(v),
                         "base_with_reset_ms": 1000 * (sum(b) + b_reset) / len(b),
                         "vap_with_reset_ms": 1000 * (sum(v) + v_reset) / len(v),
                         "paired_base_ms": 1000 * sum(paired) / len(v),
                         # VAP's own work (its act minus the base's act inside it): the absolute budgets
                         "first_step_own_ms": 1000 * statistics.median(first_own),
                         "later_steps_own_ms": 1000 * statistics.median(later_own),
                         **{f"first_{k}_ms": 1000 * statistics.median(p[k] for p in first_parts) for k in VAP_PARTS},
                         **{f"later_{k}_ms": 1000 * statistics.median(p[k] for p in later_parts) for k in VAP_PARTS}})
    finally:
        env.close()
    load_after = os.getloadavg()
    med = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
    return {"base": base_name, "vap_options": vap_options, "task": task, "image_size": image_size,
            "episodes": episodes, "repeats": repeats,
            "base_ms_per_step": med["base_ms"], "vap_ms_per_step": med["vap_ms"],
            "vap_overhead_ms_per_step": med["vap_ms"] - med["base_ms"],
            "vap_overhead_rel": (med["vap_ms"] - med["base_ms"]) / max(med["base_ms"], 1e-9),
            "base_with_reset_ms_per_step": med["base_with_reset_ms"],
            "vap_with_reset_ms_per_step": med["vap_with_reset_ms"],
            "vap_overhead_rel_with_reset": (med["vap_with_reset_ms"] - med["base_with_reset_ms"])
            / max(med["base_with_reset_ms"], 1e-9),
            "vap_steady_ms_per_step_median": med["vap_steady_ms"],
            "paired_base_ms_per_step": med["paired_base_ms"],
            "vap_overhead_rel_paired": statistics.median((run["vap_ms"] - run["paired_base_ms"])
                                                         / max(run["paired_base_ms"], 1e-9) for run in runs),
            "first_step_own_ms_median": med["first_step_own_ms"],
            "later_steps_own_ms_median": med["later_steps_own_ms"],
            "budgets_ms": {"first_step_own": FIRST_STEP_BUDGET_MS, "later_steps_own": LATER_STEP_BUDGET_MS},
            "parts_ms_median": {k: {"first": med[f"first_{k}_ms"], "later": med[f"later_{k}_ms"]} for k in VAP_PARTS},
            "load_average_1_5_15": {"before": list(load_before), "after": list(load_after)},
            "cpu_count": os.cpu_count(), "runs": runs}


def speed_markdown(r: dict[str, Any]) -> str:
    generic = r["base"] != "scripted_expert"  # the expert reads privileged state: it costs ~nothing per step
    label = r["base"] if generic else "scripted_expert (base is ~free)"
    rel = f"{100 * r['vap_overhead_rel']:+.0f} %" if generic else "n/a (base ~0 ms)"
    rel_reset = f"{100 * r['vap_overhead_rel_with_reset']:+.0f} %" if generic else "n/a"
    rel_paired = f"{100 * r['vap_overhead_rel_paired']:+.0f} %" if generic else "n/a"
    return "\n".join([
        "| base | base ms/step | VAP ms/step (mean, incl. grounding) | VAP overhead ms/step | overhead vs base | "
        "VAP later steps ms (median) | base / VAP ms/step with reset | overhead with reset | "
        "paired: base inside VAP ms/step | paired overhead |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {label} | {r['base_ms_per_step']:.1f} | {r['vap_ms_per_step']:.1f} | "
        f"{r['vap_overhead_ms_per_step']:.1f} | {rel} | {r['vap_steady_ms_per_step_median']:.1f} | "
        f"{r['base_with_reset_ms_per_step']:.1f} / {r['vap_with_reset_ms_per_step']:.1f} | {rel_reset} | "
        f"{r['paired_base_ms_per_step']:.1f} | {rel_paired} |",
        "",
        "| VAP's own work (median ms, one core) | measured | budget |",
        "| --- | --- | --- |",
        f"| first step (grounding + first prompt) | {r['first_step_own_ms_median']:.1f} | "
        f"≤ {r['budgets_ms']['first_step_own']:.0f} |",
        f"| later steps (tracking, mask, recolour) | {r['later_steps_own_ms_median']:.2f} | "
        f"≤ {r['budgets_ms']['later_steps_own']:.0f} |",
        "",
        "Where the time goes (median ms per step, first / later): " + ", ".join(
            f"{k} {v['first']:.1f} / {v['later']:.2f}" for k, v in r["parts_ms_median"].items()),
        f"Load average (1, 5, 15 min) before {_load(r, 'before')}, after {_load(r, 'after')}; "
        f"{r['cpu_count']} CPUs."])


def _load(r: dict[str, Any], when: str) -> str:
    return "/".join(f"{x:.2f}" for x in r["load_average_1_5_15"][when])


# -- calibration on train-split objects ------------------------------------------------------------------------
CALIBRATION_TASKS = {"fractal_pick": "generic_simpler", "fractal_move_near": "generic_simpler",
                     "bridge_pick": "generic_simpler", "bridge_put_on": "generic_simpler"}


def calibration_data(episodes: int, seed: int) -> tuple[list, list, list, Any]:
    """Cues, labels and overlaps of VAP's candidates in train-split scenes (generic_simpler, references on)."""
    from perception.matching import overlap_matrix
    from policies.vap.modeling import _majority_id

    cue_rows, labels, overlaps, matcher = [], [], [], None
    for task, suite_name in CALIBRATION_TASKS.items():
        env = registry.suites()[suite_name].make_env(task, {"privileged": True, "split": "train",
                                                            "references": True})
        policy = make_vap(env, task, {})
        matcher = policy.matcher
        try:
            for i in range(episodes):
                obs, info = env.reset(seed=seed + i)
                matcher.set_references(info["reference_images"])
                cands = policy.detector.detect(obs["image"], info["category"], depth=obs["depth"])
                if len(cands) < 2:
                    continue
                target = env.unwrapped.personal_body_id
                y = np.array([_majority_id(obs["segmentation"], c.mask) == target for c in cands], float)
                if not y.any():
                    continue  # the object was not proposed: nothing to calibrate on
                masks = [c.mask for c in cands]
                cue_rows.append(matcher.cues(matcher.views(obs["image"], masks)))
                labels.append(y)
                overlaps.append(overlap_matrix(masks))
        finally:
            env.close()
    return cue_rows, labels, overlaps, matcher


def calibrate(episodes: int, seed: int) -> dict[str, Any]:
    """Fit the matcher's logistic weights on train-split scenes; report top-1 before and after on those scenes."""
    from perception.matching import InstanceMatcher

    cue_rows, labels, overlaps, matcher = calibration_data(episodes, seed)
    fitted = matcher.fit_calibration(cue_rows, labels, steps=3000, lr=0.5, overlaps=overlaps)

    def top1(m: InstanceMatcher) -> float:
        hits = [y[int(np.argmax(m.combine(c, o)))] for c, y, o in zip(cue_rows, labels, overlaps, strict=True)]
        return float(np.mean(hits))

    before = top1(matcher)
    after_matcher = InstanceMatcher(fitted, embedder=matcher.embedder)
    return {"scenes": len(labels), "top1_default": before, "top1_fitted": top1(after_matcher),
            "weights_abs": fitted.weights_abs, "weights_rel": fitted.weights_rel, "bias": fitted.bias}


@main_guard
def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="sim_benchmarks.studies.vap.vap_benchmark", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("grounding", "ablation", "speed", "calibrate"):
        p = sub.add_parser(name)
        p.add_argument("--episodes", type=int, default={"speed": 3}.get(name, 30))
        seeds = {"grounding": 10000, "ablation": 20000, "calibrate": 0, "speed": 30000}
        p.add_argument("--seed", type=int, default=seeds[name])
        p.add_argument("--out", writes="folder", type=Path, default=Path(f"runs/vap_{name}"))
        p.add_argument("--tasks", default="", help="comma-separated personalized_simpler tasks (default: all)")
        if name == "speed":
            p.add_argument("--repeats", type=int, default=3)
        if name == "grounding":
            p.add_argument("--env-option", action="append", metavar="KEY=VALUE",
                           help="personalized_simpler env option, e.g. image_size=448 (repeatable)")
            p.add_argument("--table-seeds", action="store_true",
                           help="the scenes launch.eval --seed SEED runs (derived seeds), not SEED + i")
        if name in ("grounding", "speed"):
            p.add_argument("--policy-option", action="append", metavar="KEY=VALUE",
                           help="vap policy option, e.g. vap_candidates=10 (repeatable)")
        if name == "ablation":
            p.add_argument("--eval-episodes", type=int, default=None,
                           help="episodes per task of each highlight-style row (default --episodes; 0 = no style rows)")
            p.add_argument("--variants", default="", help="semicolon-separated variant names (default: all)")
    args = parser.parse_args(argv)
    try:
        if args.episodes < 1:
            raise ConfigError(f"--episodes must be a positive integer, got {args.episodes}")
        if getattr(args, "eval_episodes", None) is not None and args.eval_episodes < 0:
            raise ConfigError(f"--eval-episodes must be >= 0 (0 = no highlight-style rows), got {args.eval_episodes}")
        registry.load_all()
        tasks = [t for t in args.tasks.split(",") if t] or None
        for t in tasks or []:
            if t not in registry.suites()[SUITE].tasks:
                from envs.errors import choice_error

                raise choice_error(f"task of {SUITE}", t, list(registry.suites()[SUITE].tasks))
        start = time.perf_counter()
        if args.command == "grounding":
            policy_options = parse_options(args.policy_option, "--policy-option")
            registry.check_policy_options(SUITE, policy_options)
            result = grounding(args.episodes, args.seed, tasks, policy_options,
                               parse_options(args.env_option, "--env-option"), args.table_seeds)
            table = grounding_markdown(result)
        elif args.command == "ablation":
            variants = [v for v in args.variants.split(";") if v]
            bad = [v for v in variants if v not in ABLATION_VARIANTS]
            if bad:
                from envs.errors import choice_error

                raise choice_error("ablation variant", bad[0], list(ABLATION_VARIANTS))
            result = ablation(args.episodes, args.seed, tasks, args.eval_episodes, args.out, variants)
            table = ablation_markdown(result)
        elif args.command == "speed":
            if args.repeats < 1:
                raise ConfigError(f"--repeats must be a positive integer, got {args.repeats}")
            policy_options = parse_options(args.policy_option, "--policy-option")
            registry.check_policy_options(SUITE, policy_options)
            result = speed(args.episodes, args.repeats, args.seed, task=(tasks or ["fractal_pick_my"])[0],
                           vap_options=policy_options)
            table = speed_markdown(result)
        else:
            result = calibrate(args.episodes, args.seed)
            weights = json.dumps({k: result[k] for k in ("weights_abs", "weights_rel", "bias")}, indent=1)
            table = (f"train-split scenes: {result['scenes']}; top-1 with default weights "
                     f"{100 * result['top1_default']:.1f} %, fitted {100 * result['top1_fitted']:.1f} %\n\n"
                     f"```\n{weights}\n```")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    command = "python -m sim_benchmarks.studies.vap.vap_benchmark " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = {"schema": "embodia.vap_benchmark/1", "command": command, "wall_s": time.perf_counter() - start,
              **result}
    args.out.mkdir(parents=True, exist_ok=True)  # only now: a bad option found mid-run leaves nothing behind
    write_json_atomic(args.out / f"{args.command}.json", result)
    (args.out / f"{args.command}.md").write_text(f"`{command}`\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
