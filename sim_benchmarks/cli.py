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

from envs.errors import ConfigError
from sim_benchmarks.options import parse_options  # noqa: F401  (re-exported for the launch modules)

# OSErrors that describe the user's paths or machine (a missing, unwritable or wrong-kind file or folder, a full
# disk), not a defect in Embodia; every other exception keeps its traceback.
USER_ERRNOS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENOSPC,
               errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTEMPTY}


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


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` → [0, 1, 2, 3, 4]; ``"1,42,999"`` → [1, 42, 999]."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.strip().partition("-")
            seeds.extend(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        raise ConfigError(f"--seeds must look like 0-4 or 1,42,999, got {text!r}") from None
    if not seeds or len(seeds) > 100 or min(seeds) < 0:
        raise ConfigError(f"--seeds must name 1 to 100 non-negative seeds, got {text!r}")
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
