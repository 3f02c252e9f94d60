"""Fused table-top point clouds: world points from a posed depth camera, objects on the occupancy grid."""

import math

import numpy as np
import pytest

from perception.tabletop_cloud import (
    GridConfig,
    footprint,
    nearest_object,
    pixel_owners,
    rectangle_yaw,
    round_body_centre,
    table_height,
    tabletop_objects,
    view_points,
    world_points,
)


def test_world_points_of_a_camera_looking_straight_down():
    # camera at z = 1 looking along world −z (its own −z), x to the right, y up: identity rotation
    depth = np.full((8, 8), 1.0, np.float32)
    pts = world_points(depth, (np.array([0.2, 0.1, 1.0]), np.eye(3), 90.0))
    assert pts.shape == (64, 3) and np.allclose(pts[:, 2], 0.0)
    f = 4.0  # (h / 2) / tan(45°)
    assert pts[:, 0].min() == pytest.approx(0.2 + (0.5 - 4) / f) and pts[:, 1].max() == pytest.approx(0.1 + 3.5 / f)
    mask = np.zeros((8, 8), bool)
    mask[0, 0] = True
    assert world_points(depth, (np.zeros(3), np.eye(3), 90.0), mask).shape == (1, 3)


def _cylinder(cx: float, cy: float, r: float, h: float, n: int = 4000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a, z = rng.uniform(0, 2 * math.pi, n), rng.uniform(0, h, n)
    rr = r * np.sqrt(rng.uniform(0, 1, n))
    return np.stack([cx + rr * np.cos(a), cy + rr * np.sin(a), z], axis=1)


def test_objects_on_the_grid_have_their_centre_height_and_the_table_is_found():
    rng = np.random.default_rng(1)
    table = np.c_[rng.uniform(-0.4, 0.4, (20000, 2)), np.zeros(20000)]
    bottle, can = _cylinder(0.1, 0.2, 0.025, 0.15), _cylinder(-0.15, 0.05, 0.03, 0.1, seed=2)
    tray = np.c_[rng.uniform(0.15, 0.33, (6000, 2)), rng.uniform(0, 0.008, 6000)]  # a low, wide plate
    pts = np.concatenate([table, bottle, can, tray]) + np.array([0, 0, 0.78])
    z = table_height(pts)
    assert z == pytest.approx(0.78, abs=1e-3)
    objs = tabletop_objects([pts], z)
    assert len(objs) == 3 and objs[0].size > 0.15  # the plate's footprint is the largest
    found = nearest_object(objs, np.array([0.1, 0.2]))
    assert np.linalg.norm(found.centre - [0.1, 0.2]) < 0.005 and found.height == pytest.approx(0.15, abs=0.003)
    assert nearest_object([], np.zeros(2)) is None
    # the arm, high above the table, is not an object
    arm = _cylinder(0.0, -0.1, 0.04, 0.1) + np.array([0, 0, 0.78 + GridConfig.max_height])
    assert len(tabletop_objects([pts, arm], z)) == 3


def test_a_mugs_handle_does_not_move_the_round_body_centre():
    body = _cylinder(0.0, 0.0, 0.035, 0.09)[:, :2]
    handle = np.c_[np.linspace(0.035, 0.055, 200), np.random.default_rng(3).uniform(-0.004, 0.004, 200)]
    for yaw in (0.0, 0.7, 2.0):  # the handle on any side
        rot = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
        cells = np.concatenate([body, handle]) @ rot.T + np.array([0.1, 0.2])
        obj = footprint(cells, 0.09)
        assert np.linalg.norm(obj.centre - [0.1, 0.2]) > 0.008  # the box centre is pulled toward the handle
        assert np.linalg.norm(round_body_centre(obj) - [0.1, 0.2]) < 0.003


def _box_cells(cx: float, cy: float, length: float, width: float, yaw: float) -> np.ndarray:
    """Occupied grid cells of a box standing at (cx, cy), its long side turned by ``yaw`` (through the real grid)."""
    rng = np.random.default_rng(4)
    a, b = rng.uniform(-length / 2, length / 2, 20000), rng.uniform(-width / 2, width / 2, 20000)
    c, s = math.cos(yaw), math.sin(yaw)
    xy = np.c_[cx + a * c - b * s, cy + a * s + b * c]
    (obj,) = tabletop_objects([np.c_[xy, np.full(len(xy), 0.05)]], 0.0)
    return obj


def _turn_error(a: float, b: float, period: float) -> float:
    d = (a - b) % period
    return min(d, period - d)


def test_the_smallest_rectangle_turns_with_a_square_box_whose_principal_axis_is_undefined():
    for yaw in (0.0, 0.5, math.radians(53), -1.2):
        square = _box_cells(0.05, 0.1, 0.06, 0.06, yaw)
        assert max(square.extent) < 1.12 * min(square.extent)  # the principal axes say nothing here
        # a square's sides repeat every quarter turn: either pair of faces is a grasp
        assert _turn_error(rectangle_yaw(square.cells), yaw, math.pi / 2) < math.radians(4)
    oblong = _box_cells(-0.1, 0.0, 0.09, 0.05, 0.4)  # an oblong box: its longer side, as the principal axis says
    assert _turn_error(rectangle_yaw(oblong.cells), 0.4, math.pi) < math.radians(3)
    assert _turn_error(oblong.axis_yaw, 0.4, math.pi) < math.radians(3)
    assert -math.pi / 2 <= rectangle_yaw(oblong.cells) < math.pi / 2
    assert rectangle_yaw(np.array([[0.0, 0.0], [0.01, 0.01], [0.02, 0.02]])) == 0.0  # a line: nothing to turn


def _top_down_view(blocks: list[tuple[float, float, float, float]], size: int = 160) -> tuple[np.ndarray, tuple]:
    """Depth of a camera 1 m above a table at z = 0, looking straight down (90° fov: 2 m across), with square
    blocks (cx, cy, half side, height) standing on the table."""
    pose = (np.array([0.0, 0.0, 1.0]), np.eye(3), 90.0)
    depth = np.full((size, size), 1.0)
    xy = view_points(depth, pose)[..., :2]
    for cx, cy, half, h in blocks:
        inside = (np.abs(xy[..., 0] - cx) <= half) & (np.abs(xy[..., 1] - cy) <= half)
        depth[inside] = 1.0 - h
    return depth, pose


def test_pixel_owners_tell_objects_apart_by_the_footprint_under_them():
    depth, pose = _top_down_view([(0.2, 0.1, 0.05, 0.1), (-0.25, -0.1, 0.05, 0.15)])
    pts = view_points(depth, pose)
    assert pts.shape == (160, 160, 3) and np.allclose(pts[depth == 1.0][:, 2], 0.0)
    objs = tabletop_objects([pts.reshape(-1, 3)], 0.0, GridConfig(cell=0.02, min_cells=2))
    owners = pixel_owners(pts, 0.0, objs, reach=0.03, config=GridConfig(cell=0.02, min_cells=2))
    first = int(np.argmin([np.linalg.norm(o.centre - [0.2, 0.1]) for o in objs]))
    assert set(np.unique(owners)) == {-1, 0, 1}
    assert (owners[depth < 1.0] >= 0).all() and (owners[depth == 1.0] == -1).all()  # the table is nobody's
    assert (owners[(depth < 1.0) & (pts[..., 0] > 0)] == first).all()
    assert (pixel_owners(pts, 0.0, []) == -1).all()
    bad = depth.copy()
    bad[0, 0] = np.nan  # no depth there: no point, nobody's pixel
    assert np.isnan(view_points(bad, pose)[0, 0]).all() and pixel_owners(view_points(bad, pose), 0.0, objs)[0, 0] == -1
