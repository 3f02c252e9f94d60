"""The checkpoint folder format shared by the head and its optional parts: a JSON manifest plus weight files, each
sha256-verified at load (a corrupt or replaced file is a ConfigError, never a silent load)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from envs.paths import sha256_file  # noqa: F401  (re-exported for the checkpoint modules)
from envs.weights import read_weights, write_weights

FORMAT = "embodia.generic_vla/1"
MANIFEST_FILE = "manifest.json"


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The checkpoint's manifest (ConfigError when missing, unreadable or of another format)."""
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    if not folder.is_dir():
        raise ConfigError(f"checkpoint folder {str(folder)!r} does not exist")
    if not path.is_file():
        raise ConfigError(f"checkpoint {str(folder)!r} has no {MANIFEST_FILE}")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"checkpoint manifest {str(path)!r} is not valid JSON") from exc
    if manifest.get("format") != FORMAT:
        raise ConfigError(f"checkpoint {str(folder)!r} has format {manifest.get('format')!r}; expected {FORMAT!r}")
    return manifest


def save_part(state_dict: dict[str, torch.Tensor], folder: str | Path, file: str, config: dict[str, Any],
              training: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write a part's weights (float32, byte-stable) as ``folder/file``; returns its manifest entry (file, sha256,
    config, training)."""
    digest = write_weights({"state_dict": {k: v.detach().float().clone() for k, v in state_dict.items()}},
                           Path(folder) / file, f"weights {file}", sidecar=False)
    return {"file": file, "sha256": digest, "config": config, "training": training or {}}


def load_part(folder: str | Path, entry: dict[str, Any], what: str,
              build: Callable[[dict[str, Any]], tuple[Any, torch.nn.Module]]) -> tuple[Any, torch.nn.Module]:
    """(config, frozen module) of a part a manifest entry describes, sha256-verified; ``build`` makes (config,
    untrained module) from the entry's config dict; ``what`` names the part in errors ("attribute detectors")."""
    try:
        path = Path(folder) / str(entry["file"])
        config = dict(entry["config"])
        expected = str(entry["sha256"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"checkpoint {str(folder)!r} has a malformed {what} entry ({exc})") from exc
    payload = read_weights(path, expected, what)
    if "state_dict" not in payload:
        raise ConfigError(f"{what} {str(path)!r} hold no state_dict")
    state = payload["state_dict"]
    cfg, module = build(config)
    try:
        module.load_state_dict(state, strict=True)
    except Exception as exc:  # weights of another architecture
        raise ConfigError(f"{what} {str(path)!r} do not match their config ({type(exc).__name__})") from exc
    return cfg, freeze(module)


def attach_part(checkpoint: str | Path, source: str | Path, key: str, what: str,
                verify: Callable[[Path, dict[str, Any]], Any]) -> dict[str, Any]:
    """Copy a trained part into a head checkpoint folder and record it under ``key`` in its manifest. ``source``
    is the folder its trainer wrote (holding ``<key>.json``) or another head checkpoint that has it; ``verify``
    (folder, entry) loads it first, so nothing is touched when it is broken. Returns the manifest entry."""
    checkpoint, source = Path(checkpoint), Path(source)
    manifest = read_manifest(checkpoint)
    entry_path = source / f"{key}.json"
    if entry_path.is_file():
        entry = json.loads(entry_path.read_text())
    elif (source / MANIFEST_FILE).is_file() and key in read_manifest(source):
        entry = read_manifest(source)[key]
    else:
        raise ConfigError(f"{str(source)!r} holds no trained {what} ({key}.json is missing)")
    verify(source, entry)
    shutil.copyfile(source / entry["file"], checkpoint / entry["file"])
    manifest[key] = entry
    write_json_atomic(checkpoint / MANIFEST_FILE, manifest)
    return entry


def freeze(module: torch.nn.Module) -> torch.nn.Module:
    """Eval mode and ``requires_grad=False`` on every parameter: the policy cannot change at evaluation."""
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def parameter_digest(module: torch.nn.Module) -> str:
    """sha256 over every parameter and buffer, in name order (a test compares it before and after episodes)."""
    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()
