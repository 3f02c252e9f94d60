"""The shipped prior-fitted transformer's checkpoint folder: ``model.pt`` (float32 state dict), ``model.pt.sha256``
and ``manifest.json`` (format, file, sha256, model config, training facts). Loading verifies the sha256 first, so a
corrupt or replaced weights file is a ConfigError, never a silent load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from envs.weights import write_weights
from policies.aux.structured.prior_fitted import PriorFittedTransformer, build_model
from policies.vla.checkpoint_files import load_part

FORMAT = "embodia.prior_fitted_tab/1"
WEIGHTS_FILE = "model.pt"
MANIFEST_FILE = "manifest.json"
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[3] / "checkpoints" / "prior_fitted_tab"
RETRAIN = "python -m launch.train_prior_fitted --out checkpoints/prior_fitted_tab (see its manifest for the flags)"


def save_checkpoint(model: PriorFittedTransformer, folder: str | Path, config: dict[str, Any],
                    training: dict[str, Any]) -> dict[str, Any]:
    """Write the weights (byte-stable: the same weights give the same sha256), the ``.sha256`` line and the
    manifest into ``folder``; returns the manifest."""
    folder = Path(folder)
    digest = write_weights({"state_dict": {k: v.detach().float().clone() for k, v in model.state_dict().items()}},
                           folder / WEIGHTS_FILE, "prior-fitted weights")  # refuses non-finite weights
    manifest = {"format": FORMAT, "file": WEIGHTS_FILE, "sha256": digest, "config": config, "training": training}
    write_json_atomic(folder / MANIFEST_FILE, manifest)
    return manifest


def read_manifest(folder: str | Path = DEFAULT_CHECKPOINT) -> dict[str, Any]:
    """The checkpoint's manifest (ConfigError when the folder or manifest is missing, unreadable or foreign)."""
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise ConfigError(f"prior-fitted checkpoint {str(folder)!r} has no {MANIFEST_FILE}; train one with {RETRAIN}")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"prior-fitted manifest {str(path)!r} is not valid JSON") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise ConfigError(f"{str(path)!r} has format {found!r}; expected {FORMAT!r}")
    return manifest


def load_checkpoint(folder: str | Path = DEFAULT_CHECKPOINT) -> PriorFittedTransformer:
    """The frozen model of a checkpoint folder, after checking the weights against the manifest's sha256."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    try:
        _, model = load_part(folder, manifest, "prior-fitted weights", lambda cfg: (cfg, build_model(cfg)))
    except ConfigError as exc:
        raise ConfigError(f"{exc}; retrain with {RETRAIN}") from exc
    return model  # frozen: eval mode, no gradients
