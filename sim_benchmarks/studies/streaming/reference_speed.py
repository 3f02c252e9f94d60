"""Embodia's streaming agents timed side by side with the public reference implementations (interleaved rounds).

    python -m launch.study streaming.reference_speed \\
        --streaming-drl PATH --stream-rep-rl PATH [--torch-python PY] [--jax-python PY] \\
        --minatar-steps 5000 --atari-steps 1000 --rounds 3 --out runs/reference_speed

``--streaming-drl`` is a local checkout of mohmdelsayed/streaming-drl (Stream-x: ``stream_q_minatar.py``,
``stream_q_atari.py``, torch) and ``--stream-rep-rl`` one of chandar-lab/stream-rep-rl (``algorithms/streamq.py``
and ``algorithms/streamq-spr-ortho.py``, JAX). Nothing is fetched: a missing checkout or script exits 2 naming it.
Each reference runs unchanged from its own checkout, in a subprocess of the interpreter given (its own virtual
environment), through ``_reference_runner.py`` beside this file, which calls the script's own training entry
point with ε held at 0.01 and times ``--*-steps`` full steps after a warm-up (see that file for the exact settings
and the gymnasium shims). Embodia's agents are timed the same way, each run in a fresh process
(``_embodia_runner.py``) that sets its one-thread variables before it imports anything, with
``streaming_speed.measure`` (ε held at 0.01, same env, same step counts). Every process is asked for one thread
(OMP/MKL/OpenBLAS/numba variables, XLA's single-threaded Eigen): each reports the thread pools its libraries run,
how many of its threads ran in the timed window and its CPU seconds per wall second ("cores busy"), and the study
stops, publishing nothing, when a pool runs more than one thread or a process kept more than ``MAX_CORES_BUSY``
cores busy (XLA reports no pool size, so for JAX that is the check). ``--pin-core N`` pins every process to core N.

Each round runs every entry once, in an order rotated by one per round; ratios are taken within a round (both
sides of a ratio saw the same machine load) and summarised over rounds. Writes ``reference_speed.json`` to
``--out`` and the section "Side by side with the reference implementations" of ``--page`` (the streaming results
page; ``--page ''`` leaves it alone).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from sim_benchmarks.cli import ArgumentParser, main_guard, require_positive
from sim_benchmarks.studies.aux.results import mean_ci
from sim_benchmarks.thread_pools import check_thread_pools

RUNNER = Path(__file__).with_name("_reference_runner.py")
EMBODIA_RUNNER = Path(__file__).with_name("_embodia_runner.py")
EMBODIA_MARK = "EMBODIA_SPEED "  # the runner's result line (it imports this module, so the literal is repeated there)
SECTION = "## Side by side with the reference implementations"
# Read by each process at start-up (before any import in Embodia's runner). XLA_FLAGS holds XLA flags only, each
# with its "--": a bare token is not a flag.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "VECLIB_MAXIMUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
# A process with one running thread keeps at most one core busy; above this (rounding and the kernel's accounting
# allow a little) it ran threads in parallel, whatever its pools report.
MAX_CORES_BUSY = 1.1
# checkout flag → (repository, scripts the study runs from it)
CHECKOUTS = {
    "streaming_drl": ("mohmdelsayed/streaming-drl", ("stream_q_minatar.py", "stream_q_atari.py")),
    "stream_rep_rl": ("chandar-lab/stream-rep-rl", ("algorithms/streamq.py", "algorithms/streamq-spr-ortho.py")),
}


@dataclass(frozen=True)
class Entry:
    """One timed implementation: a reference script (``script`` set) or an Embodia agent."""

    key: str
    suite: str  # minatar | atari
    label: str
    script: str = ""  # _reference_runner.SCRIPTS key
    checkout: str = ""  # CHECKOUTS key
    agent: str = ""
    backend: str = "torch"
    options: dict[str, Any] = field(default_factory=dict)


ENV = {"minatar": ("minatar:breakout", "MinAtar/Breakout-v1"), "atari": ("atari:Breakout", "BreakoutNoFrameskip-v4")}
# The Stream-x Atari setup: a lost life ends the learner's episode and FIRE starts play (as the reference wraps it).
ENV_OPTIONS = {"minatar": {}, "atari": {"episodic_life": True, "fire_reset": True}}
ENTRIES = (
    Entry("ref_q_minatar_torch", "minatar", "Stream-x `stream_q_minatar.py` (torch)", "stream_q_minatar",
          "streaming_drl"),
    Entry("ref_q_minatar_jax", "minatar", "stream-rep-rl `streamq.py` (JAX)", "streamq", "stream_rep_rl"),
    Entry("ref_spr_minatar_jax", "minatar", "stream-rep-rl `streamq-spr-ortho.py` as shipped (JAX)",
          "streamq_spr_ortho", "stream_rep_rl"),
    Entry("q_minatar_numba", "minatar", "Embodia `stream_q`, `backend=numba`", agent="stream_q", backend="numba"),
    Entry("q_minatar_torch", "minatar", "Embodia `stream_q`, torch", agent="stream_q"),
    Entry("spr_minatar_numba", "minatar", "Embodia `stream_spr`, `backend=numba`", agent="stream_spr",
          backend="numba"),
    Entry("ref_q_atari_torch", "atari", "Stream-x `stream_q_atari.py` (torch)", "stream_q_atari", "streaming_drl"),
    Entry("q_atari_numba_stream_x", "atari", "Embodia `stream_q`, `backend=numba`, `network=stream_x`",
          agent="stream_q", backend="numba", options={"network": "stream_x"}),
    Entry("q_atari_numba_nature", "atari", "Embodia `stream_q`, `backend=numba`, `network=nature`",
          agent="stream_q", backend="numba", options={"network": "nature"}),
)
# (numerator, denominator): Embodia over the reference it stands beside
PAIRS = (
    ("q_minatar_numba", "ref_q_minatar_jax"),
    ("q_minatar_numba", "ref_q_minatar_torch"),
    ("q_minatar_torch", "ref_q_minatar_torch"),
    ("spr_minatar_numba", "ref_spr_minatar_jax"),
    ("q_atari_numba_stream_x", "ref_q_atari_torch"),
    ("q_atari_numba_nature", "ref_q_atari_torch"),
)


def check_checkouts(paths: dict[str, Path | None], pythons: dict[str, Path]) -> None:
    """ConfigError naming the first missing checkout, reference script or interpreter (nothing is fetched)."""
    for key, (repo, scripts) in CHECKOUTS.items():
        flag = "--" + key.replace("_", "-")
        root = paths.get(key)
        if root is None:
            raise ConfigError(f"{flag} is required: the path of a local checkout of {repo}")
        for rel in scripts:
            if not (root / rel).is_file():
                raise ConfigError(f"{flag} {root}: missing {root / rel} (need a checkout of {repo} with "
                                  f"{', '.join(scripts)})")
    for flag, py in pythons.items():
        if not py.is_file():
            raise ConfigError(f"{flag} {py}: no such interpreter")


def git_commit(root: Path) -> str:
    """The checkout's HEAD commit, with " (modified)" when tracked files differ from it; "unknown" outside git."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" (modified)" if dirty else "")


