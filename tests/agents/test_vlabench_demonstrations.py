"""VLABench demonstrations as SIMPLER deltas, and a tiny generic-VLA training run on the suite's generic track."""

import math
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from agents.manipulation.vlabench_demonstrations import (  # noqa: E402
    VLABenchDemoConfig,
    absolute_to_delta,
    relabel,
    to_base_frame,
)
from envs.errors import ConfigError  # noqa: E402
from envs.manipulation.objects import instances  # noqa: E402
from envs.manipulation.scene import MAX_DELTA_POS, MAX_DELTA_ROT  # noqa: E402
from envs.manipulation.vlabench.scene import apply_delta  # noqa: E402


def test_absolute_to_delta_inverts_apply_delta_within_the_clip():
    rng = np.random.default_rng(0)
    for _ in range(50):
        pos, rpy = rng.uniform(-0.5, 1.0, 3), np.array([math.pi, 0.0, rng.uniform(-math.pi, math.pi)])
        step = rng.uniform(-MAX_DELTA_POS, MAX_DELTA_POS, 3)
        yaw = rpy[2] + rng.uniform(-MAX_DELTA_ROT, MAX_DELTA_ROT)
        delta = absolute_to_delta(np.array([*(pos + step), math.pi, 0.0, yaw, 1.0]), pos, rpy)
        new_pos, new_rpy = apply_delta(pos, rpy, delta, MAX_DELTA_POS, MAX_DELTA_ROT)
        assert np.allclose(new_pos, pos + step, atol=1e-5)
        assert math.isclose(math.cos(new_rpy[2] - yaw), 1.0, abs_tol=1e-6)
        assert delta[6] == 1.0 and delta[3] == delta[4] == 0.0


def test_absolute_to_delta_clips_far_targets_and_takes_yaw_modulo_a_half_turn():
    delta = absolute_to_delta(np.array([1.0, -1.0, 2.0, math.pi, 0.0, math.pi, -1.0]), np.zeros(3),
                              np.array([math.pi, 0.0, 0.0]))
    assert np.allclose(np.abs(delta[:3]), MAX_DELTA_POS) and delta[5] == pytest.approx(0.0, abs=1e-6)
    # base x is world +y: a target ahead of the robot (world +y) is a positive base-frame x step
    ahead = absolute_to_delta(np.array([0.0, 0.01, 0.0, math.pi, 0.0, 0.0, -1.0]), np.zeros(3), np.zeros(3))
    assert ahead[0] == pytest.approx(0.01, abs=1e-6) and abs(ahead[1]) < 1e-6


def test_to_base_frame_puts_the_base_at_the_origin_facing_world_y():
    assert np.allclose(to_base_frame([0.0, -0.4, 0.78]), 0.0, atol=1e-6)
    assert np.allclose(to_base_frame([0.1, -0.2, 0.88]), [0.2, -0.1, 0.1], atol=1e-6)


def test_relabel_uses_a_phrase_that_singles_the_target_out():
    mugs = instances("mug", "train")
    target = mugs[0]
    others = [m for m in mugs[1:] if m.colour != target.colour][:2]
    info = {"personal_object": target.instance_id, "distractors": [o.instance_id for o in others]}
    text = f"pick up the {target.colour} mug"
    out = relabel(text, info, False, np.random.default_rng(0))
    assert out.startswith("pick up the ") and out.endswith(" mug") and "my" not in out.split()
    assert target.colour in out or target.pattern != "plain"


def test_bad_config_is_one_config_error():
    with pytest.raises(ConfigError, match="nope"):
        VLABenchDemoConfig(tasks=("nope",))
    with pytest.raises(ConfigError, match="episodes"):
        VLABenchDemoConfig(episodes=0)
    with pytest.raises(ConfigError, match="look_randomisation"):
        VLABenchDemoConfig(look_randomisation=1.5)
    with pytest.raises(ConfigError, match="place tasks"):
        VLABenchDemoConfig(tasks=("select_my_pick",), driver="checkpoints/vlabench_vla", driven_part="carry")
    with pytest.raises(ConfigError, match="lift"):
        VLABenchDemoConfig(driven_part="lift")
    with pytest.raises(ConfigError, match="label frame"):
        VLABenchDemoConfig(label_frame="world")


