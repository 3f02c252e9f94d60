"""The soft-prompt baseline's fitted maps as shipped in ``checkpoints/soft_prompt`` (``maps.npz`` + ``manifest.json``
with its sha256), made by ``python -m launch.train_soft_prompt``; evaluation only loads them.

The maps are a function of the train-split object library and the frozen encoders, so the manifest records a key of
the library: maps fitted on another library are refused with the command that refits them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import atomic_path, write_json_atomic
from envs.errors import ConfigError
from envs.paths import CHECKPOINTS, sha256_file
from policies.vla.prompt_baselines import SoftPromptMap

SOFT_PROMPT_DIR = CHECKPOINTS / "soft_prompt"
FORMAT = "embodia.soft_prompt/1"
COMMAND = "python -m launch.train_soft_prompt"


def library_key() -> str:
    """A key of the train-split library the maps are fitted on (changes whenever that library does)."""
    from envs.manipulation.objects import LIBRARY

    train = sorted(repr(inst) for inst in LIBRARY.values() if inst.split == "train")
    return hashlib.sha256(("soft_prompt/1\n" + "\n".join(train)).encode()).hexdigest()[:16]


def save_maps(maps: dict[str, SoftPromptMap], folder: Path, training: dict[str, Any]) -> dict[str, Any]:
    """Write ``maps.npz`` (float16 weights per task kind, 3 MB instead of 6 MB as float32; the maps' outputs are
    normalised, and the SIMPLER row with float16 maps is on docs/results/vap.md) and ``manifest.json``; returns the
    manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "maps.npz") as tmp:
        np.savez(tmp, **{k: m.weight.astype(np.float16) for k, m in maps.items()})
    manifest = {"format": FORMAT, "file": "maps.npz", "sha256": sha256_file(folder / "maps.npz"),
                "library_key": library_key(), "kinds": sorted(maps), "training": training}
    write_json_atomic(folder / "manifest.json", manifest)
    return manifest


def load_maps(folder: Path = SOFT_PROMPT_DIR) -> dict[str, SoftPromptMap]:
    """The shipped maps, sha256- and library-checked; ConfigError naming the file and the command otherwise."""
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        raise ConfigError(f"no soft-prompt maps in {str(folder)!r} (manifest.json missing); fit them: {COMMAND}")
    try:
        manifest = json.loads(path.read_text())
        if manifest.get("format") != FORMAT:
            raise ValueError(f"format {manifest.get('format')!r}, expected {FORMAT!r}")
        weights = Path(folder) / manifest["file"]
        expected = manifest["sha256"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"malformed soft-prompt manifest {str(path)!r}: {exc}; refit: {COMMAND}") from None
    if not weights.is_file() or sha256_file(weights) != expected:
        raise ConfigError(f"soft-prompt maps {str(weights)!r} are missing or do not match the sha256 in "
                          f"{str(path)!r}; restore them or refit: {COMMAND}")
    if manifest.get("library_key") != library_key():
        raise ConfigError(f"soft-prompt maps {str(weights)!r} were fitted on another object library; refit: "
                          f"{COMMAND}")
    with np.load(weights) as data:
        return {k: SoftPromptMap(data[k].astype(np.float64), (k,)) for k in data.files}
