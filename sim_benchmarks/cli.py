"""Shared CLI plumbing for launch modules and studies: one-line errors with exit 2, and an argparse that obeys it."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import NoReturn

from envs.errors import ConfigError
from sim_benchmarks.options import parse_options  # noqa: F401  (re-exported for the launch modules)


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are a single stderr line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def require_positive(args: argparse.Namespace, names: tuple[str, ...]) -> None:
    """ConfigError naming the first of ``names`` (argparse dests) whose value is below 1."""
    for name in names:
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")


def main_guard(fn: Callable[..., int | None]) -> Callable[..., int]:
    """Run a CLI main; a ConfigError becomes one stderr line and exit 2, Ctrl-C exit 130 (results stay resumable)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs) -> int:
        try:
            return int(fn(*args, **kwargs) or 0)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("interrupted; rerun with --resume to continue", file=sys.stderr)
            return 130

    return wrapper