def interpreter_versions(python: Path, packages: tuple[str, ...]) -> dict[str, str]:
    """Python and package versions installed for ``python`` (missing packages are left out)."""
    code = ("import importlib.metadata as m, json, platform\nout={'python': platform.python_version()}\n"
            f"for p in {list(packages)!r}:\n    try: out[p]=m.version(p)\n    except Exception: pass\n"
            "print(json.dumps(out))")
    res = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def run_reference(entry: Entry, python: Path, checkout: Path, steps: int, warmup: int, seed: int,
                  core: int | None = None) -> dict[str, Any]:
    """One timed run of a reference script in its own interpreter (pinned to ``core`` if given); raises with its
    stderr tail on failure."""
    cmd = [str(python), str(RUNNER), "--script", entry.script, "--checkout", str(checkout),
           "--env", ENV[entry.suite][1], "--warmup", str(warmup), "--steps", str(steps), "--seed", str(seed)]
    env = child_env()
    env.pop("PYTHONPATH", None)  # the reference sees its own environment, not Embodia's
    pin = None if core is None else (lambda: os.sched_setaffinity(0, {core}))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=pin)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("REFERENCE_SPEED ")]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"{entry.key} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    row = json.loads(lines[-1][len("REFERENCE_SPEED "):])
    printed = re.search(r"Total number of params: (\d+)", res.stdout)  # stream-rep-rl prints its count
    if printed and "parameters" not in row:
        row["parameters"] = int(printed.group(1))
    return row


def child_env() -> dict[str, str]:
    """The environment of every timed process: this one's plus the one-thread variables and no wandb."""
    return {**os.environ, **ONE_THREAD, "WANDB_MODE": "disabled", "WANDB_SILENT": "true"}


