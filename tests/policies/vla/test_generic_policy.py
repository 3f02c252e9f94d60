"""The GenericVLA policy: real frozen encoders, frozen head at evaluation, instruction handling."""

import numpy as np
import pytest
import torch

from agents.episodic import run_episode
from envs.errors import ConfigError
from envs.manipulation.env import make_env
from policies.vla.checkpoint import HeadBundle, load_checkpoint, save_checkpoint
from policies.vla.checkpoint_files import freeze, parameter_digest
from policies.vla.generic import GenericVLA, drop_possessive
from policies.vla.model import FiLMActionHead, HeadConfig, VisionSpec


def test_drop_possessive():
    assert drop_possessive("pick up my mug") == "pick up the mug"
    assert drop_possessive("put My cup on the plate") == "put the cup on the plate"
    assert drop_possessive("move myriad mugs") == "move myriad mugs"  # whole word only


@pytest.fixture(scope="module")
def bundle():
    cfg = HeadConfig(vision=VisionSpec(input_size=96), state_dim=6, width=32, keypoints=8, hidden=64)
    torch.manual_seed(0)
    head = FiLMActionHead(cfg)
    with torch.no_grad():  # a nonzero FiLM so the instruction actually changes the output
        for block in head.blocks:
            block.film.weight.normal_(0, 0.5)
    return HeadBundle(cfg, freeze(head), np.zeros(7, np.float32), np.full(7, 0.01, np.float32),
                      np.zeros(6, np.float32), np.ones(6, np.float32))


def test_policy_is_frozen_during_episodes(bundle, tmp_path):
    save_checkpoint(bundle, tmp_path / "ck")
    policy = GenericVLA.from_checkpoint(tmp_path / "ck", instruction_rewrite=drop_possessive)
    before = parameter_digest(policy.head)
    assert not policy.head.training and not any(p.requires_grad for p in policy.head.parameters())
    env = make_env("fractal_pick_my", {"max_steps": 4, "image_size": 96})
    for ep in range(2):
        out = run_episode(env, policy, env_seed=ep, policy_seed=ep)
        assert out.steps == 4
        assert "my" not in policy.instruction.split() and policy.instruction.startswith("pick up the ")
    env.close()
    assert parameter_digest(policy.head) == before
    # act() output is a valid action: 7 floats, gripper committed to ±1
    obs = {"image": np.zeros((224, 224, 3), np.uint8), "ee_state": np.zeros(6, np.float32)}
    policy.reset("pick up the red mug", {})
    a = policy.act(obs)
    assert a.shape == (7,) and a.dtype == np.float32 and abs(a[6]) == 1.0
    # the instruction conditions the action
    chunk_red = policy.predict_chunk(obs)
    policy.reset("pick up the blue striped bottle", {})
    assert not np.allclose(chunk_red, policy.predict_chunk(obs))
    with pytest.raises(ConfigError, match="unknown execution mode"):
        GenericVLA(bundle, execution="vote")


def test_queue_execution_runs_each_chunk_open_loop(bundle):
    obs = {"image": np.zeros((224, 224, 3), np.uint8), "ee_state": np.zeros(6, np.float32)}
    policy = GenericVLA(bundle, execution="queue", action_steps=2)
    policy.reset("pick up the red mug", {})
    calls = []
    real = policy.predict_chunk
    policy.predict_chunk = lambda o: calls.append(1) or real(o)
    chunk = real(obs)
    actions = [policy.act(obs) for _ in range(4)]
    assert len(calls) == 2  # a new chunk every 2 steps
    assert np.allclose(actions[0][:6], chunk[0][:6]) and np.allclose(actions[1][:6], chunk[1][:6])
    assert np.allclose(actions[2][:6], chunk[0][:6])  # same observation, fresh chunk: the same actions again
    policy.reset("pick up the red mug", {})  # reset empties the queue
    policy.act(obs)
    assert len(calls) == 3
    with pytest.raises(ConfigError, match="action_steps 9 is out of range"):
        GenericVLA(bundle, execution="queue", action_steps=9)


def test_shipped_checkpoint_loads_if_present():
    from policies.vla.checkpoint import DEFAULT_CHECKPOINT

    if not (DEFAULT_CHECKPOINT / "manifest.json").is_file():
        pytest.skip("no shipped checkpoint in this checkout")
    b = load_checkpoint()
    assert b.config.state_dim == 6 and b.config.action_dim == 7


