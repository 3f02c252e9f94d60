"""The generic VLA's base localiser: read-out, labels, training, files, and its use by the object memory."""

import json
import shutil

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from envs.manipulation.env import make_env
from launch.train_localiser import main as train_main
from policies.vla.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from policies.vla.checkpoint_files import parameter_digest
from policies.vla.generic import GenericVLA
from policies.vla.localiser import (
    LocaliserConfig,
    LocaliserNet,
    LocaliserTrainConfig,
    attach_localiser,
    base_targets,
    input_maps,
    peak_soft_argmax,
    train_localiser,
)


def test_peak_soft_argmax_picks_one_peak_instead_of_averaging_two():
    logits = torch.full((1, 8, 8), -20.0)
    logits[0, 1, 1] = 0.0  # the stronger peak, cell (row 1, col 1)
    logits[0, 6, 6] = -0.5
    centre = (2 * 1 + 1) / 8 - 1
    assert torch.allclose(peak_soft_argmax(logits, 1)[0], torch.tensor([centre, centre]), atol=1e-4)
    whole = peak_soft_argmax(logits, 0)[0]  # the plain soft-argmax lands between the two
    assert -0.3 < float(whole[0]) < 0.3


def test_base_targets_peak_at_the_label_and_sum_to_one():
    uv = torch.tensor([[(2 * 5 + 1) / 16 - 1, (2 * 9 + 1) / 16 - 1]])  # the centre of cell (row 9, col 5)
    t = base_targets(uv, 16, 1.0)
    assert t.shape == (1, 16, 16) and torch.allclose(t.sum(), torch.tensor(1.0))
    assert divmod(int(t[0].argmax()), 16) == (9, 5)


def test_net_starts_from_the_heads_heatmap_and_training_is_seeded():
    cfg = LocaliserConfig(input_size=32, grid=16, width=8, dilations=(1,))
    heat = torch.randn(2, 1, 12, 12)
    maps = input_maps(None, heat, 16)
    assert maps.shape == (2, 2, 16, 16) and torch.equal(maps[:, 0], torch.zeros(2, 16, 16))
    net = LocaliserNet(cfg)
    torch.nn.init.zeros_(net.out.weight)
    torch.nn.init.zeros_(net.out.bias)
    out = net(torch.zeros(2, 3, 32, 32, dtype=torch.uint8), maps)
    assert torch.allclose(out, maps[:, 1])  # a residual on the head's own log-probabilities
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (6, 32, 32, 3), dtype=np.uint8)
    arrays = input_maps(torch.randn(6, 8, 8), torch.randn(6, 1, 12, 12), 16).numpy()
    uv = rng.uniform(-0.8, 0.8, (6, 2)).astype(np.float32)
    tcfg = LocaliserTrainConfig(epochs=2, batch_size=3, seed=4)
    a, b = (train_localiser(images, arrays, uv, cfg, tcfg) for _ in range(2))
    assert parameter_digest(a) == parameter_digest(b)
    with pytest.raises(ConfigError, match="expects 64"):
        train_localiser(images, arrays, uv, LocaliserConfig(input_size=64, grid=16, width=8), tcfg)
    with pytest.raises(ConfigError, match="unknown keys"):
        LocaliserConfig.from_dict({"depth": 3})


@pytest.mark.slow
def test_cli_trains_attaches_and_the_memory_uses_and_verifies_the_localiser(tmp_path, capsys):
    if not (DEFAULT_CHECKPOINT / "head.pt").is_file():
        pytest.skip("no shipped generic VLA checkpoint")
    ckpt = tmp_path / "ckpt"
    shutil.copytree(DEFAULT_CHECKPOINT, ckpt)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest.pop("localiser", None)  # start from a head without a localiser
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    args = ["--checkpoint", str(ckpt), "--scenes", "2", "--eval-scenes", "1", "--epochs", "1", "--width", "8",
            "--seed", "2"]
    assert train_main(["--out", str(tmp_path / "a"), *args, "--attach"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["attached_to"] == str(ckpt) and 0.0 <= out["test_within_4px"] <= 1.0
    record = json.loads((tmp_path / "a" / "metrics.jsonl").read_text().splitlines()[0])
    assert set(record["test"]) == {"median_px", "p90_px", "within_4px"}
    bundle = load_checkpoint(ckpt)
    assert bundle.localiser is not None
    assert not any(p.requires_grad for p in bundle.localiser.net.parameters())
    # the same scenes (reused blocks), checkpoint, seed and threads give the same localiser
    assert train_main(["--out", str(tmp_path / "b"), *args]) == 0
    capsys.readouterr()
    shas = [json.loads((tmp_path / d / "localiser.json").read_text())["sha256"] for d in ("a", "b")]
    assert shas[0] == shas[1]
    env = make_env("fractal_pick", {"split": "test", "max_steps": 2})
    obs, info = env.reset(seed=1)
    env.close()
    memories = []
    for localiser in (True, False):
        policy = GenericVLA(bundle, localiser=localiser)
        policy.reset(obs["instruction"], info)
        policy.act(obs)
        memories.append(policy._memory.clone())
    assert not torch.equal(memories[0][0, 0, :2], memories[1][0, 0, :2])  # the object's position was refined
    assert torch.equal(memories[0][0, 1], memories[1][0, 1])  # the goal is not the localiser's business
    assert GenericVLA(bundle, attributes=False).localiser is None  # it was trained on the detectors' vote
    with open(ckpt / "localiser.pt", "r+b") as fh:  # a corrupt file is refused at load time
        fh.seek(100)
        fh.write(b"\x00\x01\x02")
    with pytest.raises(ConfigError, match="sha256"):
        load_checkpoint(ckpt)
    with pytest.raises(ConfigError, match="no trained base localiser"):
        attach_localiser(ckpt, tmp_path)


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert train_main(["--out", str(tmp_path / "o"), "--scenes", "0"]) == 2
    assert "--scenes must be >= 1" in capsys.readouterr().err
    assert train_main(["--out", str(tmp_path / "o"), "--split", "test"]) == 2  # never trained on test designs
    assert "not a training split" in capsys.readouterr().err
    assert train_main(["--out", str(tmp_path / "o"), "--checkpoint", str(tmp_path / "nothing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # refused before anything was written
