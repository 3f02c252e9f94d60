"""Where the project's files live: ``checkpoints/`` (independent of the working directory, so every command finds
the shipped weights from anywhere) and the caches that first use builds, each movable by one environment variable.

| cache | variable | default |
| --- | --- | --- |
| converted models (SmolLM2) | ``EMBODIA_CACHE`` | a per-user temporary folder |
| procedural meshes and textures | ``EMBODIA_MESH_CACHE`` | a per-user temporary folder |
| generated data (the VimRAG corpus) | ``EMBODIA_DATA_CACHE`` | ``<repo>/.cache`` (git-ignored) |
| the software Vulkan driver (ManiSkill) | ``EMBODIA_VULKAN_DIR`` | ``<repo>/.venv/vulkan`` |
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from envs.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "checkpoints"


def _user_temp(name: str) -> Path:
    # Per user: a shared machine's users never write into each other's cache.
    return Path(tempfile.gettempdir()) / f"{name}_{os.getuid()}"


def model_cache() -> Path:
    """Where converted models are kept between runs (``EMBODIA_CACHE``)."""
    return Path(os.environ.get("EMBODIA_CACHE") or _user_temp("embodia_cache"))


def mesh_cache() -> Path:
    """Where generated meshes and textures are kept (``EMBODIA_MESH_CACHE``)."""
    return Path(os.environ.get("EMBODIA_MESH_CACHE") or _user_temp("embodia_meshes"))


def data_cache() -> Path:
    """Where generated data sets are kept (``EMBODIA_DATA_CACHE``), never in git."""
    return Path(os.environ.get("EMBODIA_DATA_CACHE") or ROOT / ".cache")


VULKAN_DEFAULT = ROOT / ".venv" / "vulkan"  # where `make setup` unpacks the driver


def vulkan_dir() -> Path:
    """Where the software Vulkan driver is (or will be) unpacked (``EMBODIA_VULKAN_DIR``)."""
    return Path(os.environ.get("EMBODIA_VULKAN_DIR") or VULKAN_DEFAULT)


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
