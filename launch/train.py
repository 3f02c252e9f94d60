"""``python -m launch.train``: train an agent on an env through its registered training family.

    python -m launch.train --env minatar:breakout --agent stream_spr --steps 200000 --seed 1
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from envs.errors import ConfigError, choice_error
from launch.cli import ArgumentParser, main_guard, parse_options
from sim_benchmarks import registry
from sim_benchmarks.progress import progress_bar
from sim_benchmarks.results_folder import FolderLock, check_out_dir
from sim_benchmarks.train_log import read_jsonl


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="launch.train", description="Train an Embodia agent.")
    p.add_argument("--env", required=False, default=None, help="e.g. minatar:breakout, atari:Pong, games:rps")
    p.add_argument("--agent", default=None, help="agent name within the env's training family")
    p.add_argument("--steps", type=int, default=100_000, help="environment steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", writes="folder", type=Path, default=None,
                   help="run folder (default runs/<timestamp>-train-<env>)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="agent/env option (repeatable)")
    p.add_argument("--list", action="store_true", help="list training families, envs and agents")
    return p


def _valid_envs() -> list[str]:
    names: list[str] = []
    for spec in registry.trainers().values():
        names.extend(spec.env_names() if spec.env_names else [f"{p}<name>" for p in spec.env_prefixes])
    return names


def _check_run_folder(out: Path, resume: bool) -> None:
    # --resume needs an earlier, readable log; a fresh run must not overwrite one.
    metrics = out / "metrics.jsonl"
    if resume and not metrics.exists():
        raise ConfigError(f"--resume: no earlier run in {str(out)!r} (metrics.jsonl missing)")
    if not resume and metrics.exists():
        raise ConfigError(f"--out {str(out)!r} already holds a run; pass --resume or another --out")
    read_jsonl(metrics)  # a corrupt line stops here, naming file:line; a torn last line is fine


@main_guard
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        for name, spec in registry.trainers().items():
            envs = spec.env_names() if spec.env_names else [f"{p}*" for p in spec.env_prefixes]
            print(f"{name}: envs {', '.join(envs)}")
            for agent, desc in spec.agents.items():
                print(f"  agent {agent}: {desc}")
        return 0
    if not args.env:
        raise ConfigError(f"--env is required; valid: {', '.join(_valid_envs())}")
    spec = registry.trainer_for(args.env)
    if spec is None:
        raise choice_error("env", args.env, _valid_envs())
    if spec.env_names and args.env not in spec.env_names():
        raise choice_error("env", args.env, spec.env_names())
    agent = args.agent or next(iter(spec.agents))
    if agent not in spec.agents:
        raise choice_error(f"agent for {spec.name}", agent, list(spec.agents))
    if args.steps < 1:
        raise ConfigError(f"--steps must be a positive integer, got {args.steps}")
    options = parse_options(args.option, "--option")
    options_type = getattr(spec, "options_type", None)  # a family that declares typed options is checked here
    if options_type is not None:
        options_type.from_options(options, strict=True)
    out = check_out_dir(args.out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-train-"
                        f"{args.env.replace(':', '_')}")
    _check_run_folder(out, args.resume)  # read-only, before the lock creates anything
    with FolderLock(out):  # one writer: held for the whole run
        _check_run_folder(out, args.resume)
        with progress_bar(args.steps, f"train {agent} on {args.env}") as bar:
            summary = spec.run(env=args.env, agent=agent, steps=args.steps, seed=args.seed, out_dir=out,
                               resume=args.resume, options=options, on_progress=bar)
    print(json.dumps({k: summary.get(k) for k in ("env", "agent", "steps", "return_last100", "steps_per_second",
                                                  "wall_s")}, indent=2))
    print(f"results: {out}/ (metrics.jsonl, summary.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
