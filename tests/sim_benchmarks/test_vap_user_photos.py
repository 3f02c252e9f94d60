"""The user-photo study: bad input is one line and exit 2; a tiny retrieval run scores look-alike scenes."""

from __future__ import annotations

import json

import pytest

from sim_benchmarks.studies.vap import user_photos


@pytest.mark.parametrize("args, message", [
    (["--categories", "spoon"], "spoon"),
    (["--user-distractors", "photos"], "lookalikes, library"),
    (["--episodes", "0", "--retrieval-episodes", "0"], "nothing to run"),
    (["--episodes", "-1"], "--episodes must be a non-negative integer"),
    (["--tasks", "fractal_fly_my"], "fractal_pick_my"),
])
def test_bad_input_is_exit_status_2(args, message, capsys, tmp_path):
    assert user_photos.main([*args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_user_objects_pair_every_photo_with_every_category():
    objects = user_photos.user_objects(["mug", "box"])
    assert len(objects) == 2 * len({o["personal_texture"] for o in objects})
    assert len({o["name"] for o in objects}) == len(objects)


@pytest.mark.slow
def test_retrieval_on_lookalike_scenes(tmp_path):
    rc = user_photos.main(["--episodes", "0", "--retrieval-episodes", "1", "--categories", "can", "--tasks",
                           "bridge_pick_my", "--seed", "5", "--out", str(tmp_path)])
    assert rc == 0
    result = json.loads((tmp_path / "user_photos.json").read_text())
    ret = result["retrieval"]
    assert ret["sets"] + ret["skipped"] == len(result["objects"])
    assert set(ret["matchers"]) == {"default", "instance", "blend"}
    assert all(r["target"].startswith("user_can_") for r in ret["rows"])
    assert all(r["candidates"] >= 2 for r in ret["rows"])
    assert "| default |" in (tmp_path / "README.md").read_text()


def test_misses_are_counted_by_the_kind_of_lookalike_chosen():
    rows = [{"target": "user_mug_ab", "default": 0, "default_chosen": "user_mug_ab-recoloured0"},
            {"target": "user_mug_ab", "default": 0, "default_chosen": "user_mug_ab-recoloured2"},
            {"target": "user_mug_ab", "default": 0, "default_chosen": "can_12"},
            {"target": "user_mug_ab", "default": 0, "default_chosen": None},
            {"target": "user_mug_ab", "default": 1, "default_chosen": "user_mug_ab"}]
    assert user_photos.miss_kinds(rows, "default") == {"recoloured": 2, "library": 1, "no single object": 1}
