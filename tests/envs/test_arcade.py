"""Arcade envs: the shared channel-first uint8 layout, gymnasium's env checker, seeding and bad names."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs.arcade import env_names, games, make_arcade_env, split_name
from envs.errors import ConfigError

LAYOUTS = {
    "minatar:breakout": (4, 10, 10),
    "minatar:asterix": (4, 10, 10),
    "minatar:freeway": (7, 10, 10),
    "minatar:seaquest": (10, 10, 10),
    "minatar:space_invaders": (6, 10, 10),
    "atari:Pong": (4, 84, 84),
    "atari:Breakout": (4, 84, 84),
    "octax:brix": (4, 32, 64),
    "octax:cavern1": (4, 32, 64),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_env_passes_check_env_with_documented_layout(name):
    env = make_arcade_env(name)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=3)
    assert obs.shape == LAYOUTS[name] == env.observation_space.shape
    assert obs.dtype == np.uint8 and obs.flags["C_CONTIGUOUS"]
    high = 255 if name.startswith("atari") else 1
    assert obs.max() <= high and env.observation_space.high.max() == high
    for _ in range(5):
        obs, r, term, trunc, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs) and isinstance(r, float)
    env.close()


@pytest.mark.parametrize("name", ["minatar:seaquest", "atari:Pong", "octax:brix"])
def test_reset_seed_determines_the_trajectory(name):
    def rollout(seed):
        env = make_arcade_env(name)
        obs, _ = env.reset(seed=seed)
        frames, rewards = [obs], []
        rng = np.random.default_rng(0)
        for _ in range(60):
            obs, r, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
            frames.append(obs)
            rewards.append(r)
            if term or trunc:
                break
        return np.stack(frames), rewards

    a, ra = rollout(7)
    b, rb = rollout(7)
    assert np.array_equal(a, b) and ra == rb
    if name.startswith("minatar"):  # spawns depend on the seed
        c, _ = rollout(8)
        assert c.shape != a.shape or not np.array_equal(a, c)


def test_minatar_layout_is_the_transposed_planes():
    import minatar

    env = make_arcade_env("minatar:breakout", {"sticky_action_prob": 0.0})
    obs, _ = env.reset(seed=0)
    raw = env.unwrapped._env.state()  # (10, 10, C) bool
    assert np.array_equal(obs, raw.transpose(2, 0, 1).astype(np.uint8))
    assert isinstance(env.unwrapped._env, minatar.Environment)


def test_octax_games_include_levelled_ids_and_autoreset():
    names = games("octax")
    for n in ("brix", "cavern1", "cavern6", "space_flight1", "space_flight10", "target_shooter3", "pong"):
        assert n in names
    assert "cavern" not in names and "space_flight" not in names
    env = make_arcade_env("octax:brix", {"autoreset": True, "max_episode_steps": 3})
    obs0, _ = env.reset(seed=1)
    done = False
    for _ in range(3):
        _, _, term, trunc, _ = env.step(0)
        done = term or trunc
    assert done  # truncated by the 3-step limit
    obs, r, term, trunc, _ = env.step(0)  # auto-reset step
    assert r == 0.0 and not (term or trunc)
    assert np.array_equal(obs, obs0)  # brix starts from the same screen
    strict = make_arcade_env("octax:brix", {"max_episode_steps": 3})  # same compiled backend as above
    strict.reset(seed=0)
    for _ in range(3):
        strict.step(0)
    with pytest.raises(RuntimeError, match="reset"):
        strict.step(0)


def test_atari_options_and_names():
    assert "Pong" in games("atari") and "MsPacman" in games("atari")
    env = make_arcade_env("atari:Breakout", {"episodic_life": True, "sticky_actions": True})
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84)
    names = env_names()
    assert "minatar:space_invaders" in names and "atari:Pong" in names and "octax:brix" in names


def test_atari_episodic_life_flags_lost_lives_and_the_game_goes_on():
    # Stream-x semantics: a lost life is flagged (the learner treats it as terminal) but the game is not restarted,
    # so an episode is a whole game; fire_reset launches the ball after reset and after every lost life.
    env = make_arcade_env("atari:Breakout", {"episodic_life": True, "fire_reset": True})
    env.reset(seed=0)
    ale = env.unwrapped.ale
    assert ale.lives() == 5
    rng = np.random.default_rng(0)
    losses, lives_seen = 0, [5]
    for _ in range(3000):
        _, _, terminated, truncated, info = env.step(int(rng.integers(4)))
        losses += info["life_loss"]
        if info["life_loss"]:
            assert ale.lives() == lives_seen[-1] - 1 and not terminated
            lives_seen.append(ale.lives())
        if terminated or truncated:
            break
    assert terminated and losses == 4 and ale.lives() == 0  # the fifth loss ends the game (terminated, no flag)
    plain = make_arcade_env("atari:Breakout")
    plain.reset(seed=0)
    assert "life_loss" not in plain.step(0)[4]


def test_atari_fire_reset_launches_the_ball():
    # Breakout never ends while the agent only takes NOOP unless FIRE is pressed for it
    def noop_steps_to_first_loss(opts):
        env = make_arcade_env("atari:Breakout", {**opts, "max_episode_steps": 400})
        env.reset(seed=0)
        for t in range(400):
            if env.step(0)[4]["lives"] < 5:
                return t
        return None

    assert noop_steps_to_first_loss({}) is None
    assert noop_steps_to_first_loss({"fire_reset": True}) is not None


def test_atari_grayscale_base_env_matches_the_standard_rgb_pipeline():
    # make_atari_env builds the ALE env with obs_type="grayscale" (cheaper); the observations must be exactly those
    # of AtariPreprocessing over the default RGB env.
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    rgb = gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.0, full_action_space=False,
                   disable_env_checker=True)
    rgb = gym.wrappers.FrameStackObservation(
        gym.wrappers.AtariPreprocessing(rgb, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True), 4)
    ours = make_arcade_env("atari:Breakout")
    rng = np.random.default_rng(0)
    a, _ = rgb.reset(seed=5)
    b, _ = ours.reset(seed=5)
    assert np.array_equal(a, b)
    for _ in range(60):
        act = int(rng.integers(4))
        (a, ra, ta, *_), (b, rb, tb, *_) = rgb.step(act), ours.step(act)
        assert np.array_equal(a, b) and ra == rb and ta == tb


@pytest.mark.parametrize("name, match", [
    ("minatar:pacman", "unknown minatar game 'pacman'; valid: asterix, breakout"),
    ("atari:pong", "unknown atari game 'pong'"),
    ("octax:cavern", "unknown octax game 'cavern'"),
    ("nes:mario", "unknown arcade env prefix 'nes:mario'"),
    ("minatar:", "has no game"),
])
def test_bad_names_raise_config_error(name, match):
    with pytest.raises(ConfigError, match=match):
        make_arcade_env(name)


def test_split_name_and_bad_options():
    assert split_name("octax:space_flight3") == ("octax", "space_flight3")
    with pytest.raises(ConfigError, match="sticky_action_prob"):
        make_arcade_env("minatar:breakout", {"sticky_action_prob": 2.0})
    with pytest.raises(ConfigError, match="unknown atari env option 'lives'; valid: sticky_actions, episodic_life"):
        make_arcade_env("atari:Breakout", {"lives": 3})
