"""Attribute detectors of the generic VLA: labels, training, files, and the vote on the memory heatmap."""

import json
import shutil

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from envs.manipulation.env import make_env
from launch.train_attributes import main as train_main
from policies.vla.attributes import (
    VOCAB,
    AttributeConfig,
    AttributeGrounder,
    AttributeNet,
    AttributeTrainConfig,
    attach_attributes,
    instruction_words,
    label_maps,
    train_attributes,
)
from policies.vla.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from policies.vla.checkpoint_files import parameter_digest
from policies.vla.generic import GenericVLA
from policies.vla.vision_input import image_features


def test_instruction_words_and_label_maps():
    assert [VOCAB[i] for i in instruction_words("put the blue striped mug on the plate", VOCAB)] == [
        "blue", "striped", "mug"]
    assert instruction_words("pick up the apple", VOCAB) == []
    seg = np.zeros((16, 16), np.int32)
    seg[0:8, 0:8] = 5  # a blue dotted cup, top-left quarter
    seg[8:16, 8:16] = 7  # a red dotted mug, bottom-right quarter
    lab = label_maps(seg, [(5, ("blue", "dotted", "cup")), (7, ("red", "dotted", "mug"))], VOCAB, grid=4)
    assert lab.shape == (len(VOCAB), 4, 4) and lab.dtype == np.uint8
    assert lab[VOCAB.index("dotted")].sum() == 8  # both objects
    assert lab[VOCAB.index("blue")][:2, :2].all() and lab[VOCAB.index("blue")].sum() == 4
    assert lab[VOCAB.index("mug")][2:, 2:].all() and lab[VOCAB.index("striped")].sum() == 0


def test_training_is_seeded_and_grounding_composes_words():
    cfg = AttributeConfig(input_size=32, width=8, dilations=(1,))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (6, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 2, (6, len(VOCAB), 8, 8)).astype(np.uint8)
    tcfg = AttributeTrainConfig(epochs=2, batch_size=3, seed=4)
    a, b = (train_attributes(images, labels, cfg, tcfg) for _ in range(2))
    assert parameter_digest(a) == parameter_digest(b)
    grounder = AttributeGrounder(a, cfg)
    both = grounder.log_prob_map(images[0], "pick up the red striped mug")
    one = grounder.log_prob_map(images[0], "pick up the red thing")
    assert both.shape == (8, 8) and (both <= 0).all()
    assert (both <= one + 1e-6).all()  # each word adds a log-probability: more words, never more likely
    assert grounder.log_prob_map(images[0], "pick up the apple") is None
    with pytest.raises(ConfigError, match="expects 64"):
        train_attributes(images, labels, AttributeConfig(input_size=64, width=8), tcfg)


def test_prior_moves_the_remembered_object_toward_the_vote():
    if not (DEFAULT_CHECKPOINT / "head.pt").is_file():
        pytest.skip("no shipped generic VLA checkpoint")
    head = load_checkpoint(DEFAULT_CHECKPOINT).head
    env = make_env("fractal_pick", {"split": "test"})
    obs, _ = env.reset(seed=3)
    env.close()
    trunk = head.trunk(image_features(obs["image"], head.cfg.vision), torch.zeros(1, 384))
    vote = torch.full((1, 32, 32), -30.0)
    vote[0, 4, 28] = 0.0  # everything but one cell near the top-right corner is ruled out
    plain, voted = head.localise(*trunk), head.localise(*trunk, prior=vote)
    u, v = voted["uv"][0, 0].tolist()
    assert u > 0.6 and v < -0.5  # the object's image position follows the vote
    assert torch.allclose(plain["uv"][0, 1], voted["uv"][0, 1])  # the goal's heatmap is left alone
    # with a window the vote only picks the place: the head's own logits are kept around the voted peak
    windowed = head.localise(*trunk, prior=vote, prior_window=3)
    side = windowed["logits"].shape[-1]
    peak = int(windowed["logits"][0, 0].flatten().argmax())
    r, c = divmod(peak, side)
    assert abs(r - round(4.5 / 32 * side - 0.5)) <= 3 and abs(c - round(28.5 / 32 * side - 0.5)) <= 3
    inside = windowed["logits"][0, 0] > -1e3
    assert 0 < int(inside.sum()) <= 49
    assert torch.equal(windowed["logits"][0, 0][inside], plain["logits"][0, 0][inside])


@pytest.mark.slow
def test_cli_trains_attaches_and_the_policy_uses_and_verifies_the_detectors(tmp_path, capsys):
    if not (DEFAULT_CHECKPOINT / "head.pt").is_file():
        pytest.skip("no shipped generic VLA checkpoint")
    ckpt = tmp_path / "ckpt"
    shutil.copytree(DEFAULT_CHECKPOINT, ckpt)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest.pop("attributes", None)  # start from a head without detectors
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    args = ["--out", str(tmp_path / "a"), "--scenes", "2", "--eval-scenes", "1", "--epochs", "1", "--width", "8",
            "--input-size", "64", "--seed", "2", "--weight", "3"]
    assert train_main([*args, "--attach", str(ckpt)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["attached_to"] == str(ckpt) and 0.0 <= out["test_grounding"] <= 1.0
    records = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["test_scenes"] == 4  # one held-out test-split scene per generic task
    bundle = load_checkpoint(ckpt)
    assert bundle.grounder is not None and bundle.grounder.cfg.weight == 3.0
    assert not any(p.requires_grad for p in bundle.grounder.net.parameters())
    # the same scenes (reused blocks), seed and threads give the same detectors
    assert train_main(["--out", str(tmp_path / "b"), *args[2:]]) == 0
    capsys.readouterr()
    shas = [json.loads((tmp_path / d / "attributes.json").read_text())["sha256"] for d in ("a", "b")]
    assert shas[0] == shas[1]
    env = make_env("fractal_pick", {"split": "test", "max_steps": 2})
    obs, info = env.reset(seed=1)
    env.close()
    memories = []
    for attributes in (True, False):
        policy = GenericVLA(bundle, attributes=attributes)
        policy.reset(obs["instruction"], info)
        policy.act(obs)
        memories.append(policy._memory.clone())
    assert not torch.equal(*memories)  # the detectors voted on which object to remember
    assert parameter_digest(bundle.grounder.net) == parameter_digest(load_checkpoint(ckpt).grounder.net)
    # a corrupt detector file is refused at load time, and the checkpoint's head was not touched
    with open(ckpt / "attributes.pt", "r+b") as fh:
        fh.seek(100)
        fh.write(b"\x00\x01\x02")
    with pytest.raises(ConfigError, match="sha256"):
        load_checkpoint(ckpt)
    with pytest.raises(ConfigError, match="no trained attribute detectors"):
        attach_attributes(ckpt, tmp_path)


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert train_main(["--out", str(tmp_path / "o"), "--scenes", "0"]) == 2
    assert "--scenes must be >= 1" in capsys.readouterr().err
    assert train_main(["--out", str(tmp_path / "o"), "--split", "test"]) == 2  # never trained on test designs
    assert "not a training split" in capsys.readouterr().err
    assert train_main(["--out", str(tmp_path / "o"), "--attach", str(tmp_path / "nothing")]) == 2
    capsys.readouterr()
    assert not (tmp_path / "o").exists()  # refused before anything was written
    with pytest.raises(ConfigError, match="unknown keys"):
        AttributeConfig.from_dict({"colour_bins": 3})
    assert isinstance(AttributeNet(AttributeConfig(width=8))(torch.zeros(1, 3, 64, 64, dtype=torch.uint8)),
                      torch.Tensor)
