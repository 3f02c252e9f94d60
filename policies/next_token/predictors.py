"""Next-token predictors over the opponent's actions: ``reset(n)``, ``update(action)``, ``predict() -> dist``.

``window=None`` means unbounded context; an int keeps only the last ``window`` actions (the bounded-context
setting), implemented incrementally so a round costs O(order), not O(window).
"""

from __future__ import annotations

from collections import defaultdict, deque
from itertools import islice
from typing import Protocol

import numpy as np


class Predictor(Protocol):
    """A sequential next-action predictor over N opponent actions."""

    def reset(self, n_actions: int) -> None: ...

    def update(self, action: int) -> None: ...

    def predict(self) -> np.ndarray: ...


class NGramPredictor:
    """Back-off n-gram counts with add-``prior`` smoothing: uses the longest context seen ``min_count`` times.

    Near Bayes-optimal for the i.i.d., cyclic and Markov families in D once a few periods have been seen.
    """

    def __init__(self, order: int = 3, prior: float = 0.5, min_count: int = 2, window: int | None = None) -> None:
        self.order, self.prior, self.min_count, self.window = int(order), float(prior), int(min_count), window
        self.reset(2)

    def reset(self, n_actions: int) -> None:
        self.n = int(n_actions)
        self.hist: deque[int] = deque()
        self.counts: list[dict[tuple[int, ...], np.ndarray]] = [
            defaultdict(lambda: np.zeros(self.n)) for _ in range(self.order + 1)]

    def _add(self, seq: list[int], end: int, sign: float) -> None:
        # The action at position ``end`` counted under each of its contexts of length 0..order.
        for k in range(self.order + 1):
            if end - k < 0:
                break
            self.counts[k][tuple(seq[end - k:end])][seq[end]] += sign

    def update(self, action: int) -> None:
        self.hist.append(int(action))
        seq = list(islice(reversed(self.hist), self.order + 1))[::-1]
        self._add(seq, len(seq) - 1, 1.0)
        if self.window is not None and len(self.hist) > self.window:
            old = list(islice(self.hist, self.order + 1))
            self._add(old, 0, -1.0)  # the oldest action leaves the window (only its empty context remains valid)
            # contexts of the oldest action's successors that reached back into it leave too
            for k in range(1, self.order + 1):
                if k < len(old):
                    self.counts[k][tuple(old[:k])][old[k]] -= 1.0
            self.hist.popleft()

    def predict(self) -> np.ndarray:
        h = list(islice(reversed(self.hist), self.order))[::-1]
        for k in range(min(self.order, len(h)), -1, -1):
            c = self.counts[k].get(tuple(h[len(h) - k:]))
            if c is not None and c.sum() >= self.min_count:
                return (c + self.prior) / (c.sum() + self.prior * self.n)
        return np.full(self.n, 1.0 / self.n)


class HiddenBiasBayesPredictor:
    """Exact posterior predictive for ``HiddenBiasOpponent(eps)`` from the actions in the (optional) window."""

    def __init__(self, eps: float = 0.1, window: int | None = None) -> None:
        self.eps, self.window = float(eps), window
        self.reset(2)

    def reset(self, n_actions: int) -> None:
        self.hist: deque[int] = deque()
        self.diff = 0  # (#1 - #0) in context

    def update(self, action: int) -> None:
        self.hist.append(int(action))
        self.diff += 1 if action else -1
        if self.window is not None and len(self.hist) > self.window:
            self.diff -= 1 if self.hist.popleft() else -1

    def predict(self) -> np.ndarray:
        hi, lo = 0.5 + self.eps, 0.5 - self.eps
        # P(s=+1 | context) = 1 / (1 + (lo/hi)^diff); computed in log space to stay finite.
        post = 1.0 / (1.0 + np.exp(self.diff * (np.log(lo) - np.log(hi))))
        p1 = post * hi + (1 - post) * lo
        return np.array([1.0 - p1, p1])


class SharpenedPredictor:
    """An over-confident version of another predictor: p^power, renormalised (power > 1 sharpens).

    Used as the base model of claim (e) with the sample-then-best-reply rule: a calibrated model would make that
    rule play mixed strategies an adversary cannot exploit much; a sharp one keeps plain play exploitable.
    """

    def __init__(self, inner: Predictor, power: float) -> None:
        if not float(power) > 0:
            raise ValueError(f"power must be positive, got {power!r}")
        self.inner, self.power = inner, float(power)

    def reset(self, n_actions: int) -> None:
        self.inner.reset(n_actions)

    def update(self, action: int) -> None:
        self.inner.update(action)

    def predict(self) -> np.ndarray:
        # via logs so large powers neither overflow nor underflow to an all-zero vector
        logp = self.power * np.log(np.maximum(np.asarray(self.inner.predict(), dtype=np.float64), 1e-300))
        z = np.exp(logp - logp.max())
        return z / z.sum()


class DiscountedBigramPredictor:
    """In-context bigram with exponentially discounted counts: recent transitions weigh most.

    Counts decay by ``decay`` every round; the prediction after opponent action x is (c_x + prior) / (|c_x| + N prior)
    from the discounted counts of what followed x, falling back to the discounted unigram counts while less than
    one (discounted) transition from x has been seen. Tracks drifting or adversarial play faster than plain counts.
    """

    def __init__(self, decay: float = 0.9, prior: float = 0.5) -> None:
        if not 0.0 < float(decay) <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay!r}")
        self.decay, self.prior = float(decay), float(prior)
        self.reset(2)

    def reset(self, n_actions: int) -> None:
        self.n = int(n_actions)
        self.bigram = np.zeros((self.n, self.n))
        self.unigram = np.zeros(self.n)
        self.last = -1

    def update(self, action: int) -> None:
        self.bigram *= self.decay
        self.unigram *= self.decay
        if self.last >= 0:
            self.bigram[self.last, int(action)] += 1.0
        self.unigram[int(action)] += 1.0
        self.last = int(action)

    def predict(self) -> np.ndarray:
        c = self.bigram[self.last] if self.last >= 0 else np.zeros(self.n)
        if c.sum() < 1.0:
            c = self.unigram
        return (c + self.prior) / (c.sum() + self.prior * self.n)
