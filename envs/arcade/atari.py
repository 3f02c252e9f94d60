"""ALE Atari with the standard streaming preprocessing.

No-op reset (up to 30), frame-skip 4 with a max-pool over the last two frames, 84×84 greyscale, 4-frame stack
(channel-first (4, 84, 84) uint8); optional sticky actions and episodic life.
"""

from __future__ import annotations

import functools

import gymnasium as gym

from envs.errors import ConfigError, choice_error


@functools.cache
def atari_games() -> list[str]:
    """ALE game names in gymnasium spelling (``Pong``, ``MsPacman``, ...), from the ROMs ale-py ships."""
    import ale_py
    import ale_py.roms

    gym.register_envs(ale_py)
    return sorted("".join(p.capitalize() for p in rom.split("_")) for rom in ale_py.roms.get_all_rom_ids())


def make_atari_env(
    game: str,
    sticky_actions: bool = False,
    episodic_life: bool = False,
    noop_max: int = 30,
    frame_stack: int = 4,
    max_episode_steps: int | None = 108_000,
) -> gym.Env:
    """One Atari game, e.g. ``make_atari_env("Pong")``; ``max_episode_steps`` counts agent steps (after skip)."""
    valid = atari_games()
    if game not in valid:
        raise choice_error("atari game", game, valid)
    if int(noop_max) < 0 or int(frame_stack) < 1:
        raise ConfigError(f"noop_max must be >= 0 and frame_stack >= 1, got {noop_max!r}, {frame_stack!r}")
    env = gym.make(
        f"ALE/{game}-v5",
        frameskip=1,  # AtariPreprocessing does the skip so it can max-pool the last two frames
        # AtariPreprocessing reads the grey screens itself: a grayscale base env skips an unused RGB copy per
        # frame and yields bit-identical observations
        obs_type="grayscale",
        repeat_action_probability=0.25 if sticky_actions else 0.0,
        full_action_space=False,
        max_episode_steps=None if max_episode_steps is None else int(max_episode_steps) * 4,
        disable_env_checker=True,
    )
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=int(noop_max),
        frame_skip=4,
        screen_size=84,
        terminal_on_life_loss=bool(episodic_life),
        grayscale_obs=True,
        scale_obs=False,
    )
    # FrameStackObservation already yields a (stack, 84, 84) uint8 array: the arcade channel-first layout.
    return gym.wrappers.FrameStackObservation(env, int(frame_stack))

