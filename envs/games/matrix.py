"""Two-player matrix games with the learner's payoffs in [0, 1] (rows: learner actions, columns: opponent's)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.errors import ConfigError


@dataclass(frozen=True)
class MatrixGame:
    """A repeated-game stage: ``payoff[i, j]`` is the learner's payoff for action i against opponent action j."""

    name: str
    payoff: np.ndarray  # (K, N) floats in [0, 1]

    def __post_init__(self) -> None:
        a = np.asarray(self.payoff, dtype=np.float64)
        if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] < 2:
            raise ConfigError(f"payoff matrix must be K x N with K, N >= 2, got shape {a.shape}")
        if a.min() < 0.0 or a.max() > 1.0:
            raise ConfigError(f"payoffs must lie in [0, 1], got range [{a.min():.3g}, {a.max():.3g}]")
        object.__setattr__(self, "payoff", a)

    @property
    def n_learner(self) -> int:
        """K, the number of learner actions."""
        return int(self.payoff.shape[0])

    @property
    def n_opponent(self) -> int:
        """N, the number of opponent actions."""
        return int(self.payoff.shape[1])

    def payoff_vector(self, opponent_action: int) -> np.ndarray:
        """Payoff of every learner action against one opponent action (the full-information feedback)."""
        return self.payoff[:, int(opponent_action)]

    def best_response(self, opponent_dist: np.ndarray) -> int:
        """The learner action with the highest expected payoff under ``opponent_dist`` (lowest index on ties)."""
        return int(np.argmax(self.payoff @ np.asarray(opponent_dist, dtype=np.float64)))


def rock_paper_scissors() -> MatrixGame:
    """Rock-paper-scissors scaled to [0, 1]: win 1, tie 1/2, loss 0. Actions 0=R, 1=P, 2=S."""
    a = np.full((3, 3), 0.5)
    for i in range(3):
        a[i, (i + 1) % 3] = 0.0  # i loses to i+1
        a[i, (i - 1) % 3] = 1.0  # i beats i-1
    return MatrixGame("rps", a)


def matching_pennies() -> MatrixGame:
    """Matching pennies for the matcher: payoff 1 when actions match, 0 otherwise."""
    return MatrixGame("matching_pennies", np.eye(2))


def random_game(n_learner: int, n_opponent: int, seed: int) -> MatrixGame:
    """A K x N game with i.i.d. uniform [0, 1] payoffs, fully determined by ``seed``."""
    if n_learner < 2 or n_opponent < 2:
        raise ConfigError(f"random game needs K, N >= 2, got {n_learner}x{n_opponent}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), n_learner, n_opponent]))
    return MatrixGame(f"random{n_learner}x{n_opponent}", rng.uniform(0.0, 1.0, size=(n_learner, n_opponent)))


GAMES = ("rps", "matching_pennies", "random3x3")


def make_game(name: str, seed: int = 0) -> MatrixGame:
    """Build a game by name: ``rps``, ``matching_pennies`` or ``randomKxN`` (e.g. ``random3x3``)."""
    if name == "rps":
        return rock_paper_scissors()
    if name == "matching_pennies":
        return matching_pennies()
    if name.startswith("random") and "x" in name[6:]:
        k, _, n = name[6:].partition("x")
        if k.isdigit() and n.isdigit():
            return random_game(int(k), int(n), seed)
    from envs.errors import choice_error

    raise choice_error("game", name, [*GAMES, "randomKxN"])
