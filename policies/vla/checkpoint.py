"""Save and load generic-VLA head checkpoints with sha256 verification.

A checkpoint is a folder: ``head.pt`` (head weights + normalisation statistics), ``head.pt.sha256``
(``sha256sum -c`` format) and ``manifest.json`` (format tag, head config, the weights' sha256, training facts).
Anything wrong — missing file, checksum mismatch, unreadable weights, a config that does not match the weights —
is a :class:`ConfigError` with one line naming the file, so the CLI exits with status 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.errors import ConfigError
from envs.paths import CHECKPOINTS
from envs.weights import read_weights, write_weights
from policies.vla.attributes import load_attributes
from policies.vla.checkpoint_files import FORMAT, MANIFEST_FILE, freeze, read_manifest
from policies.vla.localiser import load_localiser
from policies.vla.model import FiLMActionHead, HeadConfig

WEIGHTS_FILE = "head.pt"
DEFAULT_CHECKPOINT = CHECKPOINTS / "generic_vla"
ACTION_FRAMES = ("command", "hand")  # what a head's deltas are added to (HeadBundle.action_frame)


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
    # What the predicted deltas are added to on an absolute-target env: the commanded pose ("command", every head
    # before hand-frame labels) or the measured hand pose ("hand"); see policies/manipulation/delta_adapter.py.
    action_frame: str = "command"


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
    digest = write_weights(payload, folder / WEIGHTS_FILE, "checkpoint weights")  # refuses non-finite weights
    manifest = {
        "format": FORMAT,
        "head_config": bundle.config.to_dict(),
        "weights_file": WEIGHTS_FILE,
        "weights_sha256": digest,
        "training": training or {},
    }
    if bundle.action_frame != "command":  # written only when set, so the older checkpoints' manifests stay as they are
        manifest["action_frame"] = bundle.action_frame
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return digest


def load_checkpoint(folder: str | Path = DEFAULT_CHECKPOINT) -> HeadBundle:
    """Verify the sha256 and load the head, frozen (eval mode, no gradients)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    weights = folder / str(manifest.get("weights_file", WEIGHTS_FILE))
    try:
        config = HeadConfig.from_dict(manifest["head_config"])
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"checkpoint manifest {str(folder / MANIFEST_FILE)!r} has a malformed head_config "
                          f"({exc})") from exc
    if manifest.get("action_frame", "command") not in ACTION_FRAMES:
        raise ConfigError(f"checkpoint manifest {str(folder / MANIFEST_FILE)!r} has action_frame "
                          f"{manifest.get('action_frame')!r}; valid: {', '.join(ACTION_FRAMES)}")
    payload = read_weights(weights, str(manifest.get("weights_sha256")), "checkpoint weights")
    head = FiLMActionHead(config)
    try:
        head.load_state_dict(payload["state_dict"], strict=True)
    except (KeyError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0][:200]
        raise ConfigError(f"checkpoint weights {str(weights)!r} do not match its head_config: {first}") from exc
    freeze(head)
    grounder = None
    if "attributes" in manifest:
        grounder = load_attributes(folder, manifest["attributes"])
    localiser = None
    if "localiser" in manifest:
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
        action_frame=str(manifest.get("action_frame", "command")),
    )


