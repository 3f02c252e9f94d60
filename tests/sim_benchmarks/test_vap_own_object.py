"""The bring-your-own-object study: bad input is one line and exit 2; photo sets and phone photos are as documented."""

from __future__ import annotations

import pytest
from PIL import Image

from sim_benchmarks.studies.vap import own_object


@pytest.mark.parametrize("args, message", [
    (["fly"], "grounding, episodes, builtin, speed, sheet"),
    (["grounding", "--photos", "mine"], "dev, heldout"),
    (["grounding", "--categories", "bowl"], "mug, box"),
    (["grounding", "--variants", "blend,magic"], "blend, layout"),
    (["grounding", "--references", "videos"], "renders, photos"),
    (["episodes", "--episodes", "0"], "--episodes must be a positive integer"),
    (["grounding", "--tasks", "fractal_fly_my"], "fractal_pick_my"),
])
def test_bad_input_is_exit_status_2(args, message, capsys, tmp_path):
    assert own_object.main([*args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_dev_and_heldout_photos_do_not_overlap():
    dev, heldout = own_object.photo_set("dev"), own_object.photo_set("heldout")
    assert dev and heldout and not {p.name for p in dev} & {p.name for p in heldout}


def test_phone_photos_are_readable_jpegs_of_the_object(tmp_path):
    paths = own_object.phone_photos(str(own_object.photo_set("heldout")[0]), "mug", tmp_path, count=2)
    assert len(paths) == 2
    for path in paths:
        with Image.open(path) as im:
            assert im.format == "JPEG" and im.size == (320, 320)
