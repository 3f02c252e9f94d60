"""Where the project's own files live: the one place that locates ``checkpoints/`` (independent of the working
directory, so every command finds the shipped weights from anywhere)."""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "checkpoints"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes (how every shipped checkpoint file is verified)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
