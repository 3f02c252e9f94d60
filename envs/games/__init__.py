"""Repeated two-player matrix games (RPS, matching pennies, random K x N) and an opponent library."""

from envs.games.env import RepeatedGameEnv, normalise_mixed
from envs.games.matrix import GAMES, MatrixGame, make_game, matching_pennies, random_game, rock_paper_scissors
from envs.games.opponents import (
    D_COMPONENTS,
    OPPONENTS,
    AntiModelOpponent,
    BlockSwitchingOpponent,
    CyclicOpponent,
    HiddenBiasOpponent,
    IIDOpponent,
    MarkovOpponent,
    MixtureOpponent,
    Opponent,
    SequenceOpponent,
    make_opponent,
    sample_sequences,
)

__all__ = [
    "GAMES", "OPPONENTS", "D_COMPONENTS", "MatrixGame", "RepeatedGameEnv", "Opponent", "AntiModelOpponent",
    "BlockSwitchingOpponent", "CyclicOpponent", "HiddenBiasOpponent", "IIDOpponent", "MarkovOpponent",
    "MixtureOpponent", "SequenceOpponent", "make_game", "make_opponent", "matching_pennies", "normalise_mixed",
    "random_game", "rock_paper_scissors", "sample_sequences", "make_games_env", "TASKS",
]


def _tasks() -> dict[str, str]:
    out = {}
    for g in GAMES:
        for o in OPPONENTS:
            out[f"{g}_{o}"] = f"{g} against the {o} opponent"
    return out


TASKS = _tasks()


def make_games_env(task: str, rounds: int = 1000, game_seed: int = 0) -> RepeatedGameEnv:
    """Build the env for a ``<game>_<opponent>`` task name, e.g. ``rps_anti_model`` or ``random3x3_D``."""
    from envs.errors import choice_error

    if task not in TASKS:
        raise choice_error("games task", task, list(TASKS))
    for o in sorted(OPPONENTS, key=len, reverse=True):  # longest suffix first: "anti_model" before "model"
        if task.endswith("_" + o):
            game_name = task[: -len(o) - 1]
            return RepeatedGameEnv(make_game(game_name, game_seed), make_opponent(o), rounds, opponent_name=o)
    raise choice_error("games task", task, list(TASKS))