def run_embodia_process(entry: Entry, steps: int, warmup: int, core: int | None = None,
                        breakdown_only: bool = False) -> dict[str, Any]:
    """One timed block of an Embodia agent in a fresh process (``_embodia_runner.py``; pinned to ``core`` if given),
    or with ``breakdown_only`` its per-phase breakdown; raises with its stderr tail on failure."""
    cmd = [sys.executable, str(EMBODIA_RUNNER), "--entry", entry.key, "--steps", str(steps), "--warmup", str(warmup),
           *(["--breakdown"] if breakdown_only else [])]
    env = child_env()
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])  # this checkout's code, whatever the caller's
    pin = None if core is None else (lambda: os.sched_setaffinity(0, {core}))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=pin)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith(EMBODIA_MARK)]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"{entry.key} failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(lines[-1][len(EMBODIA_MARK):])


def check_process(key: str, row: dict[str, Any], limit: int = 1) -> None:
    """RuntimeError if the run of ``key`` had a pool over ``limit`` threads or kept more than ``MAX_CORES_BUSY``
    cores busy; pools that report no size (XLA's) are judged by the latter alone."""
    pools = [p for p in row.get("thread_pools", []) if p.get("threads") is not None]
    try:
        check_thread_pools(limit, pools)
    except RuntimeError as exc:
        raise RuntimeError(f"{key}: {exc}") from None
    busy = row.get("cpu_per_wall")
    if busy is not None and busy > MAX_CORES_BUSY * limit:
        raise RuntimeError(f"{key}: asked for {limit} thread(s), but the process kept {busy:.2f} cores busy "
                           f"({row.get('threads_ran')} of its threads ran in the timed window)")


def distinct_pools(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pools one entry's processes reported, each distinct (api, library, threads) once, in first-seen order."""
    seen: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        for p in row.get("thread_pools", []):
            seen.setdefault((p.get("api"), p.get("library"), p.get("threads")), p)
    return list(seen.values())


def run_embodia(entry: Entry, steps: int, warmup: int) -> dict[str, Any]:
    """One timed block of an Embodia agent in this process (a fresh learner and env, ε held at 0.01)."""
    from sim_benchmarks.studies.streaming.streaming_speed import measure

    row = measure(entry.agent, ENV[entry.suite][0], steps, warmup, 1, entry.backend, dict(entry.options),
                  ENV_OPTIONS[entry.suite])
    return {"steps_per_second": row["steps_per_second"], "cpu_per_wall": row["cpu_per_wall"], "steps": steps,
            "warmup": warmup}


PHASES = ("env", "preprocessing", "forward", "backward", "traces + ObGD", "fused Q step", "SPR heads", "other")


def cpu_clock() -> float:
    """CPU seconds of the calling thread: the breakdown's clock. On a loaded machine wall time mostly measures the
    wait for a core; the timed process runs one thread, so this is its CPU time."""
    return time.thread_time()


class PhaseClock:
    """Exclusive CPU time per phase (:func:`cpu_clock`): wrapped callables add their own time to their phase, minus
    the time of any wrapped callable they call (so nested phases are never counted twice)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._stack: list[str] = []
        self._mark = 0.0

    def wrap(self, phase: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            now = cpu_clock()
            if self._stack:
                self.totals[self._stack[-1]] += now - self._mark
            self._stack.append(phase)
            self._mark = now
            try:
                return fn(*args, **kwargs)
            finally:
                now = cpu_clock()
                self.totals[self._stack.pop()] += now - self._mark
                self._mark = now

        return timed


def breakdown(entry: Entry, steps: int, warmup: int) -> dict[str, float]:
    """CPU milliseconds per step in each of ``PHASES`` for an Embodia agent (one instrumented block of ``steps``).

    The learner's own parts are wrapped on the instance (observation pipe, compiled network, optimiser, SPR
    update); the torch path's fused forward/backward are module functions of ``agents.streaming.stream_q``,
    swapped for the block and restored. "other" is the rest of the step (ε-greedy, argmax, Python glue).
    """
    import agents.streaming.stream_q as sq
    from envs.arcade import make_arcade_env
    from sim_benchmarks.studies.streaming.streaming_speed import _make

    env_name = ENV[entry.suite][0]
    env = make_arcade_env(env_name, ENV_OPTIONS[entry.suite])
    learner = _make(entry.agent, env_name, env, entry.backend, dict(entry.options))
    obs, _ = env.reset(seed=0)

    def block(n: int, clock: PhaseClock | None) -> float:
        nonlocal obs
        step, reset = (env.step, env.reset) if clock is None else (clock.wrap("env", env.step),
                                                                   clock.wrap("env", env.reset))
        t0 = cpu_clock()
        for _ in range(n):
            a = learner.act(obs)
            nxt, r, term, trunc, _ = step(a)
            learner.observe(obs, a, float(r), nxt, term, trunc)
            obs = reset()[0] if term or trunc else nxt
        return cpu_clock() - t0

    block(warmup, None)
    clock = PhaseClock()
    pipe, opt = learner.pipe, learner.opt
    for name in ("get", "push"):
        setattr(pipe, name, clock.wrap("preprocessing", getattr(pipe, name)))
    pipe.reward_scaler = clock.wrap("preprocessing", pipe.reward_scaler)
    for name in ("accumulate", "step", "reset_traces"):
        setattr(opt, name, clock.wrap("traces + ObGD", getattr(opt, name)))
    for name in ("_spr_update", "_ema_update"):
        if hasattr(learner, name):
            setattr(learner, name, clock.wrap("SPR heads", getattr(learner, name)))
    saved = (sq.fused_forward, sq.fused_backward)
    if getattr(learner, "fused", None) is not None:  # normaliser, forward, backward, traces, ObGD: one call
        learner.fused.step = clock.wrap("fused Q step", learner.fused.step)
        learner.fused.forward = clock.wrap("forward", learner.fused.forward)  # the acting forward at episode starts
    elif learner.fast is not None:
        learner.fast.forward = clock.wrap("forward", learner.fast.forward)
        learner.fast.backward = clock.wrap("backward", learner.fast.backward)
    else:
        sq.fused_forward, sq.fused_backward = clock.wrap("forward", saved[0]), clock.wrap("backward", saved[1])
    try:
        total = block(steps, clock)
    finally:
        sq.fused_forward, sq.fused_backward = saved
        env.close()
    clock.totals["other"] = max(total - sum(clock.totals.values()), 0.0)
    out = {k: 1000.0 * v / steps for k, v in clock.totals.items()}
    out["total"] = 1000.0 * total / steps
    modules = [learner.q, *getattr(learner, "heads", [])]  # SPR adds transition, projection, predictor
    out["parameters"] = sum(p.numel() for m in modules for p in m.parameters())
    return out


def summarize(rates: dict[str, list[float]], pairs: tuple[tuple[str, str], ...] = PAIRS) -> dict[str, Any]:
    """Per entry the median steps/s and range over rounds; per pair the within-round ratios, their median, range
    and geometric mean with a 95 % t interval (on the log ratios). Pairs with a side not timed are left out."""
    entries = {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "rounds": list(v)}
               for k, v in rates.items() if v}
    ratios = []
    for num, den in pairs:
        if num not in entries or den not in entries:
            continue
        per_round = [a / b for a, b in zip(rates[num], rates[den], strict=True)]
        # ratios multiply: the t interval is taken on their logs, so it stays positive and symmetric in ×/÷
        mean, lo, hi = (math.exp(x) for x in mean_ci([math.log(x) for x in per_round]))
        ratios.append({"numerator": num, "denominator": den, "rounds": per_round,
                       "median": statistics.median(per_round), "min": min(per_round), "max": max(per_round),
                       "geomean": mean, "ci95": [lo, hi]})
    return {"entries": entries, "ratios": ratios}


def cpu_rates(runs: dict[str, list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Steps per second of each run's own CPU time (all its threads) in the timed window: what a step costs in
    CPU, whatever share of a core the scheduler gave the process (runs without ``cpu_per_wall`` are left out)."""
    return {k: [r["steps_per_second"] / r["cpu_per_wall"] for r in rows] for k, rows in runs.items()
            if rows and all(r.get("cpu_per_wall") for r in rows)}


