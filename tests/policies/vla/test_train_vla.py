"""A tiny-budget end-to-end training run of the generic VLA through ``launch.train_vla``."""

import json

import numpy as np
import pytest
import torch

from envs.manipulation.env import make_env
from launch.train_vla import main, run
from policies.vla.checkpoint import load_checkpoint
from policies.vla.checkpoint_files import sha256_file
from policies.vla.generic import GenericVLA


@pytest.mark.slow
def test_tiny_training_run_is_reproducible(tmp_path):
    args = ["--seed", "1", "--demos", "2", "--tasks", "fractal_pick", "--epochs", "3", "--input-size", "96",
            "--width", "32", "--backbone", "mobilenet_v2_imagenet"]
    first = run(["--out", str(tmp_path / "a"), "--eval-episodes", "1", *args])
    assert first["schema"] == "embodia.train/1" and first["agent"] == "generic_vla_bc"
    assert first["demos"]["attempted"] == 2 and first["demos"]["frames"] > 10
    ck = tmp_path / "a" / "checkpoint"
    assert sha256_file(ck / "head.pt") == first["weights_sha256"]
    bundle = load_checkpoint(ck)
    assert bundle.config.vision.input_size == 96 and bundle.config.state_dim == 6
    assert bundle.config.vision.backbone == "mobilenet_v2_imagenet"
    metrics = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics if "epoch" in m] == list(range(1, first["train"]["epochs_run"] + 1))
    assert "fractal_pick" in first["eval"] and 0.0 <= first["eval"]["mean_success_rate"] <= 1.0
    manifest = json.loads((ck / "manifest.json").read_text())
    assert manifest["training"]["command"].startswith("python -m launch.train_vla --out")
    # same cached demos + same seed → byte-identical weights
    second = run(["--out", str(tmp_path / "b"), "--demo-cache", str(tmp_path / "a" / "demos.npz"),
                  "--eval-episodes", "0", *args])
    assert second["weights_sha256"] == first["weights_sha256"]


@pytest.mark.slow
def test_tiny_cnn_backbone_run_trains_on_raw_frames(tmp_path):
    args = ["--seed", "2", "--demos", "2", "--tasks", "fractal_pick", "--epochs", "2", "--backbone", "cnn",
            "--width", "16", "--shift-cells", "4", "--aux-weight", "1"]
    first = run(["--out", str(tmp_path / "a"), "--eval-episodes", "1", *args])
    bundle = load_checkpoint(tmp_path / "a" / "checkpoint")
    assert bundle.config.vision.backbone == "cnn" and bundle.config.vision.input_size == 96
    assert first["eval"]["fractal_pick"]["episodes"] == 1
    # the blocks keep full-size frames: another input size reuses them without collecting again
    blocks = sorted((tmp_path / "a" / "demo_blocks").iterdir())
    second = run(["--out", str(tmp_path / "b"), "--eval-episodes", "0", "--input-size", "64",
                  "--demo-blocks", str(tmp_path / "a" / "demo_blocks"), *args])
    assert second["demos"]["frames"] == first["demos"]["frames"]
    assert load_checkpoint(tmp_path / "b" / "checkpoint").config.vision.input_size == 64
    assert blocks == sorted((tmp_path / "a" / "demo_blocks").iterdir())
    # DAgger: the first run's policy drives the approach of 2 more episodes, the expert labels them
    third = run(["--out", str(tmp_path / "c"), "--eval-episodes", "0", "--dagger", str(tmp_path / "a" / "checkpoint"),
                 "--dagger-demos", "2", "--demo-blocks", str(tmp_path / "a" / "demo_blocks"), *args])
    assert third["demos"]["attempted"] == 4 and third["demos"]["driven"] == 2
    assert third["demos"]["frames"] > first["demos"]["frames"]
    assert len(sorted((tmp_path / "a" / "demo_blocks").iterdir())) == len(blocks) + 1  # the expert blocks reused