def test_hand_frame_labels_start_from_the_hand_and_replay_through_the_adapter():
    from agents.manipulation.vlabench_demonstrations import collect_vlabench_demos
    from envs.manipulation.vlabench.env import make_env
    from policies.manipulation.delta_adapter import DeltaToAbsolute

    cfg = VLABenchDemoConfig(tasks=("select_my_pick",), episodes=1, max_steps=8, image_size=64, seed=0,
                             noise_fraction=0.0, keep_failed=True)
    hand = collect_vlabench_demos(replace(cfg, label_frame="hand"))
    command = collect_vlabench_demos(cfg)
    assert hand.episodes[0]["seed"] == command.episodes[0]["seed"]
    # the arm trails its command: from the second step on, deltas from the hand differ from deltas from the command
    assert not np.allclose(np.stack(hand.actions)[1:, :3], np.stack(command.actions)[1:, :3], atol=2e-3)
    # hand-frame labels take the expert's own step (up to 5 cm per axis), not the command frame's 3 cm
    from envs.manipulation.scene import MAX_DELTA_POS
    from envs.manipulation.vlabench.scene import HAND_MAX_DELTA_POS

    assert np.abs(np.stack(command.actions)[:, :3]).max() <= MAX_DELTA_POS + 1e-6
    assert MAX_DELTA_POS + 0.005 < np.abs(np.stack(hand.actions)[:, :3]).max() <= HAND_MAX_DELTA_POS + 1e-6

    class Replay:  # a hand-frame policy that emits the recorded labels
        def __init__(self):
            self.action_frame = "hand"
            self.labels = iter(hand.actions)

        def reset(self, instruction, info):
            pass

        def act(self, obs):
            return next(self.labels)

    env = make_env("select_my_pick", {"track": "in_distribution", "action_mode": "absolute",
                                      "cameras": ("front",), "image_size": 64, "max_steps": 8, "references": False})
    try:
        adapter = DeltaToAbsolute(Replay())
        assert adapter.frame == "hand"
        obs, info = env.reset(seed=hand.episodes[0]["seed"])
        adapter.reset("", info)
        for state in hand.states:
            # the adapter visits the recorded states (to float noise: it starts its yaw from the measured hand)
            assert np.allclose(obs["ee_state"], state, atol=1e-3)
            obs = env.step(adapter.act(obs))[0]
    finally:
        env.close()


def test_driven_episodes_record_the_expert_labels_at_the_states_the_checkpoint_reaches():
    from agents.manipulation.vlabench_demonstrations import collect_vlabench_demos
    from envs.paths import CHECKPOINTS

    cfg = VLABenchDemoConfig(tasks=("select_my_in_box",), episodes=1, max_steps=6, image_size=64, seed=0,
                             noise_fraction=0.0, driver=str(CHECKPOINTS / "vlabench_vla"), driver_sha256="x")
    driven = collect_vlabench_demos(cfg)
    record = driven.episodes[0]
    assert record["index"] == 1_000_000 and record["driven_steps"] == 6 and not record["success"]
    assert len(driven) == 6  # kept although it failed: every frame holds the expert's label
    again = collect_vlabench_demos(cfg)
    assert all(np.array_equal(a, b) for a, b in zip(driven.frames, again.frames, strict=True))  # seeded
    # the labels are the expert's (toward the target) at states the checkpoint drove to (not the expert's own path)
    for state, label, target in zip(driven.states, driven.actions, driven.targets, strict=True):
        rel = np.asarray(target[:2]) - state[:2]
        assert label[6] < 0 and (np.linalg.norm(rel) < 0.01 or float(np.dot(label[:2], rel)) > 0)
    from envs.manipulation.vlabench.env import make_env
    from policies.manipulation.vlabench_expert import VLABenchExpert

    env = make_env("select_my_in_box", {"track": "in_distribution", "action_mode": "delta", "cameras": ("front",),
                                        "image_size": 64, "max_steps": 6, "references": False})
    try:
        obs, info = env.reset(seed=record["seed"])
        expert = VLABenchExpert(env, seed=record["seed"], funnel=True)
        expert.reset(record["instruction"], info)
        for label in driven.actions[:-1]:
            obs = env.step(label)[0]  # the expert executing its own labels
        assert not np.allclose(obs["ee_state"], driven.states[-1], atol=1e-3)
    finally:
        env.close()


