"""Multi-view VAP's geometry: back-projection of a mask centre and cross-view clustering."""

import math

import numpy as np
import pytest

from policies.vap.multiview import FUSE_RADIUS, _cluster, backproject


def test_backproject_centre_pixel_lies_on_the_optical_axis():
    mask = np.zeros((64, 64), bool)
    mask[31:33, 31:33] = True  # centred on the image centre
    depth = np.full((64, 64), 2.0)
    rot = np.eye(3)  # camera looks along world -z
    point = backproject(mask, depth, np.array([0.1, 0.2, 3.0]), rot, 60.0)
    assert point == pytest.approx([0.1, 0.2, 1.0], abs=1e-9)


def test_backproject_off_centre_uses_the_field_of_view():
    mask = np.zeros((100, 100), bool)
    mask[49:51, 99] = True  # right edge: x = tan(fov/2) * depth in a square image
    point = backproject(mask, np.full((100, 100), 1.0), np.zeros(3), np.eye(3), 90.0)
    assert point[0] == pytest.approx(math.tan(math.radians(45)) * 0.99, abs=0.01)
    assert backproject(np.zeros((4, 4), bool), np.ones((4, 4)), np.zeros(3), np.eye(3), 60.0) is None


def test_cluster_merges_views_of_one_object_and_keeps_one_per_view():
    a = np.array([0.0, 0.0, 0.8])
    b = np.array([0.2, 0.0, 0.8])
    entries = [("front", 0, 0.9, a, 1), ("left", 0, 0.7, a + FUSE_RADIUS / 3, 1),
               ("front", 1, 0.4, a + 0.01, 2), ("left", 1, 0.3, b, 3)]
    clusters = _cluster(entries)
    views = [sorted(e[0] for e in cl) for cl in clusters]
    assert views[0] == ["front", "left"] and len(clusters) == 3  # the second front candidate starts its own
