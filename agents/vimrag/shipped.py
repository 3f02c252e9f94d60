"""VimRAG's trained parts as shipped in ``checkpoints/vimrag``: the reader and the planner of the default corpus,
listed with their sha256 in ``manifest.json`` (written by ``python -m launch.train_vimrag``).

``launch.eval`` loads these and never trains; a part that is neither shipped nor in the corpus' cache is a
ConfigError naming the command that trains it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envs.errors import ConfigError
from envs.paths import CHECKPOINTS, sha256_file
from envs.rag.corpus import CORPUS_VERSION

SHIPPED = CHECKPOINTS / "vimrag"
FORMAT = "embodia.vimrag_parts/1"


def train_command(corpus_seed: int = 0, folder: str | Path | None = None, reader_seed: int = 0,
                  planner_seed: int | None = None, credit: str = "ggpo") -> str:
    """The command that trains (and stores) the parts a run needs."""
    parts = ["python -m launch.train_vimrag"]
    if folder is not None:
        parts.append(f"--corpus-dir {folder}")
    elif corpus_seed:
        parts.append(f"--corpus-seed {corpus_seed}")
    if reader_seed:
        parts.append(f"--reader-seed {reader_seed}")
    if planner_seed:
        parts.append(f"--planner-seed {planner_seed}")
    if credit != "ggpo":
        parts.append(f"--credit {credit}")
    return " ".join(parts)


def read_manifest(folder: Path = SHIPPED) -> dict[str, Any] | None:
    """The manifest of a parts folder (None when there is none); ConfigError when it is unreadable."""
    path = Path(folder) / "manifest.json"
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
        if manifest.get("format") != FORMAT or not isinstance(manifest.get("files"), dict):
            raise ValueError(f"format {manifest.get('format')!r}, expected {FORMAT!r}")
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(f"malformed vimrag manifest {str(path)!r}: {exc}") from None
    return manifest


def shipped_part(name: str, corpus_seed: int, folder: Path = SHIPPED) -> Path | None:
    """The shipped file ``name`` for the generated corpus of ``corpus_seed``, sha256-verified; None when not
    shipped (or shipped for another corpus seed or generator version)."""
    manifest = read_manifest(folder)
    if manifest is None or manifest.get("corpus_version") != CORPUS_VERSION:
        return None
    if int(manifest.get("corpus_seed", -1)) != int(corpus_seed) or name not in manifest["files"]:
        return None
    path = Path(folder) / name
    expected = manifest["files"][name].get("sha256")
    if not path.is_file():
        raise ConfigError(f"vimrag part {str(path)!r} is listed in its manifest but missing; restore it or rerun "
                          f"{manifest.get('command', 'python -m launch.train_vimrag')}")
    if sha256_file(path) != expected:
        raise ConfigError(f"vimrag part {str(path)!r} does not match the sha256 in its manifest; restore it or "
                          f"rerun {manifest.get('command', 'python -m launch.train_vimrag')}")
    return path


def missing_part(what: str, cache: Path, command: str) -> ConfigError:
    """The error of a part that is neither shipped nor cached (evaluation never trains)."""
    return ConfigError(f"no trained vimrag {what} for this corpus (not shipped in {str(SHIPPED)!r}, not in "
                       f"{str(cache)!r}); train it first: {command}")
