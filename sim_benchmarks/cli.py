"""Shared CLI plumbing for launch modules and studies: one error boundary (user error → one stderr line and exit 2,
bug → traceback and exit 1), an argparse that obeys it, and silencing of native banners."""

from __future__ import annotations

import argparse
import errno
import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

from envs.config import check_range, coerce, is_seed
from envs.errors import ConfigError
from sim_benchmarks.options import parse_options  # noqa: F401  (re-exported for the launch modules)
from sim_benchmarks.results_folder import check_out_dir, check_out_file

# OSErrors that describe the user's paths or machine (a missing, unwritable or wrong-kind file or folder, a full
# disk), not a defect in Embodia; every other exception keeps its traceback.
USER_ERRNOS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENOSPC,
               errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTEMPTY}


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are a single stderr line and exit status 2, with ranges on numeric flags.

    ``add_argument(..., min=lo, max=hi)`` declares an inclusive range. Numeric flags (``type=int`` or ``float``) are
    converted and checked by the code that parses typed options (:func:`envs.config.coerce` and
    :func:`envs.config.check_range`), so a flag and an ``--option key=value`` accept and refuse the same values with
    the same messages: without a declaration a float flag must still be finite (``nan`` and ``inf`` are refused) and
    a seed flag (``--seed``, ``--*-seed``) non-negative. ``writes="folder"`` (or ``"file"``) marks an output path:
    it must be usable (:func:`check_out_dir`) before the command does any work. Every check runs in
    ``parse_args``, before a command writes.
    """

    def add_argument(self, *args, min: float | None = None, max: float | None = None,  # noqa: A002
                     writes: str | None = None, **kwargs) -> argparse.Action:
        assert writes in (None, "folder", "file"), writes
        value_type = kwargs.pop("type") if kwargs.get("type") in (int, float) else None
        action = super().add_argument(*args, **kwargs)
        action.value_type = value_type  # type: ignore[attr-defined]  # converted in parse_known_args
        action.bounds = (min, max)  # type: ignore[attr-defined]
        action.writes = writes  # type: ignore[attr-defined]
        return action

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, rest = super().parse_known_args(args, namespace)
        for action in self._actions:
            value = getattr(parsed, action.dest, None) if action.dest != argparse.SUPPRESS else None
            if value is None or value is action.default or getattr(action, "writes", None):
                continue  # a default is valid by construction; output paths are checked below
            lo, hi = getattr(action, "bounds", (None, None))
            value_type = getattr(action, "value_type", None)
            if lo is None and value_type is int and is_seed(action.dest):
                lo = 0
            flag = long_flag(action)
            if value_type is not None:  # a ConfigError: one line and exit 2 via main_guard
                value = [coerce(flag, v, value_type, what="") if isinstance(v, str) else v
                         for v in (value if isinstance(value, list) else [value])]
                setattr(parsed, action.dest, value if isinstance(getattr(parsed, action.dest), list) else value[0])
                value = getattr(parsed, action.dest)
            for item in value if isinstance(value, list) else [value]:
                check_range(flag, item, (lo, hi), what="")
        for action in self._actions:  # output paths last: every other flag is valid when the disk is looked at
            value = getattr(parsed, action.dest, None) if action.dest != argparse.SUPPRESS else None
            writes = getattr(action, "writes", None)
            if value is not None and writes is not None:  # a ConfigError: main_guard prints it as every --out error
                (check_out_dir if writes == "folder" else check_out_file)(value, long_flag(action))
        return parsed, rest

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def long_flag(action: argparse.Action) -> str:
    """The long spelling of a flag (``--seed`` rather than ``-s``), or the positional's name."""
    return max(action.option_strings, key=len) if action.option_strings else action.dest


def require_positive(args: argparse.Namespace, names: tuple[str, ...]) -> None:
    """ConfigError naming the first of ``names`` (argparse dests) whose value is below 1."""
    for name in names:
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")


MAX_SEEDS = 100


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` → [0, 1, 2, 3, 4]; ``"1,42,999"`` → [1, 42, 999]."""
    seeds: list[int] = []
    refused = ConfigError(f"--seeds must name 1 to {MAX_SEEDS} non-negative seeds, got {text!r}")
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            first, last = (int(lo), int(hi)) if sep else (int(lo), int(lo))
            if first < 0 or last - first + 1 > MAX_SEEDS - len(seeds):  # counted before a range is expanded
                raise refused
            seeds.extend(range(first, last + 1))
    except ValueError as exc:
        if exc is refused:
            raise
        raise ConfigError(f"--seeds must look like 0-4 or 1,42,999, got {text!r}") from None
    if not seeds:
        raise refused
    return seeds


def user_error_line(exc: BaseException) -> str | None:
    """The one-line message for a user error, or None when ``exc`` is a bug (which keeps its traceback)."""
    if isinstance(exc, ConfigError):
        return " ".join(str(exc).split("\n"))
    if isinstance(exc, OSError) and exc.errno in USER_ERRNOS:
        where = exc.filename if exc.filename is not None else ""
        if exc.filename2 is not None:
            where = f"{exc.filename} -> {exc.filename2}"
        reason = exc.strerror or type(exc).__name__
        return f"{reason}: {str(where)!r}" if where else reason
    return None


def main_guard(fn: Callable[..., int | None]) -> Callable[..., int]:
    """Run a CLI main: a user error (ConfigError, or an OSError about a path) becomes one stderr line and exit 2,
    Ctrl-C exit 130 (results stay resumable); anything else is a bug and propagates with its traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs) -> int:
        try:
            return int(fn(*args, **kwargs) or 0)
        except (ConfigError, OSError) as exc:
            line = user_error_line(exc)
            if line is None:
                raise
            print(f"error: {line}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("interrupted; rerun with --resume to continue", file=sys.stderr)
            return 130

    return wrapper


@contextmanager
def quiet_native_output() -> Iterator[None]:
    """Silence C-level writes to stdout and stderr (pybullet prints its build time on import) for the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
