"""The trained instance embedder: deterministic training, verified checkpoints, and the VAP option that uses it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from envs.errors import ConfigError
from envs.manipulation.objects import instances
from envs.manipulation.personal import PersonalObject, render_references
from perception.candidate import OBJECT_CROP, object_crop
from perception.instance_embedder import (
    HeadConfig,
    Sample,
    TrainConfig,
    build_head,
    featurise,
    load_head,
    save_head,
    supcon_loss,
    train_head,
)
from perception.matching import reference_mask


@pytest.fixture(scope="module")
def renders():
    """Reference renders of three train-split mugs (3 views each), featurised with one random view per crop."""
    samples = []
    for inst in instances("mug", "train")[:3]:
        for img in render_references(PersonalObject.from_library(inst.instance_id), size=64, count=3).images:
            crop = object_crop(img, reference_mask(img), OBJECT_CROP)[0]
            samples.append(Sample(crop, inst.instance_id, inst.category, inst.colour, inst.pattern))
    feats, origin = featurise(samples, augmentations=1, seed=0)
    return samples, feats, origin


def _train(renders, seed: int):
    samples, feats, origin = renders
    cfg = TrainConfig(steps=30, seed=seed, instances_per_batch=3, views_per_instance=2)
    return train_head(feats, origin, samples, HeadConfig(hidden=32, dim=8), cfg)


def test_training_is_deterministic_by_seed(renders):
    (a, loss_a), (b, loss_b), (c, _) = _train(renders, 0), _train(renders, 0), _train(renders, 1)
    assert loss_a == loss_b
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(va, vb), k
    assert not torch.equal(a[0].weight, c[0].weight)
    assert np.mean(loss_a[-5:]) < np.mean(loss_a[:5])  # it learns something on its own training views


def test_training_features_are_the_features_the_matcher_sees(renders):
    """The head is trained on exactly the pooled features the run-time embedder computes for a crop (same input
    resolution): a mismatch here silently shifts the head's input distribution."""
    from perception.embedders import MobileNetEmbedder

    samples, feats, origin = renders
    rows = [origin.index(i) for i in range(3)]  # each sample's own (un-augmented) row
    run_time = MobileNetEmbedder().pooled(np.stack([samples[i].crop for i in range(3)]))
    assert np.allclose(feats[rows], run_time, atol=1e-4)


def test_supcon_hard_negatives_raise_the_loss():
    z = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.5, 0.5], [0.4, 0.6]]), dim=1)
    labels = torch.tensor([0, 0, 1, 1])
    none = torch.zeros(4, 4, dtype=torch.bool)
    plain = supcon_loss(z, labels, none, 0.1, 2.0)
    assert supcon_loss(z, labels, ~none, 0.1, 2.0) > plain
    assert torch.isclose(supcon_loss(z, labels, ~none, 0.1, 1.0), plain)


