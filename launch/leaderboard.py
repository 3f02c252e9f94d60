"""``python -m launch.leaderboard DIR [DIR...] [--out DIR]``: merge result folders into one leaderboard."""

from __future__ import annotations

import json
from pathlib import Path

from envs.errors import ConfigError
from launch.cli import ArgumentParser, main_guard
from sim_benchmarks.leaderboard import write_leaderboard
from sim_benchmarks.results_folder import FolderLock, check_out_dir
from sim_benchmarks.summary import SUMMARY_SCHEMA

_RATE_FIELDS = ("success_rate", "correct_object_rate", "wrong_object_rate")


def _check_entry(path: Path, where: str, entry: object) -> None:
    # The fields the leaderboard reads from each policy (and per-task) entry, with their types.
    if not isinstance(entry, dict):
        raise ConfigError(f"{str(path)!r}: {where} must be an object, got {type(entry).__name__}")
    for key in _RATE_FIELDS:
        value = entry.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{str(path)!r}: {where}.{key} must be a number, got {value!r}")
    episodes = entry.get("episodes")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 0:
        raise ConfigError(f"{str(path)!r}: {where}.episodes must be a count, got {episodes!r}")
    ci = entry.get("success_ci95")
    if not (isinstance(ci, list) and len(ci) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                          for v in ci)):
        raise ConfigError(f"{str(path)!r}: {where}.success_ci95 must be [low, high], got {ci!r}")


def load_summary(folder: Path) -> dict:
    """The summary.json of a results folder, checked against the schema and for every field the board reads."""
    path = folder / "summary.json"
    if not folder.is_dir():
        raise ConfigError(f"{str(folder)!r} is not a results folder (no summary.json); pass folders written by "
                          f"launch.eval")
    if not path.is_file():
        raise ConfigError(f"no summary.json in {str(folder)!r}; pass folders written by launch.eval")
    try:
        summary = json.loads(path.read_bytes())
    except ValueError as exc:  # bad JSON or bad UTF-8
        raise ConfigError(f"{str(path)!r} is not valid JSON ({getattr(exc, 'msg', type(exc).__name__)})") from None
    if not isinstance(summary, dict):
        raise ConfigError(f"{str(path)!r} must hold a JSON object, got {type(summary).__name__}")
    if summary.get("schema") != SUMMARY_SCHEMA:
        raise ConfigError(f"{str(path)!r} has schema {summary.get('schema')!r}; expected {SUMMARY_SCHEMA!r}")
    if not isinstance(summary.get("benchmark"), str) or not isinstance(summary.get("config"), dict):
        raise ConfigError(f"{str(path)!r}: 'benchmark' (a string) and 'config' (an object) are required")
    policies = summary.get("policies")
    if not isinstance(policies, dict):
        raise ConfigError(f"{str(path)!r}: 'policies' must be an object of policy entries, got {policies!r}")
    for name, entry in policies.items():
        _check_entry(path, f"policies.{name}", entry)
        per_task = entry.get("per_task")
        if not isinstance(per_task, dict):
            raise ConfigError(f"{str(path)!r}: policies.{name}.per_task must be an object, got {per_task!r}")
        for task, cell in per_task.items():
            _check_entry(path, f"policies.{name}.per_task.{task}", cell)
    return summary


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="launch.leaderboard", description="Merge results folders into one leaderboard.")
    p.add_argument("dirs", nargs="+", type=Path, help="results folders (each with summary.json)")
    p.add_argument("--out", writes="folder", type=Path, default=None, help="where to write (default: the first folder)")
    args = p.parse_args(argv)
    summaries = [load_summary(d) for d in args.dirs]
    out = check_out_dir(args.out or args.dirs[0])  # every input and the output checked before the first byte
    with FolderLock(out):  # not while an evaluation is writing there
        paths = write_leaderboard(summaries, out)
    print(paths["md"].read_text(), end="")
    print(f"wrote {paths['md']}, {paths['html']}, {paths['png']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
