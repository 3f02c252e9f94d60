"""Score and representation of streaming-RL runs at a saved checkpoint (compare runs at a common step).

    python -m launch.study streaming.checkpoint_probe --run runs/a/minatar_breakout/stream_spr/seed1 \\
        --run runs/b/minatar_breakout/stream_spr/seed1 --at-step 250000 --out runs/probe.json

Each ``--run`` is a ``launch.train`` run folder of a streaming agent. The learner is rebuilt from a checkpoint
of that folder — ``checkpoint.pt``, or with ``--at-step N`` the copy ``checkpoint_<step>.pt`` with the smallest
step ≥ N (copies a chunked run keeps; the trainer itself keeps only the latest; a run that finished at exactly N
steps, whose final state is no checkpoint, is read from its ``summary.json``) — and measured as the trainer
measures a finished run: the mean return of the last 100 episodes that ended by the checkpoint's step
(``metrics.jsonl``; with a t interval over those episodes, which is the spread of one run's episodes, not a
between-seed interval) and the effective rank / srank of the encoder's features on the same 1,000 states of uniform
random play (``training.streaming.probe_observations``). Nothing is trained. Prints a markdown table; ``--out``
also writes it as JSON.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.studies.aux.results import mean_ci

COPY = re.compile(r"checkpoint_(\d+)\.pt$")
SUMMARY = "summary.json"


def finished_steps(run: Path) -> int | None:
    """The step count of a finished run (its ``summary.json``), or None."""
    try:
        return int(json.loads((run / SUMMARY).read_text())["steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pick_checkpoint(run: Path, at_step: int | None) -> Path:
    """``checkpoint.pt``, or the ``checkpoint_<step>.pt`` copy with the smallest step ≥ ``at_step``; for a run that
    finished at exactly ``at_step`` steps without such a copy (its final state is not a checkpoint: runs end
    mid-episode), its ``summary.json``."""
    if at_step is None:
        path = run / "checkpoint.pt"
        if not path.is_file():
            raise ConfigError(f"--run {run}: no checkpoint.pt")
        return path
    copies = sorted((int(m.group(1)), p) for p in run.glob("checkpoint_*.pt") if (m := COPY.search(p.name)))
    later = [p for s, p in copies if s >= at_step]
    if not later and finished_steps(run) == at_step:  # the run ended there: the trainer measured that state
        return run / SUMMARY
    if not later:
        have = ", ".join(str(s) for s, _ in copies) or "none"
        raise ConfigError(f"--run {run}: no checkpoint copy at step >= {at_step} (copies at: {have})")
    return later[0]


def probe(run: Path, at_step: int | None = None) -> dict[str, Any]:
    """Step, episodes, last-100 return and encoder rank of the run at the chosen checkpoint."""
    from envs.arcade import make_arcade_env
    from policies.streaming.representation import representation_stats
    from sim_benchmarks.training.streaming import LEARNERS, PROBE_STATES, make_learner, probe_observations

    path = pick_checkpoint(run, at_step)
    if path.name == SUMMARY:
        return finished_row(run)
    try:
        state = torch.load(path, weights_only=False)
        ident, loop = state["identity"], state["loop"]
    except Exception as exc:  # a truncated or foreign file
        raise ConfigError(f"cannot read checkpoint {str(path)!r}: {type(exc).__name__}") from None
    env_name, agent, seed = ident["env"], ident["agent"], int(ident["seed"])
    _, cfg_cls = LEARNERS[agent]
    config = cfg_cls(**ident["config"])
    env = make_arcade_env(env_name, dict(ident.get("env_options", {})))
    learner = make_learner(env_name, agent, env, config, seed)
    env.close()
    learner.load_state_dict(loop["learner"])
    step = int(loop["counters"]["step"])
    rep = representation_stats(learner, probe_observations(env_name, ident.get("env_options", {}), PROBE_STATES,
                                                           seed))
    return {"run": str(run), "checkpoint": path.name, "env": env_name, "agent": agent, "seed": seed, "step": step,
            **last_episodes(run, step), "representation": rep, "config": ident["config"]}


def last_episodes(run: Path, step: int) -> dict[str, Any]:
    """Episodes ended by ``step`` and the mean return of the last 100 of them, with a t interval over those
    episodes (the spread of one run's episodes, not a between-seed interval)."""
    records = []
    metrics = run / "metrics.jsonl"
    if metrics.is_file():
        records = [r for r in (json.loads(ln) for ln in metrics.read_text().splitlines() if ln.strip())
                   if r["step"] <= step]
    last = [r["return"] for r in records[-100:]]
    ci = list(mean_ci(last)[1:]) if len(last) > 1 else None
    return {"episodes": len(records), "return_last100": float(np.mean(last)) if last else None,
            "return_last100_episode_ci95": ci}


def finished_row(run: Path) -> dict[str, Any]:
    """The row of a finished run at its last step: the trainer's own end-of-run measurement (``summary.json``:
    the encoder's rank on the same probe states) and the episodes of ``metrics.jsonl`` up to that step."""
    summary = json.loads((run / SUMMARY).read_text())
    step = int(summary["steps"])
    return {"run": str(run), "checkpoint": SUMMARY, "env": summary["env"], "agent": summary["agent"],
            "seed": int(summary["seed"]), "step": step, **last_episodes(run, step),
            "representation": summary["representation"], "config": summary["config"]}


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="launch.study streaming.checkpoint_probe", description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, action="append", required=True, help="a launch.train run folder (repeat)")
    p.add_argument("--at-step", type=int, default=None, min=1, max=10**10,
                   help="use each run's checkpoint_<step>.pt copy with the smallest step >= this")
    p.add_argument("--out", writes="file", type=Path, default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)
    for run in args.run:
        if not run.is_dir():
            raise ConfigError(f"--run {run}: no such folder")
        pick_checkpoint(run, args.at_step)  # every run checked before any is loaded
    rows = [probe(run, args.at_step) for run in args.run]
    lines = ["| run | env | agent | step | episodes | last-100 return [episodes' 95 % t CI] | effective rank | srank |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        ret = "–" if r["return_last100"] is None else f"{r['return_last100']:.2f}"
        if r["return_last100_episode_ci95"]:
            ret += " [{:.2f}, {:.2f}]".format(*r["return_last100_episode_ci95"])
        lines.append(f"| {r['run']} | {r['env']} | {r['agent']} | {r['step']:,} | {r['episodes']:,} | {ret} | "
                     f"{r['representation']['effective_rank']:.1f} | {r['representation']['srank']:.0f} |")
    if args.out is not None:
        write_json_atomic(args.out, {"rows": rows})
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
