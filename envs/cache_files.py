"""Caches built on first use: built once across processes, and read back with a cache that cannot be read named,
not a traceback.

Caches (the vimrag corpus, its features, reader and planner, the SmolLM2 conversion, the soft-prompt fit) are built
when absent: :func:`load_or_build` lets the first process build while the others wait and then load. One that exists
but is truncated, garbage or of the wrong shape raises :class:`ConfigError` naming the file and saying how to rebuild
it, so every command exits 2 with that one line.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from envs.errors import ConfigError

T = TypeVar("T")


def load_or_build(lock: str | Path, load: Callable[[], T | None], build: Callable[[], T]) -> T:
    """``load()`` (None: the cache is not there), else ``build()``, holding the exclusive file lock ``lock`` while
    looking again and building: parallel workers wanting one cache build it once, and the others load what the
    first one wrote."""
    found = load()
    if found is not None:
        return found
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        found = load()
        return found if found is not None else build()


def corrupt_cache(path: str | Path, exc: BaseException | str, what: str = "cache file") -> ConfigError:
    """The ConfigError for an unreadable cache ``path``: names it, the reason, and that deleting it rebuilds it."""
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return ConfigError(f"{what} {str(path)!r} is corrupt ({str(reason)[:160]}); delete it and it is rebuilt")


def read_npz(path: str | Path, what: str = "cache file", keys: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path`` (no pickles), checking ``keys`` are present; ConfigError naming the
    file when it is truncated, not an npz, or lacks a key."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise
    except Exception as exc:  # zipfile, zlib, EOF and format errors all mean the same: the file is not usable
        raise corrupt_cache(path, exc, what) from None
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise corrupt_cache(path, f"no {', '.join(missing)}", what)
    return arrays
