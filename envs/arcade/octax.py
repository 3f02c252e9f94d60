"""Octax (CHIP-8 games in JAX) as gymnasium envs: a thin adapter over its functional API.

Octax's ``env.reset(key)`` / ``env.step(state, a)`` are jitted once per game and kept here as the env's state;
observations come back as numpy (4, 32, 64) uint8 (the 4 frames of one agent step, rows × columns, i.e. Octax's
(4, 64, 32) transposed to the arcade channel-first layout). Levelled games have ids such as ``cavern1``,
``space_flight3``, ``target_shooter2``.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

import gymnasium as gym
import numpy as np

from envs.errors import choice_error


@functools.cache
def octax_games() -> list[str]:
    """Every Octax game id that ``create_environment`` can build, levelled ids expanded from the shipped ROMs."""
    import octax.environments as oe

    env_dir = os.path.dirname(oe.__file__)
    modules = sorted(f[:-3] for f in os.listdir(env_dir) if f.endswith(".py") and not f.startswith("_"))
    rom_dir = os.path.dirname(oe.get_rom_path("test_opcode.ch8"))
    roms = os.listdir(rom_dir)
    names: list[str] = []
    for m in modules:
        # A game whose ROM is chosen by level has files like cavern1.ch8; only purely numeric suffixes are
        # reachable through create_environment (cavern4a/4b are not).
        levels = sorted(int(mt.group(1)) for r in roms if (mt := re.fullmatch(rf"{m}(\d+)\.ch8", r)))
        names += [f"{m}{lv}" for lv in levels] if levels else [m]
    return names


@functools.lru_cache(maxsize=64)
def _octax_backend(game: str, max_episode_steps: int | None) -> tuple[Any, dict]:
    """Octax's functional env for a game; cached because its jitted step/reset compile per instance (~10 s)
    and the object is immutable (all episode state lives in the state pytree)."""
    from octax.environments import create_environment

    kwargs: dict[str, Any] = {}
    if max_episode_steps is not None:
        kwargs["max_num_steps_per_episodes"] = int(max_episode_steps)
    return create_environment(game, **kwargs)


class OctaxEnv(gym.Env):
    """A gymnasium Env over one Octax game; ``autoreset=True`` makes the step after an episode end reset it."""

    metadata = {"render_modes": []}

    def __init__(self, game: str, autoreset: bool = False, max_episode_steps: int | None = None) -> None:
        valid = octax_games()
        if game not in valid:
            raise choice_error("octax game", game, valid)
        import jax

        self._env, self.game_metadata = _octax_backend(game, None if max_episode_steps is None
                                                       else int(max_episode_steps))
        self._jax = jax
        self._reset_fn = self._env.reset  # both are jax.jit-ed methods, compiled on first call per game
        self._step_fn = self._env.step
        self.autoreset = autoreset
        self.action_space = gym.spaces.Discrete(int(self._env.num_actions))
        self.observation_space = gym.spaces.Box(0, 1, (4, 32, 64), np.uint8)
        self._key = jax.random.PRNGKey(0)
        self._state = None
        self._needs_reset = True

    @staticmethod
    def _to_numpy(obs: Any) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(obs).transpose(0, 2, 1), dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._key = self._jax.random.PRNGKey(int(seed))
        self._key, sub = self._jax.random.split(self._key)
        self._state, obs, info = self._reset_fn(sub)
        self._needs_reset = False
        return self._to_numpy(obs), {"score": float(info["score"])}

    def step(self, action: Any):
        if self._needs_reset:
            if not self.autoreset and self._state is not None:
                raise RuntimeError("OctaxEnv.step called after the episode ended; call reset() first")
            obs, info = self.reset()
            return obs, 0.0, False, False, info
        self._state, obs, reward, term, trunc, info = self._step_fn(self._state, int(action))
        terminated, truncated = bool(term), bool(trunc)
        self._needs_reset = terminated or truncated
        return self._to_numpy(obs), float(reward), terminated, truncated, {"score": float(info["score"])}


def make_octax_env(game: str, autoreset: bool = False, max_episode_steps: int | None = None) -> gym.Env:
    """One Octax game, e.g. ``make_octax_env("brix")``."""
    return OctaxEnv(game, autoreset=autoreset, max_episode_steps=max_episode_steps)
