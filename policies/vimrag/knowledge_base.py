"""The encoded corpus: MiniLM embeddings of texts, captions and questions, visual tokens at every level, token counts.

Encoding ~1,000 images and ~2,000 texts takes about a minute on one core, so the result is cached next to the
corpus (``features.npz``) and rebuilt from the corpus when missing. Everything here is frozen (no training).
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

import numpy as np

from envs.cache_files import read_npz
from envs.errors import ConfigError
from envs.rag.corpus import Corpus, corpus_dir, load_corpus
from perception.visual_tokens import feature_grid, fit_projection, pooled_levels, project_grid

FEATURES_VERSION = 2
_ID = re.compile(r"[A-Za-z]+-\d+")


def id_tokens(text: str) -> set[str]:
    """Catalogue/run/report identifiers mentioned in a text (``R-104``, ``OBJ-031``)."""
    return {m.upper() for m in _ID.findall(text)}


class KnowledgeBase:
    """A corpus plus its frozen encodings; the single source the tools and the reader read from."""

    def __init__(self, corpus: Corpus, arrays: dict[str, np.ndarray]) -> None:
        self.corpus = corpus
        self.doc_ids = [d.doc_id for d in corpus.documents]
        self.doc_emb = arrays["doc_emb"]
        self.caption_emb = arrays["caption_emb"]
        self.question_emb = {q.qid: arrays["question_emb"][i] for i, q in enumerate(corpus.questions)}
        self.doc_tokens = {d: int(n) for d, n in zip(self.doc_ids, arrays["doc_tokens"], strict=True)}
        self.caption_tokens = arrays["caption_tokens"].astype(int)
        self.question_tokens = {q.qid: int(n) for q, n in zip(corpus.questions, arrays["question_tokens"],
                                                              strict=True)}
        self.levels = {g: arrays[f"tokens_{g}"] for g in (1, 2, 4, 7)}
        self.image_vec = arrays["image_vec"]  # pooled, unit-norm: visual similarity search
        self.token_dim = int(self.levels[7].shape[-1])

    def visual_tokens(self, image_id: str, g: int) -> np.ndarray:
        """The ``g*g x D`` tokens of one image (float32)."""
        if g not in self.levels:
            raise ConfigError(f"visual token grid must be one of 1, 2, 4, 7, got {g}")
        return self.levels[g][self.corpus.image_row[image_id]].astype(np.float32)

    def text_tokens(self, item_id: str) -> int:
        """Tokens (MiniLM word pieces) of a document, or of an image's caption."""
        if item_id in self.doc_tokens:
            return self.doc_tokens[item_id]
        return int(self.caption_tokens[self.corpus.image_row[item_id]])


def _encode(corpus: Corpus) -> dict[str, np.ndarray]:
    from perception.text_encoder import TextEncoder

    enc = TextEncoder()
    tok = enc.model.tokenizer
    docs = [d.text for d in corpus.documents]
    caps = [im.caption for im in corpus.images]
    qs = [q.text for q in corpus.questions]

    def count(texts: list[str]) -> np.ndarray:
        return np.array([len(tok(t)["input_ids"]) for t in texts], np.int32)

    grids = feature_grid(corpus.pixels)
    projection = fit_projection(grids, seed=corpus.seed)
    tokens7 = project_grid(grids, projection)
    levels = pooled_levels(tokens7)
    vec = grids.mean(axis=(1, 2))
    vec = vec / (np.linalg.norm(vec, axis=1, keepdims=True) + 1e-9)
    return {"doc_emb": enc.encode(docs), "caption_emb": enc.encode(caps), "question_emb": enc.encode(qs),
            "doc_tokens": count(docs), "caption_tokens": count(caps), "question_tokens": count(qs),
            "image_vec": vec.astype(np.float32), **{f"tokens_{g}": a for g, a in levels.items()},
            "version": np.array(FEATURES_VERSION)}


def load_knowledge_base(seed: int = 0, folder: str | Path | None = None) -> KnowledgeBase:
    """The corpus of ``seed`` (or in ``folder``) with its encodings, computing and caching them when missing."""
    corpus = load_corpus(seed, folder)
    target = Path(folder) if folder is not None else corpus_dir(seed)
    path = target / "features.npz"
    with open(target / ".features.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        arrays = None
        if path.exists():
            arrays = read_npz(path, "vimrag features cache", ("version", "doc_emb", "question_emb"))
            if (int(arrays["version"]) != FEATURES_VERSION or len(arrays["doc_emb"]) != len(corpus.documents)
                    or len(arrays["question_emb"]) != len(corpus.questions)):
                arrays = None  # an older or other corpus's features: recomputed below
        if arrays is None:
            arrays = _encode(corpus)
            tmp = target / f"features.{os.getpid()}.tmp.npz"
            np.savez(tmp, **arrays)
            tmp.replace(path)
    return KnowledgeBase(corpus, arrays)
