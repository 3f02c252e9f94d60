"""Real English prose available offline: the Python reference topics in ``pydoc_data.topics`` (~465 k characters)."""

from __future__ import annotations

import functools
import re


@functools.lru_cache(maxsize=1)
def pydoc_topics_text() -> str:
    """All topics in a fixed (sorted) order, whitespace runs collapsed to single spaces."""
    from pydoc_data.topics import topics

    return re.sub(r"\s+", " ", " ".join(topics[k] for k in sorted(topics))).strip()


def text_chunks(n: int, n_chars: int) -> list[str]:
    """``n`` non-overlapping chunks of ``n_chars`` characters spread evenly over the text (deterministic)."""
    text = pydoc_topics_text()
    if n * n_chars > len(text):
        raise ValueError(f"{n} chunks of {n_chars} characters exceed the {len(text)}-character text")
    stride = len(text) // n
    return [text[i * stride:i * stride + n_chars] for i in range(n)]
