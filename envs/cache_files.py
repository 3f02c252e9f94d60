"""Reading cache files back: a cache that cannot be read is named, not a traceback.

Caches (the vimrag corpus and its features, the SmolLM2 conversion, the soft-prompt fit) are rebuilt when absent;
one that exists but is truncated, garbage or of the wrong shape raises :class:`ConfigError` naming the file and
saying how to rebuild it, so every command exits 2 with that one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from envs.errors import ConfigError


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
