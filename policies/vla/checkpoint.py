"""Save and load generic-VLA head checkpoints with sha256 verification.

A checkpoint is a folder: ``head.pt`` (head weights + normalisation statistics), ``head.pt.sha256``
(``sha256sum -c`` format) and ``manifest.json`` (format tag, head config, the weights' sha256, training facts).
Anything wrong — missing file, checksum mismatch, unreadable weights, a config that does not match the weights —
is a :class:`ConfigError` with one line naming the file, so the CLI exits with status 2.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.errors import ConfigError
from policies.vla.model import FiLMActionHead, HeadConfig

FORMAT = "embodia.generic_vla/1"
WEIGHTS_FILE = "head.pt"
MANIFEST_FILE = "manifest.json"
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[2] / "checkpoints" / "generic_vla"


@dataclass
class HeadBundle:
    """A trained head with the statistics that map its normalised outputs/inputs to env units."""

    config: HeadConfig
    head: FiLMActionHead
    action_mean: np.ndarray  # (action_dim,)
    action_std: np.ndarray
    state_mean: np.ndarray  # (state_dim,)
    state_std: np.ndarray
    # Optional per-word attribute detectors that re-weight the memory heatmap (policies/vla/attributes.py).
    grounder: Any = None
    # Optional first-frame base localiser that places the voted object precisely (policies/vla/localiser.py).
    localiser: Any = None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_checkpoint(bundle: HeadBundle, folder: str | Path, training: dict[str, Any] | None = None) -> str:
    """Write the checkpoint folder; returns the weights' sha256. Weights are saved float32 and byte-stable."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "state_dict": {k: v.detach().cpu().float().clone() for k, v in bundle.head.state_dict().items()},
        "action_mean": torch.as_tensor(bundle.action_mean, dtype=torch.float32),
        "action_std": torch.as_tensor(bundle.action_std, dtype=torch.float32),
        "state_mean": torch.as_tensor(bundle.state_mean, dtype=torch.float32),
        "state_std": torch.as_tensor(bundle.state_std, dtype=torch.float32),
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    weights = folder / WEIGHTS_FILE
    weights.write_bytes(buf.getvalue())
    digest = sha256_file(weights)
    (folder / f"{WEIGHTS_FILE}.sha256").write_text(f"{digest}  {WEIGHTS_FILE}\n")
    manifest = {
        "format": FORMAT,
        "head_config": bundle.config.to_dict(),
        "weights_file": WEIGHTS_FILE,
        "weights_sha256": digest,
        "training": training or {},
    }
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return digest


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


def load_checkpoint(folder: str | Path = DEFAULT_CHECKPOINT) -> HeadBundle:
    """Verify the sha256 and load the head, frozen (eval mode, no gradients)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    weights = folder / str(manifest.get("weights_file", WEIGHTS_FILE))
    if not weights.is_file():
        raise ConfigError(f"checkpoint weights {str(weights)!r} are missing")
    digest = sha256_file(weights)
    if digest != manifest.get("weights_sha256"):
        raise ConfigError(f"checkpoint weights {str(weights)!r} fail the sha256 check (file {digest[:12]}…, "
                          f"manifest {str(manifest.get('weights_sha256'))[:12]}…): corrupt or replaced")
    sidecar = weights.with_name(weights.name + ".sha256")
    if sidecar.is_file() and sidecar.read_text().split()[:1] != [digest]:
        raise ConfigError(f"checkpoint sidecar {str(sidecar)!r} does not match the weights' sha256")
    try:
        config = HeadConfig.from_dict(manifest["head_config"])
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"checkpoint manifest {str(folder / MANIFEST_FILE)!r} has a malformed head_config "
                          f"({exc})") from exc
    try:
        payload = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means the file is not a checkpoint
        raise ConfigError(f"checkpoint weights {str(weights)!r} cannot be read ({type(exc).__name__})") from exc
    head = FiLMActionHead(config)
    try:
        head.load_state_dict(payload["state_dict"], strict=True)
    except (KeyError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0][:200]
        raise ConfigError(f"checkpoint weights {str(weights)!r} do not match its head_config: {first}") from exc
    freeze(head)
    grounder = None
    if "attributes" in manifest:
        from policies.vla.attributes import load_attributes

        grounder = load_attributes(folder, manifest["attributes"])
    localiser = None
    if "localiser" in manifest:
        from policies.vla.localiser import load_localiser

        localiser = load_localiser(folder, manifest["localiser"])
    return HeadBundle(
        config=config,
        head=head,
        action_mean=payload["action_mean"].numpy(),
        action_std=payload["action_std"].numpy(),
        state_mean=payload["state_mean"].numpy(),
        state_std=payload["state_std"].numpy(),
        grounder=grounder,
        localiser=localiser,
    )


# -- optional parts trained separately and attached to a head checkpoint (attribute detectors, base localiser) -----
def save_part(state_dict: dict[str, torch.Tensor], folder: str | Path, file: str, config: dict[str, Any],
              training: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write a part's weights (float32, byte-stable) as ``folder/file``; returns its manifest entry (file, sha256,
    config, training)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    buf = io.BytesIO()  # torch.save names its archive after the file: a buffer keeps the bytes name-independent
    torch.save({"state_dict": {k: v.detach().float().clone() for k, v in state_dict.items()}}, buf)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)
    return {"file": file, "sha256": sha256_file(path), "config": config, "training": training or {}}


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
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} are missing")
    digest = sha256_file(path)
    if digest != expected:
        raise ConfigError(f"{what} {str(path)!r} fail the sha256 check (file {digest[:12]}…, manifest "
                          f"{expected[:12]}…): corrupt or replaced")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    except Exception as exc:  # any unpickling failure means the file is not such a part
        raise ConfigError(f"{what} {str(path)!r} cannot be read ({type(exc).__name__})") from exc
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
    import shutil

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
    tmp = checkpoint / (MANIFEST_FILE + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    tmp.replace(checkpoint / MANIFEST_FILE)
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
