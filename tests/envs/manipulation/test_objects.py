"""The object library: split, hard negatives, textures and meshes."""

import numpy as np
import pytest
import trimesh

from envs.errors import ConfigError
from envs.manipulation.objects import (
    CATEGORIES,
    COLOURS,
    EXTRA_TRAIN,
    LIBRARY,
    PATTERNS,
    category_mesh,
    find_instance,
    instance_mesh_path,
    instances,
    load_user_texture,
    make_texture,
)


def test_library_size_and_split_are_fixed():
    assert len(CATEGORIES) >= 6
    for cat in CATEGORIES:
        train, test = instances(cat, "train"), instances(cat, "test")
        assert len(train) + len(test) >= 12 and len(train) == 10 and len(test) == 8
        assert {i.instance_id for i in train}.isdisjoint({i.instance_id for i in test})
        # no (colour, pattern) design of the test split appears in training
        assert {(i.colour, i.pattern) for i in train}.isdisjoint({(i.colour, i.pattern) for i in test})
        # training covers the whole vocabulary, so VAP may recolour to any colour
        assert {i.colour for i in train} == set(COLOURS) and {i.pattern for i in train} == set(PATTERNS)
    assert LIBRARY["mug_10"].split == "test" and LIBRARY["mug_00"].split == "train"


def test_extra_training_designs_never_repeat_a_test_design():
    test_designs = {(i.colour, i.pattern) for i in LIBRARY.values() if i.split == "test"}
    train_designs = {(i.colour, i.pattern) for i in LIBRARY.values() if i.split == "train"}
    assert set(EXTRA_TRAIN).isdisjoint(LIBRARY)
    for cat in CATEGORIES:
        extended = instances(cat, "train_extended")
        extra = [i for i in extended if i.split == "train_extra"]
        assert [i.instance_id for i in extended[:10]] == [i.instance_id for i in instances(cat, "train")]
        designs = {(i.colour, i.pattern) for i in extra}
        # every colour x pattern combination is either train, test or extra, and only test ones are held out
        assert designs.isdisjoint(test_designs) and designs.isdisjoint(train_designs)
        assert len(designs) == len(extra) == len(COLOURS) * len(PATTERNS) - len(test_designs) - len(train_designs)
    inst = find_instance("mug_x03")
    assert inst.split == "train_extra" and inst.category == "mug" and find_instance("mug_00") is LIBRARY["mug_00"]
    assert instance_mesh_path(inst).endswith(".obj") and make_texture(inst).shape[2] == 3
    with pytest.raises(ConfigError, match="unknown object instance"):
        find_instance("mug_99")
    with pytest.raises(ConfigError, match="unknown split"):
        instances("mug", "val")


def test_test_split_has_hard_negative_pairs():
    for cat in CATEGORIES:
        test = instances(cat, "test")
        for inst in test:
            same_colour = [o for o in test if o is not inst and o.colour == inst.colour and o.pattern != inst.pattern]
            same_pattern = [o for o in test if o is not inst and o.pattern == inst.pattern and o.colour != inst.colour]
            assert same_colour, inst.instance_id
            assert same_pattern or inst.pattern in ("lettered", "banded"), inst.instance_id


def test_unknown_category_is_a_config_error():
    with pytest.raises(ConfigError, match="spoon.*mug"):
        instances("spoon")


def test_textures_differ_between_hard_negatives():
    a, b = LIBRARY["mug_10"], next(i for i in instances("mug", "test") if i.colour == LIBRARY["mug_10"].colour
                                   and i is not LIBRARY["mug_10"])
    ta, tb = make_texture(a), make_texture(b)
    assert ta.shape == tb.shape == (128, 256, 3) and ta.dtype == np.uint8
    assert np.abs(ta.astype(int) - tb.astype(int)).mean() > 20  # patterns visibly differ
    base = np.array(COLOURS[a.colour])
    assert (np.abs(ta.reshape(-1, 3) - base).sum(1) < 3).mean() > 0.3  # the named colour dominates


def test_meshes_have_uvs_and_sizes_match_instance(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBODIA_MESH_CACHE", str(tmp_path))
    for cat in CATEGORIES:
        inst = instances(cat, "test")[0]
        mesh = category_mesh(cat, inst.radius, inst.height, inst.shape)
        assert mesh.visual.uv.shape == (len(mesh.vertices), 2)
        assert np.all((mesh.visual.uv >= 0) & (mesh.visual.uv <= 1))
        lo, hi = mesh.bounds
        assert abs(lo[2]) < 1e-6 and abs(hi[2] - inst.height) < 0.01
        path = instance_mesh_path(inst)
        loaded = trimesh.load(path, force="mesh", process=False)
        assert len(loaded.faces) == len(mesh.faces)


def test_user_texture(tmp_path):
    from PIL import Image

    img = np.zeros((40, 60, 3), np.uint8)
    img[:, :30] = (255, 0, 0)
    Image.fromarray(img).save(tmp_path / "logo.png")
    tex = load_user_texture(tmp_path / "logo.png")
    assert tex.shape == (128, 256, 3) and tex[0, 0, 0] == 255 and tex[0, -1, 0] == 0
    (tmp_path / "bad.png").write_text("not an image")
    with pytest.raises(ConfigError, match="cannot read personal_texture"):
        load_user_texture(tmp_path / "bad.png")
    with pytest.raises(ConfigError):
        load_user_texture(tmp_path / "missing.png")
