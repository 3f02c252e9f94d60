"""OpenVLA-style adapter: a transformers vision-to-text model that emits 7 discretised action tokens.

OpenVLA (and models built the same way) prompt with ``"In: What action should the robot take to {instruction}?
\\nOut:"``, generate 7 tokens taken from the last 256 ids of the vocabulary, map each id to one of 255 bin centres
in [-1, 1], and un-normalise with the training dataset's 1st/99th percentiles (the gripper dimension is not
normalised; it is 0 = closed … 1 = open). This adapter does that with any local model transformers can load
(``AutoModelForImageTextToText`` / ``AutoModelForVision2Seq``, ``trust_remote_code`` for OpenVLA's own code, which
exposes ``predict_action``) and converts the result to Embodia's SIMPLER action. Nothing is downloaded: the path
must be a local folder (``local_files_only=True``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.errors import ConfigError
from policies.vla.conversions import first_camera, resize_image, to_embodia_action

OPENVLA_PROMPT = "In: What action should the robot take to {instruction}?\nOut:"
STATS_FILE = "dataset_statistics.json"


@dataclass(frozen=True)
class ActionBins:
    """OpenVLA's action discretisation: ``n_bins`` uniform bins over [low, high], tokens at the vocab's end."""

    vocab_size: int
    n_bins: int = 256
    low: float = -1.0
    high: float = 1.0

    @property
    def centres(self) -> np.ndarray:
        edges = np.linspace(self.low, self.high, self.n_bins)
        return (edges[:-1] + edges[1:]) / 2.0  # n_bins - 1 centres

    def encode(self, normalised: np.ndarray) -> np.ndarray:
        """Normalised actions in [low, high] → token ids (the inverse of :meth:`decode` up to bin width)."""
        edges = np.linspace(self.low, self.high, self.n_bins)
        bins = np.digitize(np.clip(normalised, self.low, self.high), edges)  # 1..n_bins
        return self.vocab_size - bins

    def decode(self, token_ids: np.ndarray) -> np.ndarray:
        """Token ids → bin centres; ids are counted back from the end of the vocabulary."""
        idx = np.clip(self.vocab_size - np.asarray(token_ids) - 1, 0, self.n_bins - 2)
        return self.centres[idx]


@dataclass(frozen=True)
class ActionStats:
    """Per-dimension un-normalisation bounds and which dimensions are normalised (OpenVLA: all but gripper)."""

    q01: np.ndarray
    q99: np.ndarray
    mask: np.ndarray

    def unnormalise(self, normalised: np.ndarray) -> np.ndarray:
        """[-1, 1] → dataset units on masked dims; unmasked dims pass through."""
        scaled = 0.5 * (normalised + 1.0) * (self.q99 - self.q01) + self.q01
        return np.where(self.mask, scaled, normalised)

    @classmethod
    def identity(cls, dim: int = 7) -> ActionStats:
        """No un-normalisation (the model already predicts env units)."""
        return cls(-np.ones(dim), np.ones(dim), np.zeros(dim, dtype=bool))


def load_action_stats(path: str | Path, unnorm_key: str | None) -> ActionStats:
    """Read OpenVLA's ``dataset_statistics.json`` (``{key: {"action": {"q01", "q99", "mask"}}}``)."""
    stats_path = Path(path) / STATS_FILE
    if not stats_path.is_file():
        raise ConfigError(f"{str(stats_path)!r} not found: an OpenVLA-style model needs its action statistics")
    stats = json.loads(stats_path.read_text())
    keys = sorted(stats)
    if unnorm_key is None:
        if len(keys) != 1:
            raise ConfigError(f"{str(stats_path)!r} has several datasets; choose unnorm_key from: {', '.join(keys)}")
        unnorm_key = keys[0]
    if unnorm_key not in stats:
        raise ConfigError(f"unknown unnorm_key {unnorm_key!r}; valid: {', '.join(keys)}")
    a = stats[unnorm_key]["action"]
    q01, q99 = np.asarray(a["q01"], dtype=np.float64), np.asarray(a["q99"], dtype=np.float64)
    mask = np.asarray(a.get("mask", [True] * (len(q01) - 1) + [False]), dtype=bool)
    return ActionStats(q01, q99, mask)


def _local_folder(path: str | Path) -> Path:
    folder = Path(path).expanduser()
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise ConfigError(f"model path {str(folder)!r} is not a local model folder with a config.json")
    return folder


class OpenVLAAdapter:
    """Wraps an OpenVLA-style model as a :class:`~policies.base.Policy` emitting Embodia actions."""

    def __init__(
        self,
        model: Any,
        processor: Any,
        stats: ActionStats,
        image_size: int = 224,
        resize: str = "stretch",
        gripper: str = "unit_open",
        rotation: str = "rpy",
        prompt: str = OPENVLA_PROMPT,
        unnorm_key: str | None = None,
    ) -> None:
        self.model = model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.processor = processor
        self.stats = stats
        self.image_size = image_size
        self.resize = resize
        self.gripper = gripper
        self.rotation = rotation
        self.prompt = prompt
        self.unnorm_key = unnorm_key
        cfg = getattr(model.config, "text_config", model.config)
        self.bins = ActionBins(vocab_size=int(cfg.vocab_size))
        self.instruction = ""

    @classmethod
    def from_pretrained(cls, path: str | Path, unnorm_key: str | None = None, **kwargs: Any) -> OpenVLAAdapter:
        """Load model, processor and action statistics from a local folder (no downloads)."""
        folder = _local_folder(path)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import transformers

        auto = getattr(transformers, "AutoModelForVision2Seq", None) or transformers.AutoModelForImageTextToText
        try:
            model = auto.from_pretrained(str(folder), trust_remote_code=True, local_files_only=True,
                                         dtype=torch.float32)
            processor = transformers.AutoProcessor.from_pretrained(str(folder), trust_remote_code=True,
                                                                   local_files_only=True)
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"cannot load an OpenVLA-style model from {str(folder)!r}: {first}") from exc
        stats = load_action_stats(folder, unnorm_key)
        return cls(model, processor, stats, unnorm_key=unnorm_key, **kwargs)

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Remember the episode's instruction (OpenVLA is stateless between steps)."""
        self.instruction = instruction

    def prompt_for(self, instruction: str) -> str:
        """The model's prompt for an instruction (lower-cased, as OpenVLA was trained)."""
        return self.prompt.format(instruction=instruction.strip().rstrip(".").lower())

    @torch.inference_mode()
    def raw_action(self, obs: dict[str, Any]) -> np.ndarray:
        """The model's 7-D action in its own convention (dataset units, its gripper range)."""
        image = resize_image(first_camera(obs["image"]), self.image_size, self.resize)
        from PIL import Image

        inputs = self.processor(text=self.prompt_for(self.instruction), images=Image.fromarray(image),
                                return_tensors="pt")
        if hasattr(self.model, "predict_action"):  # OpenVLA's own remote code decodes and un-normalises itself
            return np.asarray(self.model.predict_action(**inputs, unnorm_key=self.unnorm_key, do_sample=False))
        out = self.model.generate(**inputs, max_new_tokens=7, min_new_tokens=7, do_sample=False)
        tokens = out[0, -7:].cpu().numpy()
        return self.stats.unnormalise(self.bins.decode(tokens))

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        """Embodia action: rotation to rpy, gripper to Embodia's ±1 (+1 = close)."""
        return to_embodia_action(self.raw_action(obs), rotation=self.rotation, gripper=self.gripper)
