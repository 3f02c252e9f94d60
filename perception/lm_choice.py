"""Constrained choice with a local causal LM: the model only ever picks one of the continuations it is offered.

A chat prompt is encoded once; each decision scores every offered continuation of the current text by its mean
token log-probability (so multi-token options are not penalised for their length) and the caller appends the one it
takes, which extends the KV cache by just those tokens. All options of a decision share one forward pass over the
cached text (a tree attention mask keeps them apart) and the cache is cropped back after it, so nothing is copied
and a long decoding costs one small forward per decision.

Used by VimRAG's planner (one decision per step) and by ToolPro's program constructor (a whole program, one grammar
decision at a time). Any ``transformers`` causal LM works; the project's is the offline SmolLM2-135M
(:func:`perception.smollm2.load_smollm2`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch


def _ids(encoded: Any) -> list[int]:
    """Token ids from whatever a tokenizer returned (tensor, BatchEncoding or dict, batched or not)."""
    if not torch.is_tensor(encoded) and not isinstance(encoded, list):
        encoded = encoded["input_ids"]
    if torch.is_tensor(encoded):
        encoded = encoded.tolist()
    return list(encoded[0]) if encoded and isinstance(encoded[0], list) else list(encoded)


class LMChooser:
    """Greedy constrained decoding over caller-supplied continuations (see the module docstring)."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        # transformers 5 renamed the forward's KV-cache argument (``past_key_values`` -> ``cache``).
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self._cache: Any = None
        self._last: torch.Tensor | None = None  # log-probabilities of the next token after the current text
        self.tokens = 0  # tokens encoded so far (prompt + appended), for cost reports
        self.scored = 0  # option tokens scored so far

    def encode(self, text: str) -> list[int]:
        """The token ids of a piece of text (no special tokens)."""
        return _ids(self.tokenizer(text, add_special_tokens=False))

    @torch.no_grad()
    def _forward(self, ids: list[int]) -> torch.Tensor:
        kw = {self._cache_kw: self._cache} if self._cache is not None else {}
        out = self.model(input_ids=torch.tensor([ids]), use_cache=True, **kw)
        self._cache = out.past_key_values
        return out.logits[0].float().log_softmax(-1)

    def start(self, system: str, user: str, prefix: str = "") -> None:
        """Encode the chat prompt (system + user, then the assistant turn opened) and optional reply text."""
        ids = _ids(self.tokenizer.apply_chat_template([{"role": "system", "content": system},
                                                       {"role": "user", "content": user}],
                                                      add_generation_prompt=True, return_tensors="pt"))
        ids += self.encode(prefix) if prefix else []
        self._cache = None
        self._last = self._forward(ids)[-1]
        self.tokens = len(ids)

    def append(self, text: str) -> None:
        """Extend the reply by ``text`` (the option taken, or forced text)."""
        ids = self.encode(text)
        if ids:
            self._last = self._forward(ids)[-1]
            self.tokens += len(ids)

    def scores(self, options: Sequence[str]) -> list[float]:
        """Mean log-probability of each option as the continuation of the current text.

        All options are scored in one forward pass: their tokens (each but its last) are laid end to end after the
        cached text, with position ids restarting at the text's end for every option and an attention mask that
        lets each option see the text and its own earlier tokens only, so each is scored exactly as if alone.
        """
        if self._last is None:
            raise RuntimeError("LMChooser.start must be called before scoring")
        encoded = [self.encode(text) for text in options]
        feed = [t for ids in encoded for t in ids[:-1]]
        more = None
        if feed:
            past, n = self._cache.get_seq_length(), len(feed)
            position = torch.empty(n, dtype=torch.long)
            visible = torch.zeros(n, past + n, dtype=torch.bool)
            visible[:, :past] = True
            at = 0
            for ids in encoded:
                k = len(ids) - 1
                position[at:at + k] = past + torch.arange(k)
                visible[at:at + k, past + at:past + at + k] = torch.ones(k, k, dtype=torch.bool).tril()
                at += k
            dtype = next(self.model.parameters()).dtype
            mask = torch.zeros(1, 1, n, past + n, dtype=dtype).masked_fill(~visible, torch.finfo(dtype).min)
            with torch.no_grad():
                out = self.model(input_ids=torch.tensor([feed]), position_ids=position[None], attention_mask=mask,
                                 use_cache=True, **{self._cache_kw: self._cache})
            more = out.logits[0].float().log_softmax(-1)
            # Back to the shared text; a negative count means "remove that many" in both transformers 4 and 5.
            self._cache.crop(-n)
        out_scores, at = [], 0
        for ids in encoded:
            logp = [self._last[ids[0]]]
            logp += [more[at + i, ids[i + 1]] for i in range(len(ids) - 1)] if more is not None else []
            at += len(ids) - 1
            self.scored += len(ids)
            out_scores.append(float(torch.stack(logp).mean()))
        return out_scores

    def choose(self, options: Sequence[str]) -> int:
        """Index of the best-scoring option (the first on ties); a single option is taken without scoring."""
        if len(options) == 1:
            return 0
        s = self.scores(options)
        return max(range(len(options)), key=lambda i: (s[i], -i))
