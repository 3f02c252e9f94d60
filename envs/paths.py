"""Where the project's own files live: the one place that locates ``checkpoints/`` (independent of the working
directory, so every command finds the shipped weights from anywhere)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from envs.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "checkpoints"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes (how every shipped checkpoint file is verified)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


SQLITE_HEADER = b"SQLite format 3\x00"


def check_sqlite_file(path: str | Path, what: str) -> Path:
    """``path`` as a usable SQLite file (an existing database, or a new file in an existing folder); ConfigError
    naming ``what`` (e.g. ``option checkpoint_db``) when its folder is missing, it is a folder, or it is a file
    that is not SQLite, so a bad path fails before anything is run or written."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a folder; pass a SQLite file path")
    if not p.parent.is_dir():
        raise ConfigError(f"{what} {str(path)!r}: folder {str(p.parent)!r} does not exist")
    if p.exists() and p.stat().st_size > 0:
        try:
            with open(p, "rb") as fh:
                header = fh.read(len(SQLITE_HEADER))
        except OSError as exc:
            raise ConfigError(f"{what} {str(path)!r} cannot be read: {exc.strerror}") from None
        if header != SQLITE_HEADER:
            raise ConfigError(f"{what} {str(path)!r} is not a SQLite database; pass a new path or a SQLite file")
    return p