def test_registered_generic_policy_builds_and_rejects_bad_checkpoint(bundle, tmp_path):
    from sim_benchmarks import registry
    from sim_benchmarks.registry import PolicyContext

    assert "generic" in registry.policies_for("personalized_simpler")
    assert "generic" in registry.policies_for("generic_simpler")
    save_checkpoint(bundle, tmp_path / "ck")
    env = make_env("fractal_pick_my", {"max_steps": 2, "image_size": 96})
    spec = registry.policies()["generic"]
    ctx = PolicyContext("personalized_simpler", "fractal_pick_my", "generic", 0, env,
                        {"vla_checkpoint": str(tmp_path / "ck")})
    policy = spec.factory(ctx)
    obs, info = env.reset(seed=0)
    policy.reset(obs["instruction"], info)
    assert policy.instruction == obs["instruction"].replace("my ", "the ")
    bad = PolicyContext("personalized_simpler", "fractal_pick_my", "generic", 0, env,
                        {"vla_checkpoint": str(tmp_path / "ck2")})
    with pytest.raises(ConfigError, match="does not exist"):
        spec.factory(bad)
    queued = spec.factory(PolicyContext("personalized_simpler", "fractal_pick_my", "generic", 0, env, {
        "vla_checkpoint": str(tmp_path / "ck"), "vla_execution": "queue", "vla_action_steps": 2}))
    assert queued.execution == "queue" and queued.queue.n_steps == 2
    with pytest.raises(ConfigError, match="vla_action_steps must be an integer"):
        spec.factory(PolicyContext("personalized_simpler", "fractal_pick_my", "generic", 0, env, {
            "vla_checkpoint": str(tmp_path / "ck"), "vla_action_steps": "two"}))
    env.close()


def test_state_indices_select_the_proprio_inputs(tmp_path):
    cfg = HeadConfig(vision=VisionSpec(input_size=96), state_dim=4, state_indices=(2, 3, 4, 5), width=32,
                     keypoints=8, hidden=64)
    torch.manual_seed(0)
    bundle = HeadBundle(cfg, freeze(FiLMActionHead(cfg)), np.zeros(7, np.float32), np.ones(7, np.float32),
                        np.zeros(4, np.float32), np.ones(4, np.float32))
    save_checkpoint(bundle, tmp_path / "ck")
    policy = GenericVLA.from_checkpoint(tmp_path / "ck")
    assert policy.cfg.state_indices == (2, 3, 4, 5)  # survives the JSON manifest as a tuple
    policy.reset("pick up the red mug", {})
    rng = np.random.default_rng(0)
    obs = {"image": rng.integers(0, 255, (96, 96, 3), dtype=np.uint8), "ee_state": np.zeros(6, np.float32)}
    base = policy.predict_chunk(obs)
    moved_xy = {**obs, "ee_state": np.array([0.3, -0.2, 0, 0, 0, 0], np.float32)}
    np.testing.assert_allclose(policy.predict_chunk(moved_xy), base)  # x, y are not inputs
    lifted = {**obs, "ee_state": np.array([0, 0, 0.2, 0, 0, 0], np.float32)}
    assert not np.allclose(policy.predict_chunk(lifted), base)  # z is


def test_first_frame_grounding_benchmark_reads_the_auxiliary_head(bundle, tmp_path, capsys):
    import json

    from sim_benchmarks.studies.generic_vla.vla_grounding import main

    cfg = HeadConfig(vision=VisionSpec(backbone="cnn", blocks=0, input_size=96, channels=3), state_dim=6, width=16,
                     keypoints=4, hidden=32, aux_dim=2)
    torch.manual_seed(0)
    with_aux = HeadBundle(cfg, freeze(FiLMActionHead(cfg)), np.zeros(7, np.float32), np.ones(7, np.float32),
                          np.zeros(6, np.float32), np.ones(6, np.float32))
    save_checkpoint(with_aux, tmp_path / "aux")
    policy = GenericVLA(with_aux)
    policy.reset("pick up the red mug", {})
    obs = {"image": np.zeros((224, 224, 3), np.uint8), "ee_state": np.zeros(6, np.float32)}
    assert policy.predict_target_offset(obs).shape == (2,)
    assert GenericVLA(bundle).predict_target_offset(obs) is None  # trained without the auxiliary output
    out = tmp_path / "g"
    assert main(["--checkpoint", str(tmp_path / "aux"), "--episodes", "2", "--tasks", "bridge_pick",
                 "--splits", "test", "--out", str(out)]) == 0
    row = json.loads((out / "vla_grounding.json").read_text())["rows"][0]
    assert row["episodes"] == 2 and sum(row["nearest"].values()) == 2 and 0 <= row["target_share"] <= 1
    assert main(["--checkpoint", str(tmp_path / "aux"), "--splits", "val", "--out", str(tmp_path / "bad")]) == 2
    assert "unknown split 'val'" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    save_checkpoint(bundle, tmp_path / "noaux")
    assert main(["--checkpoint", str(tmp_path / "noaux"), "--episodes", "1", "--tasks", "bridge_pick",
                 "--splits", "test", "--out", str(tmp_path / "bad")]) == 2
    assert "neither an object memory nor an auxiliary target output" in capsys.readouterr().err
