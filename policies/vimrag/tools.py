"""Retrieval tools over the knowledge base, backed by faiss inner-product indexes.

* ``search_text``: MiniLM dense search over documents, re-ranked with identifier/word overlap (hybrid retrieval;
  dense sentence embeddings alone do not separate ``R-104`` from ``R-140``).
* ``search_images``: the same over image captions (the offline stack has no text-to-image encoder).
* ``similar_images``: MobileNetV2 pooled-feature search (image to image).
* ``open``: fetch an item by id (what following a document's link does).

Every tool returns ``Hit(item_id, score)`` rows; payloads come from :meth:`RetrievalTools.payload`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import faiss
import numpy as np

from policies.vimrag.knowledge_base import KnowledgeBase, id_tokens

_WORD = re.compile(r"[a-z]+-\d+|[a-z]+|\d+")
_STOP = frozenset("a an the of in on at to was were what which who is it its and that object robot".split())
LEXICAL_WEIGHT = 0.6  # weight of word overlap against cosine similarity in the hybrid score
CANDIDATES = 64  # dense candidates re-ranked lexically


@dataclass(frozen=True)
class Hit:
    """One retrieved item and its score."""

    item_id: str
    score: float


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _inverted(words: list[set[str]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for row, ws in enumerate(words):
        for w in ws:
            out.setdefault(w, []).append(row)
    return out


def _flat_index(vectors: np.ndarray) -> faiss.Index:
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


class RetrievalTools:
    """The agent's tools; all deterministic given the knowledge base."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        corpus = kb.corpus
        self.doc_index = _flat_index(kb.doc_emb)
        self.caption_index = _flat_index(kb.caption_emb)
        self.visual_index = _flat_index(kb.image_vec)
        self.doc_words = [_words(d.text) for d in corpus.documents]
        self.caption_words = [_words(im.caption) for im in corpus.images]
        self.image_ids = [im.image_id for im in corpus.images]
        # Inverted identifier indexes: a document naming "R-104" is a candidate for a query naming it, however
        # far down the dense ranking it is.
        self.doc_by_token = _inverted(self.doc_words)
        self.caption_by_token = _inverted(self.caption_words)

    def _hybrid(self, index: faiss.Index, words: list[set[str]], ids: list[str], query_vec: np.ndarray,
                query_text: str, k: int, exclude: set[str]) -> list[Hit]:
        n = min(CANDIDATES, index.ntotal)
        q = np.asarray(query_vec, np.float32).reshape(1, -1)
        scores, rows = index.search(q, n)
        q_words = _words(query_text)
        inverted = self.doc_by_token if index is self.doc_index else self.caption_by_token
        dense = {int(r): float(s) for s, r in zip(scores[0], rows[0], strict=True) if r >= 0}
        for w in q_words:
            if "-" in w:  # identifiers only: common words would pull in the whole corpus
                for r in inverted.get(w, ()):
                    if r not in dense:
                        dense[r] = float(index.reconstruct(r) @ q[0])
        ranked = []
        for r, s in dense.items():
            if ids[r] in exclude:
                continue
            overlap = len(q_words & words[r]) / max(1, len(q_words))
            ranked.append((s + LEXICAL_WEIGHT * overlap, ids[r]))
        ranked.sort(key=lambda t: (-t[0], t[1]))
        return [Hit(i, s) for s, i in ranked[:k]]

    def search_text(self, query_vec: np.ndarray, query_text: str, k: int = 3,
                    exclude: set[str] | None = None) -> list[Hit]:
        """Top-``k`` documents for a query (its MiniLM vector and its text)."""
        return self._hybrid(self.doc_index, self.doc_words, self.kb.doc_ids, query_vec, query_text, k,
                            exclude or set())

    def search_images(self, query_vec: np.ndarray, query_text: str, k: int = 3,
                      exclude: set[str] | None = None) -> list[Hit]:
        """Top-``k`` images by caption for a query."""
        return self._hybrid(self.caption_index, self.caption_words, self.image_ids, query_vec, query_text, k,
                            exclude or set())

    def similar_images(self, image_id: str, k: int = 3, exclude: set[str] | None = None) -> list[Hit]:
        """Top-``k`` images that look like ``image_id`` (MobileNetV2 pooled features, cosine)."""
        exclude = (exclude or set()) | {image_id}
        row = self.kb.corpus.image_row[image_id]
        scores, rows = self.visual_index.search(self.kb.image_vec[row:row + 1], k + len(exclude) + 1)
        hits = [Hit(self.image_ids[r], float(s)) for s, r in zip(scores[0], rows[0], strict=True)
                if r >= 0 and self.image_ids[r] not in exclude]
        return hits[:k]

    def open(self, item_id: str) -> list[str]:
        """The ids an item links to (a document's attachments and references; images link to nothing)."""
        doc = self.kb.corpus.doc_by_id.get(item_id)
        return list(doc.links) if doc is not None else []

    def payload(self, item_id: str) -> str:
        """The text of a document, or the caption of an image."""
        item = self.kb.corpus.item(item_id)
        return getattr(item, "text", None) or getattr(item, "caption", "")

    def mentions(self, item_id: str) -> set[str]:
        """Identifiers a document or caption mentions."""
        return id_tokens(self.payload(item_id))
