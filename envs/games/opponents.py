"""Opponent library for repeated matrix games, and the training distribution D over opponents.

An opponent picks its action for round t from its own past actions and, for adaptive opponents, the learner's
mixed strategy for that round (the learner commits first; oblivious opponents simply ignore it). Parameters that
make an opponent "one of a family" (a bias, a pattern, a transition matrix) are drawn at ``reset`` from the
episode's generator, so ``env.reset(seed=s)`` fixes the whole sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from envs.errors import choice_error
from envs.games.matrix import MatrixGame


class Opponent(Protocol):
    """What the repeated-game env asks of an opponent."""

    def reset(self, n_actions: int, rng: np.random.Generator) -> None: ...

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int: ...


@dataclass
class IIDOpponent:
    """Plays i.i.d. from ``probs``; with ``probs=None`` a bias is drawn per episode from Dirichlet(concentration)."""

    probs: np.ndarray | None = None
    concentration: float = 0.5
    _p: np.ndarray = field(default=None, init=False, repr=False)
    _rng: np.random.Generator = field(default=None, init=False, repr=False)

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        self._rng = rng
        self._p = (np.asarray(self.probs, dtype=np.float64) if self.probs is not None
                   else rng.dirichlet(np.full(n_actions, self.concentration)))

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        return int(self._rng.choice(len(self._p), p=self._p))


@dataclass
class CyclicOpponent:
    """Repeats ``pattern`` (drawn per episode, length in [2, max_len], when None); with prob ``noise`` plays uniform."""

    pattern: tuple[int, ...] | None = None
    max_len: int = 4
    noise: float = 0.1
    _pat: list[int] = field(default_factory=list, init=False, repr=False)
    _n: int = field(default=0, init=False, repr=False)
    _rng: np.random.Generator = field(default=None, init=False, repr=False)

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        self._rng, self._n = rng, n_actions
        if self.pattern is not None:
            self._pat = [int(a) for a in self.pattern]
        else:
            length = int(rng.integers(2, self.max_len + 1))
            self._pat = [int(a) for a in rng.integers(0, n_actions, size=length)]
        self._offset = int(rng.integers(0, len(self._pat)))

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        if self.noise > 0 and self._rng.random() < self.noise:
            return int(self._rng.integers(0, self._n))
        return self._pat[(len(history) + self._offset) % len(self._pat)]


@dataclass
class MarkovOpponent:
    """First-order Markov chain on its own actions; rows drawn per episode from Dirichlet(concentration) if None."""

    transition: np.ndarray | None = None
    concentration: float = 0.3
    _P: np.ndarray = field(default=None, init=False, repr=False)
    _rng: np.random.Generator = field(default=None, init=False, repr=False)

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        self._rng = rng
        self._P = (np.asarray(self.transition, dtype=np.float64) if self.transition is not None
                   else rng.dirichlet(np.full(n_actions, self.concentration), size=n_actions))

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        n = self._P.shape[0]
        row = self._P[history[-1]] if history else np.full(n, 1.0 / n)
        return int(self._rng.choice(n, p=row))


@dataclass
class BlockSwitchingOpponent:
    """I.i.d. within blocks of ``block_len`` rounds; each block draws a fresh Dirichlet(concentration) bias."""

    block_len: int = 100
    concentration: float = 0.3
    _p: np.ndarray = field(default=None, init=False, repr=False)
    _n: int = field(default=0, init=False, repr=False)
    _rng: np.random.Generator = field(default=None, init=False, repr=False)

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        self._rng, self._n = rng, n_actions

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        if len(history) % self.block_len == 0:
            self._p = self._rng.dirichlet(np.full(self._n, self.concentration))
        return int(self._rng.choice(self._n, p=self._p))


@dataclass
class AntiModelOpponent:
    """Adaptive adversary: sees the learner's mixed strategy and plays the action minimising its expected payoff.

    Against any deterministic learner (e.g. best response to a model) this makes every round a loss; ties are
    broken uniformly at random.
    """

    _rng: np.random.Generator = field(default=None, init=False, repr=False)

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        self._rng = rng

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        expected = np.asarray(learner_mixed, dtype=np.float64) @ game.payoff  # learner's payoff per opponent action
        worst = np.flatnonzero(expected <= expected.min() + 1e-12)
        return int(worst[0] if len(worst) == 1 else self._rng.choice(worst))


@dataclass
class HiddenBiasOpponent:
    """Two-world i.i.d. source: a hidden sign s = ±1 drawn per episode, then P(action 1) = 1/2 + s*eps (N = 2).

    With unbounded context the sign is learnable; a window of w rounds reveals it only when w >> 1/eps^2. Used by
    the bounded-context experiment.
    """

    eps: float = 0.1
    _p1: float = field(default=0.5, init=False, repr=False)
    _rng: np.random.Generator = field(default=None, init=False, repr=False)

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        if n_actions != 2:
            raise ValueError("HiddenBiasOpponent needs a game with 2 opponent actions")
        self._rng = rng
        self._p1 = 0.5 + (self.eps if rng.random() < 0.5 else -self.eps)

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        return int(self._rng.random() < self._p1)


@dataclass
class SequenceOpponent:
    """Replays a fixed sequence (for tests and for re-playing sequences sampled from D)."""

    sequence: tuple[int, ...]

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        pass

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        return int(self.sequence[len(history) % len(self.sequence)])


# The training distribution D: equal-weight mixture of the three "patterned" families below, each with its
# parameters drawn per episode. Block-switching and anti-model opponents are deliberately *outside* D.
D_COMPONENTS = ("biased", "cyclic", "markov")


@dataclass
class MixtureOpponent:
    """A draw from D: picks one of ``D_COMPONENTS`` uniformly per episode, then that family's parameters."""

    _inner: Opponent = field(default=None, init=False, repr=False)
    component: str = field(default="", init=False)

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        self.component = D_COMPONENTS[int(rng.integers(0, len(D_COMPONENTS)))]
        self._inner = make_opponent(self.component)
        self._inner.reset(n_actions, rng)

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        return self._inner.act(history, learner_mixed, game)


OPPONENTS = ("biased", "cyclic", "markov", "block", "anti_model", "D")


def make_opponent(name: str) -> Opponent:
    """Build an opponent family by name (see ``OPPONENTS``)."""
    factories = {
        "biased": IIDOpponent,
        "cyclic": CyclicOpponent,
        "markov": MarkovOpponent,
        "block": BlockSwitchingOpponent,
        "anti_model": AntiModelOpponent,
        "D": MixtureOpponent,
    }
    if name not in factories:
        raise choice_error("opponent", name, OPPONENTS)
    return factories[name]()


def sample_sequences(n_actions: int, length: int, count: int, seed: int, opponent: str = "D") -> np.ndarray:
    """``count`` oblivious opponent sequences of ``length`` actions from ``opponent`` (default D); (count, length)."""
    if opponent == "anti_model":
        raise choice_error("oblivious opponent", opponent, [o for o in OPPONENTS if o != "anti_model"])
    out = np.empty((count, length), dtype=np.int64)
    dummy = MatrixGame("dummy", np.zeros((2, n_actions)))
    for c in range(count):
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), c]))
        opp = make_opponent(opponent)
        opp.reset(n_actions, rng)
        hist: list[int] = []
        for _ in range(length):
            hist.append(opp.act(hist, np.zeros(2), dummy))
        out[c] = hist
    return out