def _ratio_rows(summary: dict[str, Any], labels: dict[str, str]) -> list[str]:
    return [f"| {labels[r['numerator']]} ÷ {labels[r['denominator']]} | **{r['median']:.2f}×** | "
            f"{r['min']:.2f}–{r['max']:.2f} | {r['geomean']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] | "
            f"{' / '.join(f'{x:.2f}' for x in r['rounds'])} |" for r in summary["ratios"]]


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def parameter_count(result: dict[str, Any], key: str) -> int | None:
    """Trained parameters of an entry: reported by the reference run, or counted in the Embodia breakdown."""
    runs = result.get("runs", {}).get(key) or [{}]
    return runs[0].get("parameters") or result.get("breakdown_ms_per_step", {}).get(key, {}).get("parameters")


def spr_work_note(result: dict[str, Any]) -> list[str]:
    """What the SPR ratio compares: the two implementations' parameters and update rates (lines of the page)."""
    if not {"spr_minatar_numba", "ref_spr_minatar_jax"} <= set(result["summary"]["entries"]):
        return []
    ours, ref = parameter_count(result, "spr_minatar_numba"), parameter_count(result, "ref_spr_minatar_jax")
    size = (f"Embodia trains {ours:,} parameters (Q network + SPR heads), the reference prints {ref:,} (its Q "
            "network only: its script counts before building the SPR heads)" if ours and ref
            else "the parameter counts are in the table above")
    return ["", f"What the SPR ratio compares. **Parameters**: {size}, for the same MinAtar Breakout task: the "
            "reference's MinAtar encoder reads each (10, 10, C) board as (10, C, 10) and passes its 3×3 kernel as a "
            "bare int, so its convolutions are 1-D and its network and heads are smaller than the intended ones "
            "(Embodia's Q network is Stream-x's 132,179-parameter MinAtar network; its SPR heads add the transition "
            "model's two 3×3 convolutions, the 1024→128 projection and the 128→128 predictor). **Update rate**: "
            "the same steps take an SPR update in both — a full window of K + 1 = 6 observations inside the "
            "current episode, a greedy action, not terminal (the reference's `spr_condition`, "
            "`algorithms/streamq-spr-ortho.py` line 980; ε is held at 0.01 here, so that is most steps in both). "
            "Per step the reference does some work on every step that Embodia does only on update steps: its "
            "jitted step always computes the target encoder and projection of the window and runs the momentum "
            "projections, optimiser applies and EMAs of every module (`jax.lax.cond` skips only the loss and its "
            "gradient; on a skipped step its momentum buffers decay by β against a zero gradient, where "
            "Embodia's move only on update steps). Its loss is the mean over the K predictions where Embodia's is "
            "the sum (the paper's), a K-fold smaller SPR step: a difference of step size, not of work."]