def test_look_randomisation_renders_the_demos_in_randomised_rooms():
    from agents.manipulation.vlabench_demonstrations import collect_vlabench_demos

    cfg = VLABenchDemoConfig(tasks=("select_my_pick",), episodes=1, max_steps=2, image_size=64, seed=0)
    plain = collect_vlabench_demos(replace(cfg, keep_failed=True))
    room = collect_vlabench_demos(replace(cfg, keep_failed=True, look_randomisation=1.0))
    assert plain.episodes[0]["randomised_look"] is False and room.episodes[0]["randomised_look"] is True
    assert plain.episodes[0]["seed"] == room.episodes[0]["seed"]  # same scene, another room
    assert not np.array_equal(plain.frames[0], room.frames[0])


@pytest.mark.slow
def test_tiny_vlabench_training_is_deterministic_and_acts_through_the_suite(tmp_path):
    from agents.episodic import run_episode
    from launch.train_vla import run
    from policies.vla.checkpoint import load_checkpoint
    from sim_benchmarks import registry
    from sim_benchmarks.suites.personalized_vlabench import SUITE, _make, _metrics

    args = ["--suite", "personalized_vlabench", "--seed", "0", "--demos", "2", "--tasks", "select_my_in_box",
            "--epochs", "2", "--width", "16", "--input-size", "64", "--aux-weight", "1", "--eval-episodes", "0"]
    first = run(["--out", str(tmp_path / "a"), *args])
    assert first["env"] == "personalized_vlabench:generic" and first["demos"]["frames"] > 20
    second = run(["--out", str(tmp_path / "b"), "--demo-cache", str(tmp_path / "a" / "demos.npz"), *args])
    assert second["weights_sha256"] == first["weights_sha256"]  # same seed, same data → same weights
    bundle = load_checkpoint(tmp_path / "a" / "checkpoint")
    assert bundle.config.state_dim == 6 and bundle.config.aux_dim == 2 and bundle.config.vision.input_size == 64
    # the trained head acts through the suite's generic policy (SIMPLER deltas → absolute targets)
    env = _make("select_my_pick", {"cameras": ("front",), "max_steps": 4, "references": False})
    try:
        ctx = registry.PolicyContext(suite=SUITE, task="select_my_pick", policy="generic", seed=0, env=env,
                                     options={"vla_checkpoint": str(tmp_path / "a" / "checkpoint")})
        policy = registry.policies()["generic"].factory(ctx)
        assert policy.base.bundle.config == bundle.config
        out = run_episode(env, policy, env_seed=3, policy_seed=0, episode_metrics=_metrics)
        assert out.steps == 4 and set(out.metrics) >= {"success", "correct_object", "progress_score"}
        # an object-memory head trains on the same demos (labels: the recorded front-view positions) and acts too
        run(["--out", str(tmp_path / "m"), "--demo-cache", str(tmp_path / "a" / "demos.npz"), "--memory", "2",
             *args])
        memory_ctx = registry.PolicyContext(suite=SUITE, task="select_my_pick", policy="generic", seed=0, env=env,
                                            options={"vla_checkpoint": str(tmp_path / "m" / "checkpoint")})
        memory_policy = registry.policies()["generic"].factory(memory_ctx)
        assert memory_policy.base.bundle.config.memory == 2
        assert run_episode(env, memory_policy, env_seed=3, policy_seed=0, episode_metrics=_metrics).steps == 4
    finally:
        env.close()


def test_front_view_projection_lands_on_the_object_and_labels_the_demos():
    from agents.manipulation.vlabench_demonstrations import collect_vlabench_demos
    from envs.manipulation.vlabench.env import make_env

    env = make_env("select_my_in_box", {"track": "in_distribution", "cameras": ("front",), "image_size": 128,
                                        "references": False})
    try:
        for seed in range(3):
            env.reset(seed=seed)
            scene = env.unwrapped.scene
            seg = scene.render("front", segmentation=True)
            for obj in env.unwrapped.privileged_state()["objects"]:
                middle = np.asarray(obj["start"]) + [0.0, 0.0, obj["height"] / 2]
                u, v = ((scene.project("front", middle)[0] + 1) / 2 * 128).astype(int)
                assert seg[v, u] == obj["body"]  # the object's own pixel, not a neighbour's or the table's
    finally:
        env.close()
    demos = collect_vlabench_demos(VLABenchDemoConfig(tasks=("select_my_in_box",), episodes=1, image_size=64))
    assert len(demos.uv) == len(demos) > 0
    assert np.isfinite(demos.uv[0]).all() and (np.abs(demos.uv[0]) < 1).all()  # target and box both in view
