"""Repeated two-player matrix games (RPS, matching pennies, random K x N) and an opponent library.

Importing this package registers one gymnasium id per ``<game>_<opponent>`` task, ``Embodia/Games-<Task>-v0``
(e.g. ``gym.make("Embodia/Games-RpsAntiModel-v0", rounds=200)``; keywords: :class:`GamesEnvOptions`).
"""

from typing import Any

from envs.games.env import GamesEnvOptions, RepeatedGameEnv, normalise_mixed
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
from envs.registration import merged_options, register_family

__all__ = [
    "GAMES", "OPPONENTS", "D_COMPONENTS", "GamesEnvOptions", "MatrixGame", "RepeatedGameEnv", "Opponent",
    "AntiModelOpponent",
    "BlockSwitchingOpponent", "CyclicOpponent", "HiddenBiasOpponent", "IIDOpponent", "MarkovOpponent",
    "MixtureOpponent", "SequenceOpponent", "make_game", "make_opponent", "matching_pennies", "normalise_mixed",
    "random_game", "rock_paper_scissors", "sample_sequences", "make_games_env", "make_gym_env", "TASKS",
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


def make_gym_env(task: str, options: dict[str, Any] | None = None, **kwargs: Any) -> RepeatedGameEnv:
    """``gym.make`` entry point: the task's env with typed options (:class:`GamesEnvOptions`) as keywords."""
    opts = GamesEnvOptions.from_options(merged_options(options, kwargs))
    return make_games_env(task, rounds=opts.rounds, game_seed=opts.game_seed)


register_family("Games", TASKS, "envs.games:make_gym_env")