def machine_state(result: dict[str, Any]) -> str:
    """``loaded`` when the load average passed twice the core count while runs were timed (a pinned process then
    waits for its core), else ``lightly loaded``."""
    loads = result.get("loadavg_runs") or [result["loadavg_start"][0], result["loadavg_end"][0]]
    return "loaded" if max(loads) > 2 * result["cpus"] else "lightly loaded"


def render_section(result: dict[str, Any]) -> str:
    """The results-page section (markdown) for one study run."""
    s, labels = result["summary"], {e.key: e.label for e in ENTRIES}
    args = result["args"]
    suites = str(args.get("suites", "minatar,atari")).split(",")
    timed = [f"{args[f'{k}_steps']:,} {name} Breakout steps after {args[f'{k}_warmup']:,}"
             for k, name in (("minatar", "MinAtar"), ("atari", "Atari")) if k in suites]
    out = [SECTION, "",
           f"Run {result['finished_utc']} on {result['machine']}. **The machine was {machine_state(result)}** "
           f"(load average "
           f"{result['loadavg_start'][0]:.1f} at the start, {result['loadavg_end'][0]:.1f} at the end"
           + (f", {min(result['loadavg_runs']):.1f}–{max(result['loadavg_runs']):.1f} (median "
              f"{statistics.median(result['loadavg_runs']):.1f}) as the {len(result['loadavg_runs'])} timed runs "
              "ended" if result.get("loadavg_runs") else "")
           + f", on {result['cpus']} cores shared with other jobs), so absolute steps/s here are low and noisy; the "
           "**ratios** — taken within a round, where both sides saw the same load — are the comparable figure. "
           f"{args['rounds']} interleaved rounds (order rotated each round), one thread per process, ε held at "
           f"0.01, seed {args['seed']}; each round times {' and '.join(timed)} warm-up steps. A step is act + "
           "env step (with the implementation's own preprocessing) + update.", "", "```bash", result["command"],
           "```", "",
           "| implementation | suite | trained parameters | median steps/s | range over rounds | per round | "
           "cores busy | threads that ran |",
           "| --- | --- | ---: | ---: | --- | --- | ---: | ---: |"]
    busy, ran = result.get("cpu_per_wall", {}), result.get("threads_ran", {})
    for e in ENTRIES:
        if e.key in s["entries"]:
            r = s["entries"][e.key]
            n = parameter_count(result, e.key)
            cores = f"{busy[e.key]:.2f}" if e.key in busy else "–"
            counts = sorted({x for x in ran.get(e.key, []) if x is not None})
            threads = "–" if not counts else "/".join(str(x) for x in counts)
            out.append(f"| {e.label} | {ENV[e.suite][0]} | {f'{n:,}' if n else '–'} | {_fmt(r['median'])} | "
                       f"{_fmt(r['min'])}–{_fmt(r['max'])} | {' / '.join(_fmt(x) for x in r['rounds'])} | "
                       f"{cores} | {threads} |")
    pools = result.get("thread_pools")
    if pools:
        out += ["", "\"Cores busy\" is the process's CPU seconds (all threads) per wall second inside the timed "
                "window (median over rounds); \"threads that ran\" counts the process's threads that used ≥ 5 % of "
                "that window's wall time (Embodia's: over warm-up and window), each value seen over the rounds. Every "
                "process starts with " + ", ".join(f"`{k}={v}`" for k, v in result.get("one_thread_env", {}).items())
                + " in its environment (Embodia's runner sets them before its first import) and reports its "
                "thread pools after its run; the study stops, publishing nothing, if a pool runs more than one "
                f"thread or a process keeps more than {MAX_CORES_BUSY} cores busy"
                + (f"; every process pinned to core {result['pinned_core']}." if result.get("pinned_core") is not None
                   else ".") + " Pools reported:", ""]
        for e in ENTRIES:
            if pools.get(e.key):
                out.append(f"- {e.label}: " + ", ".join(
                    f"{p['api']} ({p['library']}) {'size not reported' if p['threads'] is None else p['threads']}"
                    for p in pools[e.key]))
    out += ["", "Ratios of wall-clock steps/s:", "",
            "| ratio (within a round) | median | range | geometric mean [95 % t CI] | per round |",
            "| --- | ---: | --- | --- | --- |", *_ratio_rows(s, labels)]
    by_cpu = result.get("summary_cpu") or summarize(cpu_rates(result.get("runs", {})))
    n_rounds = max((len(v["rounds"]) for v in by_cpu["entries"].values()), default=0)
    if by_cpu["ratios"]:
        out += ["", "The same runs by CPU time: steps per second of each process's own CPU time (all its threads) "
                "in the timed window, i.e. what a step costs whatever share of a core the scheduler gave the "
                "process. On a loaded machine the processes of one round get different shares (the \"cores busy\" "
                "column), which moves the wall-clock ratios; the CPU-time ratios do not depend on that share (they "
                "still include what contention costs in caches and context switches). Median CPU-steps/s over "
                "rounds: " + "; ".join(f"{labels[k]} {_fmt(v['median'])}" for k, v in by_cpu["entries"].items())
                + ".", "",
                "| ratio of CPU-steps/s (within a round) | median | range | geometric mean [95 % t CI] | per round |",
                "| --- | ---: | --- | --- | --- |", *_ratio_rows(by_cpu, labels), "",
                "CPU-steps/s of every implementation in each round (a reference's column moving between rounds is "
                "its own cost per step moving with the machine's state, not Embodia's):", "",
                "| implementation | " + " | ".join(f"round {i + 1}" for i in range(n_rounds)) + " |",
                "| --- |" + " ---: |" * n_rounds,
                *(f"| {labels[k]} | " + " | ".join(_fmt(x) for x in v["rounds"]) + " |"
                  for k, v in by_cpu["entries"].items())]
    out += spr_work_note(result)
    if result.get("breakdown_ms_per_step"):
        clock = ("CPU ms per step of the process's one thread" if result.get("breakdown_clock") == "thread cpu"
                 else "ms per step")
        out += ["", f"Where an Embodia step goes ({clock}, one instrumented block of the same length after the "
                "rounds; each phase's own time, nested phases not counted twice; \"fused Q step\" is the one compiled "
                "call of `backend=numba` on MinAtar (normaliser, forward, backward, traces, ObGD); \"other\" is "
                "ε-greedy, argmax and Python glue):", "",
                "| implementation | " + " | ".join(PHASES) + " | total |",
                "| --- |" + " ---: |" * (len(PHASES) + 1)]
        for e in ENTRIES:
            row = result["breakdown_ms_per_step"].get(e.key)
            if row:
                out.append(f"| {e.label} | " + " | ".join(f"{row.get(k, 0.0):.3f}" for k in (*PHASES, "total")) + " |")
    out += ["", "References (run unchanged from these checkouts, through `sim_benchmarks/studies/streaming/"
            "_reference_runner.py`, which calls each script's own training entry point and reads the clock "
            "around the timed steps):", ""]
    for key, (repo, scripts) in CHECKOUTS.items():
        ref = result["references"][key]
        vers = ", ".join(f"{k} {v}" for k, v in ref["versions"].items())
        out.append(f"- {repo} at `{ref['commit']}` ({', '.join(f'`{x}`' for x in scripts)}); ran with {vers}.")
    emb = ", ".join(f"{k} {v}" for k, v in result["embodia_versions"].items())
    out += [f"- Embodia ran with {emb}."]
    if result.get("ale_rom_dir"):
        out.append("- ale-py 0.8.x ships no ROMs: `ALE_PY_ROM_DIR` pointed the reference's ale-py at the Breakout ROM "
                   "shipped with Embodia's ale-py.")
    jit = {k: [(x.get("jit_variants_at_end") or 0) - (x.get("jit_variants_at_start") or 0) for x in runs]
           for k, runs in result.get("runs", {}).items() if runs and "jit_variants_at_end" in runs[0]}
    if jit:
        out.append("- JAX compilations inside the timed window (new jit variants per round; the runner compiles "
                   "every variant of the jitted update before the window, so this should read 0): " + "; ".join(
                       f"{labels[k]} {' / '.join(str(n) for n in v)}" for k, v in jit.items()) + ".")
    out.append("")
    return "\n".join(out) + "\n"


