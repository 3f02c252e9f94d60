"""An external VLM behind the reader interface the trained reader implements (``relevance`` and ``read``).

**Tokens to pixels.** The allocator gives each image node a ``g x g`` grid (g in 0, 1, 2, 4, 7: 0 / 1 / 4 / 16 / 49
visual tokens). An external VLM is sent that image resampled to ``(g * patch_px)`` pixels per side, so with the
default ``patch_px = 28`` (one token per 28 x 28 patch, as the Qwen2-VL family merges 2 x 2 patches of 14 px) a
7 x 7 grant is a 196-pixel image; g = 0 images are not sent at all.

**Counting.** What the agent adds to its budget is what the reading cost:
* a transformers model in a local folder: the image placeholder tokens its own processor inserts for that size,
  measured. An image whose measured cost exceeds its grant (a model that resizes every image to a fixed, larger
  size) is dropped from the request, so a reading never spends more than the allocator gave;
* an OpenAI-compatible endpoint: ``g * g`` per image sent (the server tokenises images itself and this client
  cannot see how; what it reports as ``usage.prompt_tokens`` is kept beside the count).

**Answer space.** The prompt lists the valid answers of the question's kind (colours, object kinds or patterns,
from the question's wording) and asks for one word. The reply is mapped by :func:`map_answer`: the choice (or its
plural) that occurs first as a whole word in the lower-cased reply; a reply naming none maps to ``""``, which
scores as wrong under exact match, with confidence 0 (a mapped reply has confidence 1: the endpoint gives none).

**Relevance** (which images a reading relies on, the DAG's hypothesis edges) comes from the trained reader's
caption-only relevance head, which never looks at pixels: the allocation is the agent's, the VLM only reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from envs.errors import ConfigError
from envs.manipulation.objects import CATEGORIES, COLOURS, PATTERNS
from perception.vimrag.external_vlm import LocalVLM, OpenAIChatVLM, resize_image
from policies.vimrag.knowledge_base import KnowledgeBase
from policies.vimrag.reader import Reading, VisualReader

DEFAULT_PATCH_PX = 28


def answer_choices(question: str) -> tuple[str, ...]:
    """The valid answers of a question's kind, from its wording (all of them when the wording names no kind)."""
    q = question.lower()
    if "colour" in q or "color" in q:
        return tuple(COLOURS)
    if "pattern" in q:
        return tuple(PATTERNS)
    if "kind of object" in q or "what object" in q or "category" in q:
        return tuple(CATEGORIES)
    return tuple(COLOURS) + tuple(CATEGORIES) + tuple(PATTERNS)


def map_answer(reply: str, choices: Sequence[str]) -> str:
    """The choice named first in ``reply`` (whole word, case-insensitive, plural ``-s``/``-es`` accepted), or ``""``."""
    words = re.findall(r"[a-z]+", reply.lower())
    for word in words:
        for c in choices:
            if word in (c, c + "s", c + "es"):
                return c
    return ""


def build_prompt(question: str, documents: Sequence[str], captions: Sequence[str], choices: Sequence[str]) -> str:
    """The reader prompt: the question, the text evidence in memory, the images' captions in order, the choices."""
    lines = ["Answer the question about a robot lab's records using the images and documents."]
    if documents:
        lines.append("Documents:")
        lines += [f"- {d}" for d in documents]
    if captions:
        lines.append("Images, in the order given: " + "; ".join(f"{k + 1}. {c}" for k, c in enumerate(captions)))
    else:
        lines.append("No image is given.")
    lines.append(f"Question: {question}")
    lines.append(f"Reply with exactly one word from: {', '.join(choices)}.")
    return "\n".join(lines)


class VLMBackend(Protocol):
    """What :class:`ExternalReader` needs of a VLM."""

    def ask(self, prompt: str, images: list[np.ndarray]): ...


class ExternalReader:
    """Reads with an external VLM; same ``relevance``/``read`` interface as :class:`VisualReader`.

    ``backend`` is an :class:`~perception.vimrag.external_vlm.OpenAIChatVLM` or a
    :class:`~perception.vimrag.external_vlm.LocalVLM`; ``relevance_reader`` is the trained reader whose caption-only
    relevance head decides the hypothesis edges.
    """

    def __init__(self, kb: KnowledgeBase, relevance_reader: VisualReader, backend: OpenAIChatVLM | LocalVLM,
                 patch_px: int = DEFAULT_PATCH_PX) -> None:
        if int(patch_px) != patch_px or patch_px <= 0:
            raise ConfigError(f"reader_patch_px must be a positive integer, got {patch_px!r}")
        self.kb = kb
        self.relevance_reader = relevance_reader
        self.backend = backend
        self.patch_px = int(patch_px)
        self.replies: list[str] = []  # every raw reply, in order (for inspection and tests)
        self.reads = 0

    @property
    def name(self) -> str:
        """``openai:<model>`` or ``hf:<folder name>``."""
        if isinstance(self.backend, OpenAIChatVLM):
            return f"openai:{self.backend.model}"
        return f"hf:{getattr(self.backend, 'path', '?')}"

    def image_cost(self, g: int) -> int:
        """Visual tokens one image granted a ``g x g`` grid costs when sent at ``g * patch_px`` pixels."""
        if g <= 0:
            return 0
        if isinstance(self.backend, OpenAIChatVLM):
            return g * g
        return int(self.backend.image_cost(g * self.patch_px))

    def relevance(self, q_emb: np.ndarray, context: set[str], image_ids: list[str]) -> dict[str, float]:
        """The trained reader's caption-only relevance (see module docstring)."""
        return self.relevance_reader.relevance(q_emb, context, image_ids)

    def read(self, q_emb: np.ndarray, context: set[str], images: list[tuple[str, int]], question: str = "",
             documents: Sequence[str] = ()) -> Reading:
        """Ask the VLM about ``images`` at their granted grids; images granted 0, or costing more than granted, are
        not sent. ``visual_tokens`` is the cost of what was sent."""
        if not question:
            raise ConfigError("an external reader needs the question text")
        sent, pixels, cost = [], [], 0
        for image_id, g in images:
            c = self.image_cost(g)
            if g <= 0 or c > g * g:
                continue
            row = self.kb.corpus.image_row[image_id]
            pixels.append(resize_image(self.kb.corpus.pixels[row], g * self.patch_px))
            sent.append(image_id)
            cost += c
        choices = answer_choices(question)
        captions = [self.kb.corpus.item(i).caption for i in sent]
        out = self.backend.ask(build_prompt(question, documents, captions, choices), pixels)
        reply = out[0] if isinstance(out, tuple) else out
        if isinstance(out, tuple) and out[1] != cost:
            # The processor's count for the whole request must equal the per-image measurements.
            raise RuntimeError(f"the local VLM consumed {out[1]} image tokens, measured {cost} for its images")
        self.replies.append(reply)
        self.reads += 1
        answer = map_answer(reply, choices)
        rel = self.relevance(q_emb, context, sent) if sent else {}
        return Reading(answer, 1.0 if answer else 0.0, rel, cost)
