"""``python -m launch.leaderboard DIR [DIR...] [--out DIR]``: merge result folders into one leaderboard."""

from __future__ import annotations

import json
from pathlib import Path

from envs.errors import ConfigError
from launch.cli import ArgumentParser, main_guard
from sim_benchmarks.leaderboard import write_leaderboard
from sim_benchmarks.summary import SUMMARY_SCHEMA


def load_summary(folder: Path) -> dict:
    """The summary.json of a results folder, checked against the schema."""
    path = folder / "summary.json"
    if not path.exists():
        raise ConfigError(f"no summary.json in {str(folder)!r}; pass folders written by launch.eval")
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{str(path)!r} is not valid JSON ({exc.msg})") from None
    if summary.get("schema") != SUMMARY_SCHEMA:
        raise ConfigError(f"{str(path)!r} has schema {summary.get('schema')!r}; expected {SUMMARY_SCHEMA!r}")
    return summary


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="launch.leaderboard", description="Merge results folders into one leaderboard.")
    p.add_argument("dirs", nargs="+", type=Path, help="results folders (each with summary.json)")
    p.add_argument("--out", type=Path, default=None, help="where to write (default: the first folder)")
    args = p.parse_args(argv)
    summaries = [load_summary(d) for d in args.dirs]
    paths = write_leaderboard(summaries, args.out or args.dirs[0])
    print(paths["md"].read_text(), end="")
    print(f"wrote {paths['md']}, {paths['html']}, {paths['png']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
