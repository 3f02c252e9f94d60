"""Candidate heights from depth and the table plane, and the category height check built on them."""

import math

import numpy as np
import pytest

from perception.candidate import Candidate, box_of_mask
from perception.object_height import HeightCheck, HeightCheckConfig, category_heights
from perception.proposals import ProposalConfig, fit_inverse_depth_plane

FOVY = 45.0
N = 96


def _oblique_scene(blocks: list[tuple[slice, slice, float]]) -> np.ndarray:
    """Depth (metres) of a camera 0.6 m from a tilted table plane, with flat-topped blocks of given heights."""
    f = (N / 2) / math.tan(math.radians(FOVY) / 2)
    rows, cols = np.indices((N, N))
    rays = np.stack([(cols + 0.5 - N / 2) / f, (rows + 0.5 - N / 2) / f, np.ones((N, N))], axis=-1)
    normal = np.array([0.0, -0.6, 0.8])  # the camera looks down at the table at an angle
    dist = 0.6
    g = normal / dist  # table: g·P = 1
    depth = 1.0 / (rays @ g)
    for rs, cs, h in blocks:  # a block's top: a plane parallel to the table, h nearer the camera
        depth[rs, cs] = (1.0 - h / dist) / (rays[rs, cs] @ g)
    return depth.astype(np.float32)


def _mask(rs: slice, cs: slice) -> np.ndarray:
    m = np.zeros((N, N), bool)
    m[rs, cs] = True
    return m


def test_heights_come_from_the_library_and_do_not_overlap_for_bottles_and_boxes():
    spans = category_heights()
    assert spans["bottle"][0] > spans["box"][1]  # a bottle is never a box by height
    assert spans["bowl"][1] < spans["mug"][0]
    assert "book" in spans


def test_measured_height_of_a_block_on_an_oblique_table_is_metric():
    blocks = [(slice(40, 52), slice(20, 32), 0.15), (slice(50, 60), slice(60, 72), 0.055)]
    depth = _oblique_scene(blocks)
    hc = HeightCheck(FOVY)
    tall, low = hc.measure(depth, [_mask(*b[:2]) for b in blocks])
    assert tall == pytest.approx(0.15, abs=0.004) and low == pytest.approx(0.055, abs=0.004)
    plane = fit_inverse_depth_plane(depth.astype(np.float64), ProposalConfig())
    assert hc.measure(depth, [_mask(*blocks[0][:2])], plane=plane)[0] == pytest.approx(tall, abs=1e-9)
    # another field of view reads other heights: the intrinsics matter
    assert abs(HeightCheck(70.0).measure(depth, [_mask(*blocks[0][:2])])[0] - 0.15) > 0.01


def _cand(mask: np.ndarray, score: float) -> Candidate:
    return Candidate(box=box_of_mask(mask), mask=mask, score=score, label="x", source="test")


def test_the_check_drops_a_bottle_for_a_box_keeps_order_and_never_leaves_nothing():
    bottle, box = (slice(40, 52), slice(20, 32)), (slice(50, 60), slice(60, 72))
    depth = _oblique_scene([(*bottle, 0.15), (*box, 0.055)])
    cands = [_cand(_mask(*bottle), 0.9), _cand(_mask(*box), 0.5)]
    hc = HeightCheck(FOVY)
    kept = hc.filter(cands, depth, "box")
    assert [c.score for c in kept] == [0.5] and hc.last_rejected == 1
    assert [c.score for c in hc.filter(cands, depth, "bottle")] == [0.9]
    assert hc.filter(cands, depth, "can") == cands and hc.last_rejected == 0  # all impossible: keep all
    assert hc.filter(cands, depth, "teapot") == cands  # a category the library does not know
    assert hc.filter(cands, None, "box") == cands  # no depth
    # a wide margin lets the bottle pass as a box
    assert len(HeightCheck(FOVY, HeightCheckConfig(margin_above=0.1)).filter(cands, depth, "box")) == 2


def test_vap_options_turn_the_check_on_with_the_cameras_field_of_view_and_reject_a_bad_margin():
    from envs.errors import ConfigError
    from policies.vap.configuration import VAPOptions
    from sim_benchmarks.registry import PolicyContext
    from sim_benchmarks.suites.vap_policies import height_check

    def ctx(**options):
        return PolicyContext("personalized_simpler", "fractal_pick_my", "vap", 0, None, options)

    assert height_check(ctx(), 44.0) is None  # off unless asked
    hc = height_check(ctx(vap_height_check="true", vap_height_margin="0.03"), 44.0)
    assert hc.fovy_deg == 44.0 and hc.config.margin_above == hc.config.margin_below == 0.03
    with pytest.raises(ConfigError, match="vap_height_margin"):
        VAPOptions.from_options({"vap_height_margin": "0.5"})
