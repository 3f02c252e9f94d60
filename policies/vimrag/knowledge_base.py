"""The encoded corpus: MiniLM embeddings of texts, captions and questions, visual tokens at every level, token counts.

Encoding the default corpus (2,228 images, ~5,500 texts) takes over a minute of CPU, so the result is cached next to
the corpus (``features.npz``) and rebuilt from the corpus when missing, its two independent parts (texts, images) in
two processes where there are two cores. Everything here is frozen (no training).
"""

from __future__ import annotations

import fcntl
import re
from pathlib import Path

import numpy as np

from envs.atomic_io import atomic_path
from envs.build_processes import build_processes, map_in_processes
from envs.cache_files import read_npz
from envs.errors import ConfigError
from envs.rag.corpus import Corpus, corpus_dir, load_corpus
from perception.vimrag.visual_tokens import feature_grid, fit_projection, pooled_levels, project_grid

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


# The encodings come in two parts that need nothing from each other, so two processes can build them at once
# (two eval workers, or two spawned helpers): texts through MiniLM, images through MobileNetV2 and the PCA.
FEATURE_PARTS = ("text", "image")


def _encode_text(corpus: Corpus) -> dict[str, np.ndarray]:
    from perception.text_encoder import TextEncoder

    enc = TextEncoder()
    tok = enc.model.tokenizer
    docs = [d.text for d in corpus.documents]
    caps = [im.caption for im in corpus.images]
    qs = [q.text for q in corpus.questions]

    def count(texts: list[str]) -> np.ndarray:
        return np.array([len(tok(t)["input_ids"]) for t in texts], np.int32)

    return {"doc_emb": enc.encode(docs), "caption_emb": enc.encode(caps), "question_emb": enc.encode(qs),
            "doc_tokens": count(docs), "caption_tokens": count(caps), "question_tokens": count(qs)}


def _encode_images(corpus: Corpus) -> dict[str, np.ndarray]:
    grids = feature_grid(corpus.pixels)
    projection = fit_projection(grids, seed=corpus.seed)
    tokens7 = project_grid(grids, projection)
    levels = pooled_levels(tokens7)
    vec = grids.mean(axis=(1, 2))
    vec = vec / (np.linalg.norm(vec, axis=1, keepdims=True) + 1e-9)
    return {"image_vec": vec.astype(np.float32), **{f"tokens_{g}": a for g, a in levels.items()}}


def _encode_part(corpus: Corpus, part: str) -> dict[str, np.ndarray]:
    """One part of the encodings, single-threaded (BLAS and torch results can depend on the thread count, and the
    shipped reader and planner were fitted on single-threaded encodings)."""
    import torch
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            return _encode_text(corpus) if part == "text" else _encode_images(corpus)
    finally:
        torch.set_num_threads(threads)


def _encode(corpus: Corpus) -> dict[str, np.ndarray]:
    """Every encoding of ``corpus`` in this process (what the cached ``features.npz`` holds)."""
    return {**_encode_part(corpus, "text"), **_encode_part(corpus, "image"), "version": np.array(FEATURES_VERSION)}


def _current(arrays: dict[str, np.ndarray], corpus: Corpus, keys: tuple[str, ...]) -> bool:
    # A file of an older encoder version or of another corpus is stale (rebuilt), not an error.
    sizes = {"doc_emb": len(corpus.documents), "question_emb": len(corpus.questions), "image_vec": len(corpus.images)}
    return (int(arrays["version"]) == FEATURES_VERSION
            and all(len(arrays[k]) == sizes[k] for k in keys if k in sizes))


def _read_current(path: Path, corpus: Corpus, what: str, keys: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    if not path.exists():
        return None
    arrays = read_npz(path, what, ("version", *keys))
    return arrays if _current(arrays, corpus, keys) else None


_FEATURE_KEYS = ("doc_emb", "question_emb", "image_vec")
_PART_KEYS = {"text": ("doc_emb", "question_emb"), "image": ("image_vec",)}


def _part(corpus: Corpus, target: Path, part: str, wait: bool) -> dict[str, np.ndarray] | None:
    """One part of the encodings, from its cache file or built and saved under its lock; None when another process
    holds that lock and ``wait`` is False. Once the merged ``features.npz`` exists the part is read from it."""
    with open(target / f".features.{part}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return None
        merged = _read_current(target / "features.npz", corpus, "vimrag features cache", _FEATURE_KEYS)
        if merged is not None:
            return merged
        path = target / f"features.{part}.npz"
        arrays = _read_current(path, corpus, f"vimrag {part} features cache", _PART_KEYS[part])
        if arrays is None:
            arrays = {**_encode_part(corpus, part), "version": np.array(FEATURES_VERSION)}
            with atomic_path(path) as tmp:
                np.savez(tmp, **arrays)
        return arrays


# Corpora this small (the tests') encode in the calling process: starting helpers would cost more than it saves.
MIN_IMAGES_FOR_HELPERS = 400


def _part_job(job: tuple[int, str | None, str, str]) -> dict[str, np.ndarray] | None:
    # A spawned helper's share: it loads the saved corpus itself (nothing large crosses the pipe that way).
    seed, folder, target, part = job
    return _part(load_corpus(seed, folder), Path(target), part, wait=True)


def _build_features(corpus: Corpus, target: Path, folder: str | Path | None) -> dict[str, np.ndarray]:
    """The merged encodings, the parts built in parallel where that is possible: by spawned helpers when this process
    may start them, else shared with any other process building the same corpus at the same time (each takes a
    part nobody holds, then waits for the rest)."""
    helpers = build_processes(len(corpus.images), MIN_IMAGES_FOR_HELPERS)
    if helpers > 1:
        jobs = [(corpus.seed, None if folder is None else str(folder), str(target), part) for part in FEATURE_PARTS]
        parts = dict(zip(FEATURE_PARTS, map_in_processes(_part_job, jobs, len(jobs)), strict=True))
    else:
        parts = {part: _part(corpus, target, part, wait=False) for part in FEATURE_PARTS}
        parts = {part: got if got is not None else _part(corpus, target, part, wait=True)
                 for part, got in parts.items()}
    arrays: dict[str, np.ndarray] = {}
    for part in FEATURE_PARTS:
        arrays.update({k: v for k, v in parts[part].items() if k != "version"})
    return {**arrays, "version": np.array(FEATURES_VERSION)}


def load_knowledge_base(seed: int = 0, folder: str | Path | None = None) -> KnowledgeBase:
    """The corpus of ``seed`` (or in ``folder``) with its encodings, computing and caching them when missing."""
    corpus = load_corpus(seed, folder)
    target = Path(folder) if folder is not None else corpus_dir(seed)
    path = target / "features.npz"
    arrays = _read_current(path, corpus, "vimrag features cache", _FEATURE_KEYS)
    if arrays is None:
        built = _build_features(corpus, target, folder)
        with open(target / ".features.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            arrays = _read_current(path, corpus, "vimrag features cache", _FEATURE_KEYS)
            if arrays is None:  # the first process to get here writes the merged file and drops the parts
                arrays = built
                with atomic_path(path) as tmp:
                    np.savez(tmp, **arrays)
                for part in FEATURE_PARTS:  # under the part's lock: a process reading that part finishes first
                    with open(target / f".features.{part}.lock", "w") as part_lock:
                        fcntl.flock(part_lock, fcntl.LOCK_EX)
                        (target / f"features.{part}.npz").unlink(missing_ok=True)
    return KnowledgeBase(corpus, arrays)