def write_section(page: Path, section: str) -> None:
    """Replace the page's side-by-side section (up to the next ``## `` heading), or insert it before
    ``## Details`` (appended when the page has neither)."""
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip() == SECTION), None)
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = [section + ("\n" if end < len(lines) else "")]
    else:
        at = next((i for i, ln in enumerate(lines) if ln.rstrip() == "## Details"), None)
        block = section + "\n"
        if at is None:
            lines.append(("\n" if text and not text.endswith("\n\n") else "") + block)
        else:
            lines.insert(at, block)
    tmp = page.with_suffix(page.suffix + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(page)


def command_line(args: Any) -> str:
    """The study's command for the page, with the machine-local checkout and interpreter paths as placeholders."""
    # ale-py 0.8.x (the torch reference's) ships no ROMs: the page's command must say how the run found them.
    prefix = "ALE_PY_ROM_DIR=<ale-py with ROMs>/roms " if os.environ.get("ALE_PY_ROM_DIR") else ""
    parts = [prefix + "python -m launch.study streaming.reference_speed",
             "--streaming-drl <streaming-drl checkout>", "--stream-rep-rl <stream-rep-rl checkout>",
             "--torch-python <torch env>/bin/python", "--jax-python <jax env>/bin/python",
             f"--suites {args.suites}", f"--minatar-steps {args.minatar_steps}",
             f"--minatar-warmup {args.minatar_warmup}", f"--atari-steps {args.atari_steps}",
             f"--atari-warmup {args.atari_warmup}", f"--rounds {args.rounds}", f"--seed {args.seed}",
             *([f"--pin-core {args.pin_core}"] if getattr(args, "pin_core", None) is not None else []),
             f"--out {args.out}"]
    return " \\\n    ".join(parts)


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for p in ("torch", "numba", "numpy", "gymnasium", "ale-py", "minatar"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            pass
    return out


def render_saved(path: Path, page: Path | None) -> int:
    """Print, and write into ``page``'s section, the section of a saved run; ConfigError on an unreadable file."""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
        section = render_section(result)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--render {path}: not a readable reference_speed.json ({type(exc).__name__})") from None
    if page is not None:
        if not page.is_file():
            raise ConfigError(f"--page {page}: no such file")
        write_section(page, section)
    print(section)
    return 0


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="launch.study streaming.reference_speed", description=__doc__.splitlines()[0])
    p.add_argument("--streaming-drl", type=Path, help="local checkout of mohmdelsayed/streaming-drl")
    p.add_argument("--stream-rep-rl", type=Path, help="local checkout of chandar-lab/stream-rep-rl")
    p.add_argument("--torch-python", type=Path, default=Path(sys.executable),
                   help="interpreter whose environment runs streaming-drl (torch, gymnasium 0.29, minatar, ale-py, "
                        "stable-baselines3)")
    p.add_argument("--jax-python", type=Path, default=Path(sys.executable),
                   help="interpreter whose environment runs stream-rep-rl (jax, flax, optax, wandb, tyro, ...)")
    p.add_argument("--suites", default="minatar,atari", help="comma-separated subset of minatar,atari")
    p.add_argument("--minatar-steps", type=int, default=5000)
    p.add_argument("--minatar-warmup", type=int, default=1000)
    p.add_argument("--atari-steps", type=int, default=1000)
    p.add_argument("--atari-warmup", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default="",
                   help="comma-separated entry keys to time (default: every entry of --suites); ratios need both "
                        "sides")
    p.add_argument("--pin-core", type=int, default=None,
                   help="pin every process (references and Embodia) to this CPU core (like taskset -c N)")
    p.add_argument("--no-breakdown", dest="breakdown", action="store_false",
                   help="skip the instrumented per-phase block of each Embodia agent after the rounds")
    p.add_argument("--out", writes="folder", type=Path, default=Path("runs/reference_speed"))
    p.add_argument("--page", default="docs/results/streaming.md",
                   help="results page whose side-by-side section is rewritten ('' = none)")
    p.add_argument("--render", type=Path, default=None, metavar="JSON",
                   help="only rewrite --page's section from a saved reference_speed.json (times nothing)")
    args = p.parse_args(argv)
    if args.render is not None:
        return render_saved(args.render, Path(args.page) if args.page else None)
    require_positive(args, ("minatar_steps", "atari_steps", "rounds"))
    suites = [s for s in args.suites.split(",") if s]
    for s in suites:
        if s not in ENV:
            raise choice_error("suite", s, list(ENV))
    checkouts = {"streaming_drl": args.streaming_drl, "stream_rep_rl": args.stream_rep_rl}
    check_checkouts(checkouts, {"--torch-python": args.torch_python, "--jax-python": args.jax_python})
    page = Path(args.page) if args.page else None
    if page is not None and not page.is_file():
        raise ConfigError(f"--page {page}: no such file")
    if args.pin_core is not None and args.pin_core not in os.sched_getaffinity(0):
        raise choice_error("--pin-core", args.pin_core, sorted(os.sched_getaffinity(0)))
    pythons = {"streaming_drl": args.torch_python, "stream_rep_rl": args.jax_python}

    # every timed run is a fresh process that reads ONE_THREAD at start-up (child_env); this one only waits
    entries = [e for e in ENTRIES if e.suite in suites]
    only = [k for k in args.only.split(",") if k]
    for k in only:
        if k not in {e.key for e in entries}:
            raise choice_error("entry (--only)", k, [e.key for e in entries])
    if only:
        entries = [e for e in entries if e.key in only]
    steps = {"minatar": (args.minatar_steps, args.minatar_warmup), "atari": (args.atari_steps, args.atari_warmup)}
    rates: dict[str, list[float]] = {e.key: [] for e in entries}
    extras: dict[str, list[dict[str, Any]]] = {e.key: [] for e in entries}
    load_start = os.getloadavg()
    for r in range(args.rounds):
        order = entries[r % len(entries):] + entries[:r % len(entries)]
        for e in order:
            n, w = steps[e.suite]
            row = (run_reference(e, pythons[e.checkout], checkouts[e.checkout], n, w, args.seed, args.pin_core)
                   if e.script else run_embodia_process(e, n, w, args.pin_core))
            check_process(e.key, row)  # a pool over one thread, or more than one core busy: stop, publish nothing
            row["loadavg_after"] = os.getloadavg()[0]  # the 1-minute load average as the run ended
            rates[e.key].append(row["steps_per_second"])
            extras[e.key].append(row)
            print(f"round {r + 1}  {e.key:24s} {row['steps_per_second']:8.1f} steps/s  cores busy "
                  f"{row['cpu_per_wall']:.2f}  threads ran {row.get('threads_ran')}", flush=True)
    summary = summarize(rates)
    summary_cpu = summarize(cpu_rates(extras))
    phases = {}
    if args.breakdown:
        for e in entries:
            if not e.script:
                row = run_embodia_process(e, *steps[e.suite], args.pin_core, breakdown_only=True)
                check_process(e.key, row)
                phases[e.key] = row["breakdown"]
                print(f"breakdown {e.key:24s} " + ", ".join(f"{k} {v:.3f}" for k, v in phases[e.key].items()),
                      flush=True)
    result = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "command": command_line(args),
        "finished_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()} Linux, {os.cpu_count()} cores", "cpus": os.cpu_count(),
        "loadavg_start": load_start, "loadavg_end": os.getloadavg(), "one_thread_env": ONE_THREAD,
        "loadavg_runs": [row["loadavg_after"] for r in range(args.rounds) for rows in extras.values()
                         for row in rows[r:r + 1]],
        "thread_pools": {k: distinct_pools(rows) for k, rows in extras.items() if rows},
        "threads_ran": {k: [r.get("threads_ran") for r in rows] for k, rows in extras.items() if rows},
        "pinned_core": args.pin_core,
        "cpu_per_wall": {k: statistics.median(r["cpu_per_wall"] for r in rows) for k, rows in extras.items()
                         if rows and all("cpu_per_wall" in r for r in rows)},
        "entries": [asdict(e) for e in entries], "runs": extras, "summary": summary, "summary_cpu": summary_cpu,
        "breakdown_ms_per_step": phases, "breakdown_clock": "thread cpu",
        "references": {k: {"repo": CHECKOUTS[k][0], "commit": git_commit(checkouts[k]),
                           "versions": interpreter_versions(pythons[k], (
                               "torch", "jax", "jaxlib", "flax", "optax", "distrax", "wandb", "tyro", "numpy",
                               "gymnasium", "ale-py", "shimmy", "minatar", "stable-baselines3"))} for k in CHECKOUTS},
        "embodia_versions": _versions(), "ale_rom_dir": bool(os.environ.get("ALE_PY_ROM_DIR")),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "reference_speed.json", result)
    section = render_section(result)
    if page is not None:
        write_section(page, section)
    print("\n" + section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
