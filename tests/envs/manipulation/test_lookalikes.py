"""Look-alikes for a user's photo object: seeded, different from the user's print, on the same body."""

import numpy as np
import pytest
from PIL import Image

from envs.errors import ConfigError
from envs.manipulation.env import make_env
from envs.manipulation.lookalikes import (
    LOOKALIKE_KINDS,
    MIN_DISTANCE,
    recolour,
    stock_photo_paths,
    texture_distance,
    user_lookalikes,
)
from envs.manipulation.objects import LIBRARY, TEXTURE_SIZE
from envs.manipulation.personal import PersonalObject


def _photo(tmp_path, seed=0):
    """A small synthetic 'photo': smooth colour gradients plus a few blobs (no two halves alike)."""
    rng = np.random.default_rng(seed)
    h, w = 96, 160
    yy, xx = np.mgrid[0:h, 0:w] / np.array([h, w])[:, None, None]
    img = np.stack([180 * xx + 40, 150 * yy + 60, 200 * (1 - xx * yy)], -1)
    for _ in range(6):
        cy, cx, r = rng.integers(0, h), rng.integers(0, w), rng.integers(6, 18)
        img[(np.mgrid[0:h, 0:w][0] - cy) ** 2 + (np.mgrid[0:h, 0:w][1] - cx) ** 2 < r * r] = rng.integers(0, 255, 3)
    path = tmp_path / f"photo{seed}.png"
    Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(path)
    return path


@pytest.fixture
def user(tmp_path):
    return PersonalObject.from_texture(_photo(tmp_path), "mug")


def test_lookalikes_are_deterministic_per_seed(user):
    a = user_lookalikes(user.instance, user.texture, 4, np.random.default_rng(3))
    b = user_lookalikes(user.instance, user.texture, 4, np.random.default_rng(3))
    c = user_lookalikes(user.instance, user.texture, 4, np.random.default_rng(4))
    assert [i for i, _ in a] == [i for i, _ in b]
    assert all(np.array_equal(ta, tb) for (_, ta), (_, tb) in zip(a, b, strict=True))
    assert any(not np.array_equal(ta, tc) for (_, ta), (_, tc) in zip(a, c, strict=True))


def test_lookalikes_differ_from_the_user_print_and_each_other(user):
    for seed in range(5):
        made = user_lookalikes(user.instance, user.texture, 4, np.random.default_rng(seed))
        assert len(made) == 4
        assert {i.instance_id.rsplit("-", 1)[1].rstrip("0123456789") for i, _ in made} == set(LOOKALIKE_KINDS)
        textures = [user.texture] + [t for _, t in made]
        for i in range(len(textures)):
            for j in range(i + 1, len(textures)):
                assert texture_distance(textures[i], textures[j]) >= MIN_DISTANCE


def test_lookalikes_share_the_user_body(user):
    for inst, tex in user_lookalikes(user.instance, user.texture, 3, np.random.default_rng(0)):
        assert inst.category == user.instance.category
        assert (inst.radius, inst.height, inst.shape) == (user.instance.radius, user.instance.height,
                                                          user.instance.shape)
        assert inst.instance_id != user.instance.instance_id and inst.instance_id not in LIBRARY
        assert tex.shape == (*TEXTURE_SIZE, 3) and tex.dtype == np.uint8


def test_texture_distance_ignores_how_the_body_is_turned(user):
    turned = np.roll(user.texture, TEXTURE_SIZE[1] // 4, axis=1)  # the same print a quarter turn round
    assert texture_distance(user.texture, turned) == 0.0
    assert texture_distance(user.texture, user.texture[::-1]) > MIN_DISTANCE


def test_a_grey_photo_is_still_recoloured_visibly():
    grey = np.full((*TEXTURE_SIZE, 3), 128, np.uint8)
    grey[:, ::16] = 40
    assert texture_distance(grey, recolour(grey, np.random.default_rng(0))) >= MIN_DISTANCE


def test_a_blank_print_gets_only_lookalikes_that_differ():
    blank = np.full((*TEXTURE_SIZE, 3), 200, np.uint8)
    from envs.manipulation.objects import ObjectInstance

    inst = ObjectInstance("user_mug_blank", "mug", "custom", "custom", "user", 0.03, 0.08, {"handle": 0.5})
    made = user_lookalikes(inst, blank, 4, np.random.default_rng(0))
    kinds = {i.instance_id.rsplit("-", 1)[1].rstrip("0123456789") for i, _ in made}
    assert "mirrored" not in kinds and "recropped" not in kinds  # a blank print mirrored or cropped is itself
    assert all(texture_distance(blank, t) >= MIN_DISTANCE for _, t in made)


def test_stock_photos_ship_with_matplotlib():
    names = [p.name for p in stock_photo_paths()]
    assert "grace_hopper.jpg" in names


def test_env_places_user_lookalikes_beside_a_user_object(tmp_path):
    path = _photo(tmp_path)
    opts = {"image_size": 64, "personal_texture": str(path), "personal_category": "can", "num_distractors": 3,
            "reference_count": 3}
    env = make_env("fractal_pick_my", opts)
    _, info = env.reset(seed=1)
    user_id = info["personal_object"]
    assert len(info["distractors"]) == 3 and all(d.startswith(user_id + "-") for d in info["distractors"])
    state = env.privileged_state()
    bodies = [o for o in state["objects"] if o["role"] in ("target", "distractor")]
    assert len({(o["radius"], o["height"]) for o in bodies}) == 1  # every look-alike on the user's body
    _, again = env.reset(seed=1)
    assert again["distractors"] == info["distractors"]
    env.close()
    env = make_env("fractal_pick_my", {**opts, "user_distractors": "library"})
    _, info = env.reset(seed=1)
    assert all(d in LIBRARY for d in info["distractors"])
    env.close()


def test_bad_user_distractors_names_the_valid_ones():
    with pytest.raises(ConfigError, match="user_distractors.*lookalikes.*library"):
        make_env("fractal_pick_my", {"user_distractors": "photos"})


def test_library_lookalikes_hold_a_hard_negative_and_follow_the_seed():
    from envs.manipulation.lookalikes import library_lookalikes
    from envs.manipulation.objects import instances

    pool = instances("mug", "test")
    target, others = pool[0], pool[1:]
    for seed in range(5):
        got = library_lookalikes(target, others, 3, np.random.default_rng(seed))
        assert len(got) == 3 and len(set(got)) == 3 and target not in got
        assert any(i.colour == target.colour or i.pattern == target.pattern for i in got)
        assert got == library_lookalikes(target, others, 3, np.random.default_rng(seed))
    assert library_lookalikes(target, others[:1], 4, np.random.default_rng(0)) == others[:1]
