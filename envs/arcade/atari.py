"""ALE Atari with the standard streaming preprocessing.

No-op reset (up to 30), frame-skip 4 with a max-pool over the last two frames, 84×84 greyscale, 4-frame stack
(channel-first (4, 84, 84) uint8); optional sticky actions, episodic life and fire-on-reset.

Episodic life follows the streaming reference (Stream-x's SB3 wrappers), not gymnasium's ``terminal_on_life_loss``
(which restarts the whole game at every lost life): the game goes on, and the step that loses a life carries
``info["life_loss"] = True`` so the learner can treat it as terminal (no bootstrap, traces reset) while returns
and episodes stay those of whole games.
"""

from __future__ import annotations

import functools

import gymnasium as gym

from envs.errors import ConfigError, choice_error


class LifeLoss(gym.Wrapper):
    """Flags life losses in ``info["life_loss"]``; with ``fire`` presses FIRE after reset and every lost life.

    FIRE matters for games such as Breakout, where nothing happens until the ball is launched: without it an
    agent that has not yet learnt to fire sits through a stalled game.
    """

    def __init__(self, env: gym.Env, flag: bool = True, fire: bool = False) -> None:
        super().__init__(env)
        self.flag = bool(flag)
        meanings = env.unwrapped.get_action_meanings()
        self.fire_action = meanings.index("FIRE") if fire and "FIRE" in meanings else None
        self.lives = 0

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        if self.fire_action is not None:
            obs, _, terminated, truncated, info = self.env.step(self.fire_action)
            if terminated or truncated:  # never in practice; keep the contract of a live first state
                obs, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        lost = lives < self.lives and not (terminated or truncated)
        self.lives = lives
        if lost and self.fire_action is not None:
            obs, extra, terminated, truncated, info = self.env.step(self.fire_action)
            reward = float(reward) + float(extra)
            self.lives = self.env.unwrapped.ale.lives()
        if self.flag:
            info = {**info, "life_loss": bool(lost)}
        return obs, reward, terminated, truncated, info


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
    fire_reset: bool = False,
    noop_max: int = 30,
    frame_stack: int = 4,
    max_episode_steps: int | None = 108_000,
) -> gym.Env:
    """One Atari game, e.g. ``make_atari_env("Pong")``; ``max_episode_steps`` counts agent steps (after skip).

    ``episodic_life`` adds ``info["life_loss"]`` (see the module docstring); ``fire_reset`` presses FIRE after
    reset and after every lost life in games that have a FIRE action (both as in the Stream-x Atari scripts).
    """
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
        terminal_on_life_loss=False,  # see LifeLoss
        grayscale_obs=True,
        scale_obs=False,
    )
    if episodic_life or fire_reset:
        env = LifeLoss(env, flag=bool(episodic_life), fire=bool(fire_reset))
    # FrameStackObservation already yields a (stack, 84, 84) uint8 array: the arcade channel-first layout.
    return gym.wrappers.FrameStackObservation(env, int(frame_stack))