def test_corrupt_or_mismatched_checkpoint_is_a_config_error(tmp_path):
    head = build_head(HeadConfig(hidden=16, dim=4))
    save_head(head, tmp_path, HeadConfig(hidden=16, dim=4), {"seed": 0})
    cfg, loaded = load_head(tmp_path)
    assert cfg == HeadConfig(hidden=16, dim=4) and not any(p.requires_grad for p in loaded.parameters())
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "config": {"hidden": 16, "dim": 5}}))
    with pytest.raises(ConfigError, match="do not match their config"):
        load_head(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    data = bytearray((tmp_path / "head.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "head.pt").write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="sha256 check"):
        load_head(tmp_path)
    with pytest.raises(ConfigError, match="has no manifest.json"):
        load_head(tmp_path / "absent")


def test_corrupt_embedder_exits_2_with_one_line(tmp_path, capsys):
    from sim_benchmarks.cli import main_guard

    save_head(build_head(HeadConfig(hidden=8, dim=4)), tmp_path, HeadConfig(hidden=8, dim=4), {})
    (tmp_path / "head.pt").write_bytes(b"not a checkpoint")

    @main_guard
    def cli() -> int:
        from perception.embedders import InstanceEmbedder

        InstanceEmbedder(tmp_path)
        return 0

    assert cli() == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sha256" in err


def test_option_switches_the_embedding_cue():
    from perception.embedders import InstanceEmbedder, MobileNetEmbedder
    from sim_benchmarks import registry
    from sim_benchmarks.registry import PolicyContext

    registry.load_all()
    env = registry.suites()["personalized_simpler"].make_env("fractal_pick_my", {"image_size": 128, "max_steps": 4})
    try:
        def build(opts):
            return registry.policies()["vap"].factory(PolicyContext(
                "personalized_simpler", "fractal_pick_my", "vap", 0, env, {"vap_base": "scripted_expert", **opts}))

        default, trained = build({}), build({"vap_matcher_embedder": "instance"})
        assert isinstance(default.matcher.embedder, InstanceEmbedder) and default.matcher.embedder.blend
        assert type(build({"vap_matcher_embedder": "mobilenet_v2"}).matcher.embedder) is MobileNetEmbedder
        # an explicit crop size (or a local embedder folder) means MobileNetV2 at that size, not the blend
        resized = build({"vap_embed_size": 64}).matcher.embedder
        assert type(resized) is MobileNetEmbedder and resized.input_size == 64
        # naming the MobileNetV2 cue keeps an explicit local embedder folder (DINOv2/CLIP) as that cue
        from policies.vap.configuration import VAPOptions

        for extra in ({}, {"vap_matcher_embedder": "mobilenet_v2"}):
            assert VAPOptions.from_options({"vap_embedder": "/models/dino", **extra}).embedder() == "/models/dino"
        assert VAPOptions.from_options({"vap_matcher_embedder": "mobilenet_v2"}).embedder() is None
        assert isinstance(trained.matcher.embedder, InstanceEmbedder) and not trained.matcher.embedder.blend
        assert trained.detector.scorer.embedder is trained.matcher.embedder  # one network pass shared
        crops = np.full((2, OBJECT_CROP, OBJECT_CROP, 3), 124, np.uint8)
        crops[1, 20:70, 30:60] = (200, 30, 30)
        emb = trained.matcher.embedder.embed(crops)
        assert emb.shape == (2, trained.matcher.embedder.head_config.dim)
        assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
        # the run-time head (numpy) is the trained torch module
        with torch.no_grad():
            ref = trained.matcher.embedder.head(torch.from_numpy(trained.matcher.embedder.pooled(crops))).numpy()
        assert np.allclose(emb, ref / np.linalg.norm(ref, axis=1, keepdims=True), atol=1e-5)
        with pytest.raises(ConfigError, match="cannot be combined"):
            build({"vap_matcher_embedder": "instance", "vap_embed_size": 64})
        # blend: one row holds both unit embeddings, so a cosine is the mean of the head's and ImageNet's cosines
        blended = build({"vap_matcher_embedder": "blend"}).matcher.embedder
        both = blended.embed(crops)
        assert np.array_equal(both, default.matcher.embedder.embed(crops))
        imagenet = MobileNetEmbedder().embed(crops)
        assert np.allclose(np.linalg.norm(both, axis=1), 1.0, atol=1e-5)
        assert both[0] @ both[1] == pytest.approx((emb[0] @ emb[1] + imagenet[0] @ imagenet[1]) / 2, abs=1e-5)
    finally:
        env.close()


def test_retrieval_with_a_missing_checkpoint_exits_2_and_writes_nothing(tmp_path, capsys):
    from sim_benchmarks.studies.vap import instance_retrieval

    out = tmp_path / "out"
    rc = instance_retrieval.main(["--matchers", "default,instance", "--instance-checkpoint", str(tmp_path / "absent"),
                                  "--out", str(out)])
    assert rc == 2 and not out.exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "manifest.json" in err