@pytest.mark.slow
@pytest.mark.parametrize("words", [0, 8])
def test_tiny_memory_head_run_localises_on_the_first_frame(tmp_path, words):
    args = ["--seed", "3", "--demos", "2", "--tasks", "fractal_pick,bridge_put_on", "--epochs", "2", "--backbone",
            "cnn", "--width", "16", "--shift-cells", "4", "--aux-weight", "1", "--memory", "2", "--words", str(words)]
    summary = run(["--out", str(tmp_path / "a"), "--eval-episodes", "0", *args])
    cache = np.load(tmp_path / "a" / "demos.npz")
    goals = cache["goals"]
    assert goals.shape == cache["targets"].shape and np.isnan(goals).all(1).any() and np.isfinite(goals).all(1).any()
    assert summary["train"]["epochs_run"] == 2
    policy = GenericVLA.from_checkpoint(tmp_path / "a" / "checkpoint")
    assert policy.cfg.memory == 2 and policy.cfg.words == words and policy.cfg.aux_dim == 0
    # the memory is compared with the gripper in metres: the head carries ee_state's x, y normalisation
    np.testing.assert_allclose(policy.head.ee_xy_mean.numpy(), policy.bundle.state_mean[:2], rtol=1e-6)
    np.testing.assert_allclose(policy.head.ee_xy_std.numpy(), policy.bundle.state_std[:2], rtol=1e-6)
    env = make_env("bridge_put_on", {"max_steps": 3, "image_size": 96, "split": "test"})
    obs, info = env.reset(seed=0)
    policy.reset(obs["instruction"], info)
    policy.act(obs)
    remembered = policy._memory.clone()
    assert remembered.shape == (1, 2, 2 + 16)
    obs, *_ = env.step(policy.act(obs))
    policy.act(obs)
    assert torch.equal(policy._memory, remembered)  # localised once, on the first frame
    offset = policy.predict_target_offset(obs)
    np.testing.assert_allclose(offset, remembered[0, 0, :2].numpy() - obs["ee_state"][:2], atol=1e-6)
    policy.reset(obs["instruction"], info)
    assert policy._memory is None
    if words:
        assert policy._words.shape == (1, 8, 384)
        assert (policy._words[0].abs().sum(1) > 0).sum() == len(obs["instruction"].split())  # one row per word
        policy.set_text_embedding(np.ones(384, np.float32))  # soft prompt: one vector as a one-word instruction
        assert policy._words.shape == (1, 1, 384)
    assert np.isfinite(policy.act(obs)).all()
    env.close()
    if words:
        return
    # Carry-DAgger + fine-tuning: the expert grasps and lifts, the first head carries (place tasks only), and the
    # new head starts from the first one's weights and normalisation.
    first = tmp_path / "a" / "checkpoint"
    tuned = run(["--out", str(tmp_path / "b"), "--eval-episodes", "0", "--dagger", str(first), "--dagger-part",
                 "carry", "--dagger-demos", "2", "--init", str(first), "--demo-blocks", str(tmp_path / "a" /
                 "demo_blocks"), *args[:-2], "--epochs", "1"])
    assert tuned["demos"]["attempted"] == 4 and tuned["demos"]["driven"] == 2
    meta = json.loads(str(np.load(tmp_path / "b" / "demos.npz")["meta"]))
    driven = [e for e in meta["episodes"] if "driven_steps" in e]
    assert all(e["task"] == "bridge_put_on" and e["index"] >= 2_000_000 for e in driven)
    assert all(0 <= e["driven_steps"] <= e["steps"] for e in driven)
    parent, child = load_checkpoint(first), load_checkpoint(tmp_path / "b" / "checkpoint")
    assert child.config == parent.config
    np.testing.assert_array_equal(child.action_mean, parent.action_mean)  # the parent's normalisation is kept
    assert tuned["weights_sha256"] != summary["weights_sha256"]
    manifest = json.loads((tmp_path / "b" / "checkpoint" / "manifest.json").read_text())
    assert manifest["training"]["init_sha256"] == summary["weights_sha256"]  # the fine-tune names its start


def test_fine_tuning_carries_the_parent_attribute_detectors(tmp_path):
    import shutil

    from policies.vla.attributes import attach_attributes

    shutil.copytree("checkpoints/generic_vla", tmp_path / "ck")
    manifest = json.loads((tmp_path / "ck" / "manifest.json").read_text())
    entry = manifest.pop("attributes")
    (tmp_path / "ck" / "manifest.json").write_text(json.dumps(manifest))
    assert load_checkpoint(tmp_path / "ck").grounder is None
    assert attach_attributes(tmp_path / "ck", "checkpoints/generic_vla") == entry  # a checkpoint as the source
    assert load_checkpoint(tmp_path / "ck").grounder is not None


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--tasks", "fractal_pick_my"]) == 2
    assert "unknown generic task 'fractal_pick_my'" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--input-size", "100"]) == 2
    assert main(["--out", str(tmp_path), "--backbone", "resnet"]) == 2
    assert "resnet" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--width", "20"]) == 2
    assert "multiple of 8" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--demo-cache", str(tmp_path / "none.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["--out", str(tmp_path), "--dagger-demos", "5"]) == 2
    assert "--dagger and --dagger-demos" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "out"), "--dagger", str(tmp_path / "nothing"), "--dagger-demos", "5"]) == 2
    assert not (tmp_path / "out").exists()  # refused before anything was written
    assert main(["--out", str(tmp_path / "out"), "--split", "test"]) == 2  # demonstrations never use test objects
    assert "unknown --split 'test'" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--memory", "3"]) == 2
    assert "--memory must be 0, 1 or 2" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "out"), "--dagger-part", "lift"]) == 2
    assert "unknown --dagger-part 'lift'" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "out"), "--dagger", "checkpoints/generic_vla", "--dagger-demos", "2",
                 "--dagger-part", "carry", "--tasks", "fractal_pick"]) == 2
    assert "needs a place task" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "out"), "--dagger", "checkpoints/generic_vla", "--dagger-demos", "1",
                 "--dagger-part", "approach,carry"]) == 2
    assert "at least the number of --dagger-part parts (2)" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "out"), "--dagger-part", "carry,carry"]) == 2
    assert "names a part twice" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--dagger-part", "approach,lift"]) == 2
    assert "unknown --dagger-part 'lift'" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--suite", "personalized_vlabench", "--dagger",
                 "checkpoints/vlabench_vla", "--dagger-demos", "2", "--dagger-part", "carry", "--tasks",
                 "select_my_pick"]) == 2
    assert "needs a place task" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--init", "checkpoints/generic_vla", "--input-size", "64"]) == 2
    assert "was trained on cnn at 96px" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--init", "checkpoints/generic_vla", "--gripper-classifier"]) == 2
    assert "--gripper-classifier changes the head's shape" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--memory", "2", "--backbone", "mobilenet_v2_imagenet"]) == 2
    assert "--memory needs --backbone cnn" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--drop-fraction", "0.3"]) == 2
    assert "--expert-regrasps" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--expert-regrasps", "-1"]) == 2
    assert "--expert-regrasps must be in 0..100, got -1" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--words", "8"]) == 2
    assert "needs --memory > 0" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["--out", str(tmp_path / "out"), "--release-frames", "-1"]) == 2
    assert "--release-frames must be in 0..1000, got -1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
