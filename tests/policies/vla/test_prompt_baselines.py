"""Learned-prompt baselines: colour naming from reference images, instruction rewrite, soft-prompt regression."""

import numpy as np

from envs.manipulation.objects import instances
from envs.manipulation.personal import PersonalObject, render_references
from policies.vla.prompt_baselines import dominant_colour, fit_soft_prompt, hard_prompt_instruction


def test_dominant_colour_of_reference_renders():
    mugs = instances("mug", "test")
    right = 0
    for inst in mugs:
        refs = render_references(PersonalObject.from_library(inst.instance_id), 96, 3).images
        right += dominant_colour(refs) == inst.colour
    assert right >= len(mugs) - 1, right  # patterns (white/black ink) must not win over the base colour
    assert dominant_colour([np.full((20, 20, 3), 128, np.uint8)]) is None  # nothing but background


def test_hard_prompt_instruction():
    assert hard_prompt_instruction("pick up my mug", "mug", "blue") == "pick up the blue mug"
    assert hard_prompt_instruction("put my cup on the plate", "cup", "red") == "put the red cup on the plate"
    assert hard_prompt_instruction("pick up my mug", "mug", None) == "pick up the mug"


def test_soft_prompt_ridge_recovers_linear_map():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(20, 5))
    x = rng.normal(size=(200, 20))
    y = x @ w + 0.3
    m = fit_soft_prompt(x, y, ridge=1e-6)
    pred = m.predict(x[0])
    target = y[0] / np.linalg.norm(y[0])
    np.testing.assert_allclose(pred, target, atol=1e-4)
    assert abs(np.linalg.norm(pred) - 1.0) < 1e-5


def test_shipped_soft_prompt_maps_load_verified_and_match_the_library(tmp_path):
    import json
    import shutil

    import numpy as np
    import pytest

    from envs.errors import ConfigError
    from policies.vla.soft_prompt_checkpoint import SOFT_PROMPT_DIR, load_maps

    maps = load_maps()  # the shipped ones: sha256 and library key checked
    assert set(maps) == {"pick", "move_near", "put_on"}
    assert all(m.weight.shape == (1281, 384) for m in maps.values())
    with np.load(SOFT_PROMPT_DIR / "maps.npz") as stored:  # float16: the shipped file stays under 5 MB
        assert {stored[k].dtype for k in stored.files} == {np.dtype(np.float16)}
    assert (SOFT_PROMPT_DIR / "maps.npz").stat().st_size < 5_000_000
    copy = tmp_path / "maps"
    shutil.copytree(SOFT_PROMPT_DIR, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "library_key": "another"}))
    with pytest.raises(ConfigError, match="another object library; refit: python -m launch.train_soft_prompt"):
        load_maps(copy)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    np.savez(copy / "maps.npz", pick=np.zeros((1281, 384), np.float32))
    with pytest.raises(ConfigError, match="do not match the sha256"):
        load_maps(copy)
    with pytest.raises(ConfigError, match="manifest.json missing"):
        load_maps(tmp_path / "none")
