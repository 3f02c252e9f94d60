"""Atomic file writes: a reader sees the old file or the whole new one, never half of one.

Every writer (JSON summaries, ``np.savez`` caches, ``torch.save`` checkpoints, PIL textures, OBJ meshes) writes
the file under its final name inside a private folder beside the target, and a rename publishes it. The final
name matters to writers that read it: ``np.savez`` appends ``.npz`` to other names, PIL picks the format from the
suffix and ``torch.save`` names its archive after the file, so the bytes match a direct write. The private folder
is unique per call, so parallel workers building the same cache never clobber each other's half-written file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A path to write ``path``'s new content to; renamed onto ``path`` when the block ends, discarded (and
    ``path`` left as it was) when the block raises."""
    path = Path(path)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        tmp = staging / path.name
        yield tmp
        os.replace(tmp, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON with a final newline (the format of every summary and manifest
    the project writes) to ``path`` atomically."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")
