"""``python -m launch.run FILE [name:=value ...] [--dry-run]``: run a ROS 2-style launch file's nodes in order."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from envs.errors import ConfigError
from launch.cli import ArgumentParser, main_guard
from launch.launch_file import load_launch_file


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="launch.run", description="Run a launch file (launch/files/*.launch.xml|yaml).")
    p.add_argument("file", help="launch file path")
    p.add_argument("overrides", nargs="*", help="launch arguments as name:=value")
    p.add_argument("--dry-run", action="store_true", help="print the commands instead of running them")
    p.add_argument("--parallel", action="store_true",
                   help="start every node at once, as ROS 2 does (default: one after another, in file order)")
    args = p.parse_intermixed_args(argv)
    overrides = {}
    for item in args.overrides:
        name, sep, value = item.partition(":=")
        if not sep or not name:
            raise ConfigError(f"launch argument {item!r} must be written name:=value")
        overrides[name] = value
    nodes = load_launch_file(args.file, overrides)
    commands = []
    for node in nodes:
        cmd = [sys.executable, "-m", node.module, *node.argv]
        print(f"[{node.name}] {' '.join(shlex.quote(c) for c in cmd[1:])}", flush=True)
        commands.append((node, cmd))
    if args.dry_run:
        return 0
    if args.parallel:
        running = [(node, subprocess.Popen(cmd, env={**os.environ, **node.env})) for node, cmd in commands]
        failed = [(node, proc.wait()) for node, proc in running]
        failed = [(node, rc) for node, rc in failed if rc != 0]
    else:
        failed = []
        for node, cmd in commands:
            rc = subprocess.call(cmd, env={**os.environ, **node.env})
            if rc != 0:
                failed = [(node, rc)]
                break
    for node, rc in failed:
        if rc != 2:  # 2 is a user error: the node has said what was wrong on its one stderr line
            print(f"error: node {node.name!r} exited with status {rc}", file=sys.stderr)
    if failed:
        return failed[0][1]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
