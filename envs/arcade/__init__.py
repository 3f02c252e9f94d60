"""Arcade environments for streaming RL: ALE Atari, MinAtar and Octax behind one name scheme and one layout.

Names are ``atari:<Game>`` (e.g. ``atari:Pong``), ``minatar:<game>`` (e.g. ``minatar:breakout``) and
``octax:<game>`` (e.g. ``octax:brix``, ``octax:cavern1``). Every env returns **channel-first uint8 observations
(C, H, W)**: Atari (4, 84, 84) grey levels 0..255 (4 stacked frames); MinAtar (C, 10, 10) 0/1 (one plane per
object channel); Octax (4, 32, 64) 0/1 (the last 4 CHIP-8 frames of one agent step, rows × columns). Actions are
``Discrete(n)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from envs.errors import ConfigError, choice_error

ARCADE_SUITES = ("atari", "minatar", "octax")


def split_name(name: str) -> tuple[str, str]:
    """``"minatar:breakout"`` → ``("minatar", "breakout")``; raises ConfigError for a bad prefix or empty game."""
    suite, sep, game = name.partition(":")
    if not sep or suite not in ARCADE_SUITES:
        raise choice_error("arcade env prefix", name, [f"{s}:<game>" for s in ARCADE_SUITES])
    if not game:
        raise ConfigError(f"arcade env {name!r} has no game after the prefix; e.g. {suite}:{default_game(suite)}")
    return suite, game


def default_game(suite: str) -> str:
    """A representative game of each suite (used in messages and benchmarks)."""
    return {"atari": "Breakout", "minatar": "breakout", "octax": "brix"}[suite]


def games(suite: str) -> list[str]:
    """The game names available in one suite (imports only that suite's backend)."""
    if suite == "minatar":
        from envs.arcade.minatar import MINATAR_GAMES

        return list(MINATAR_GAMES)
    if suite == "atari":
        from envs.arcade.atari import atari_games

        return atari_games()
    if suite == "octax":
        from envs.arcade.octax import octax_games

        return octax_games()
    raise choice_error("arcade suite", suite, list(ARCADE_SUITES))


def env_names() -> list[str]:
    """Every concrete ``suite:game`` name whose backend imports here."""
    names: list[str] = []
    for suite in ARCADE_SUITES:
        try:
            names += [f"{suite}:{g}" for g in games(suite)]
        except ImportError:  # that backend's extra is not installed
            continue
    return names


def make_arcade_env(name: str, options: Mapping[str, Any] | None = None) -> gym.Env:
    """Build the env named ``suite:game`` with suite-specific ``options`` (see each suite's ``make_*_env``);
    an option the suite does not take raises ConfigError naming the valid ones."""
    suite, game = split_name(name)
    if suite == "minatar":
        from envs.arcade.minatar import make_minatar_env as make
    elif suite == "atari":
        from envs.arcade.atari import make_atari_env as make
    else:
        from envs.arcade.octax import make_octax_env as make
    opts = dict(options or {})
    valid = [p for p in inspect.signature(make).parameters if p != "game"]
    for key in opts:
        if key not in valid:
            raise choice_error(f"{suite} env option", key, valid)
    return make(game, **opts)
