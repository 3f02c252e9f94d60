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
    (["episodes", "--variant", "second_pass"], "valid: blend, layout"),
    (["episodes", "--policies", "vap,generic"], "vap, oracle_mask"),  # a past matcher: grounding and speed only
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


def test_episode_records_are_split_by_the_lookalike_kinds_in_their_scene():
    from sim_benchmarks import registry

    registry.load_all()
    photo = own_object.photo_set("dev")[0]
    kinds = own_object.kinds_present(photo, "box", "fractal_pick_my", [3, 4, 5])
    assert kinds == own_object.kinds_present(photo, "box", "fractal_pick_my", [3, 4, 5])  # seeded
    assert all(ks and set(ks) <= set(own_object.KINDS) for ks in kinds.values()), kinds
    records = {pol: [{"photo": photo.stem, "category": "box", "task": "fractal_pick_my", "seed": s, "episode": i,
                      "success": ok, "correct_object": ok, "grounding_correct": ok}
                     for i, (s, ok) in enumerate([(3, True), (4, False), (5, True)])]
               for pol in ("vap", "oracle_mask")}
    own_object.add_kinds(records)
    assert [r["kinds"] for r in records["vap"]] == [kinds[3], kinds[4], kinds[5]]
    res = own_object.summarise_episodes(records, ["box"])
    for k in own_object.KINDS:
        with_k = [s for s, ok in [(3, 1), (4, 0), (5, 1)] if k in kinds[s]]
        got = res["vap"]["per_kind_present"][k]
        assert got["n"] == len(with_k) and got["k"] == sum(s != 4 for s in with_k)
    assert res["vap - oracle_mask correct_object"]["diff"] == 0


def test_the_second_pass_variant_puts_the_past_fields_back():
    from sim_benchmarks import registry
    from sim_benchmarks.studies.vap.vap_benchmark import SUITE

    registry.load_all()
    env = registry.suites()[SUITE].make_env("fractal_pick_my", {})
    try:
        now, past = (own_object.make_variant(env, "fractal_pick_my", v) for v in ("layout", "second_pass"))
    finally:
        env.close()
    assert now.config.user_prior_floor == 1.0 and past.config.user_prior_floor == 0.0
    assert now.matcher.config.layout_keypoint_refs == 4 and past.matcher.config.layout_keypoint_refs == 5
    assert past.matcher.config.keypoint_skip_gap == float("inf") > now.matcher.config.keypoint_skip_gap
    assert past.matcher.config.components == now.matcher.config.components  # otherwise the same matcher
