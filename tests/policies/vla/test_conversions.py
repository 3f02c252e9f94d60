"""Conversions between Embodia's action/image conventions and external VLAs'."""

import numpy as np
import pytest

from envs.errors import ConfigError
from policies.vla.conversions import (
    GRIPPER_CONVENTIONS,
    ActionQueue,
    TemporalEnsembler,
    axis_angle_to_rpy,
    convert_gripper,
    resize_image,
    rpy_to_axis_angle,
    to_embodia_action,
)


def test_resize_modes_shapes_and_content():
    img = np.zeros((60, 120, 3), np.uint8)
    img[:, 60:] = 255  # right half white
    assert resize_image(img, 32).shape == (32, 32, 3)
    assert resize_image(img, (20, 40)).shape == (20, 40, 3)
    # pad keeps the aspect ratio: a 2:1 image in a square leaves black bands top and bottom
    padded = resize_image(img, 64, "pad")
    assert padded.shape == (64, 64, 3)
    assert padded[:15].max() == 0 and padded[-15:].max() == 0
    assert padded[32, 40:].min() == 255 and padded[32, :20].max() == 0
    # center crop of a 2:1 image to a square keeps the middle: half dark, half white
    crop = resize_image(img, 30, "center_crop")
    assert crop[:, :13].max() == 0 and crop[:, 17:].min() == 255
    # several cameras: the first one is used
    stack = np.stack([img, 255 - img])
    assert np.array_equal(resize_image(stack, 32), resize_image(img, 32))
    with pytest.raises(ConfigError, match="valid: stretch, center_crop, pad"):
        resize_image(img, 32, "squash")


def test_rpy_axis_angle_round_trip_and_known_values():
    rng = np.random.default_rng(0)
    rpy = rng.uniform(-1.0, 1.0, size=(50, 3))
    np.testing.assert_allclose(axis_angle_to_rpy(rpy_to_axis_angle(rpy)), rpy, atol=1e-9)
    # a pure yaw is a rotation about z by the same angle
    np.testing.assert_allclose(rpy_to_axis_angle(np.array([0.0, 0.0, 0.3])), [0.0, 0.0, 0.3], atol=1e-12)
    # extrinsic xyz: roll then pitch about fixed axes; check against the composed rotation's angle
    aa = rpy_to_axis_angle(np.array([0.2, 0.1, 0.0]))
    assert np.linalg.norm(aa) == pytest.approx(np.arccos((np.cos(0.2) + np.cos(0.1) + np.cos(0.2) * np.cos(0.1)
                                                          - 1) / 2), abs=1e-9)


def test_gripper_conventions():
    embodia, unit_open = GRIPPER_CONVENTIONS["embodia"], GRIPPER_CONVENTIONS["unit_open"]
    # OpenVLA/Octo 1 = open → Embodia -1 (open); 0 = closed → +1 (close)
    assert convert_gripper(1.0, unit_open, embodia) == pytest.approx(-1.0)
    assert convert_gripper(0.0, unit_open, embodia) == pytest.approx(1.0)
    assert convert_gripper(0.25, unit_open, embodia) == pytest.approx(0.5)
    widowx = GRIPPER_CONVENTIONS["widowx"]
    assert convert_gripper(0.8, widowx, embodia) == pytest.approx(-0.8)
    binary = type(embodia)(-1.0, 1.0, open_is_high=False, binary=True)
    assert convert_gripper(0.4, unit_open, binary) == 1.0  # openness 0.4 < 0.5 → closed
    with pytest.raises(ConfigError, match="unknown gripper convention 'open'"):
        to_embodia_action(np.zeros(7), gripper="open")


def test_to_embodia_action_axis_angle_and_dims():
    ext = np.array([0.01, -0.02, 0.03, 0.0, 0.0, 0.2, 1.0])  # axis-angle yaw 0.2, gripper open (unit_open)
    act = to_embodia_action(ext, rotation="axis_angle", gripper="unit_open")
    np.testing.assert_allclose(act, [0.01, -0.02, 0.03, 0.0, 0.0, 0.2, -1.0], atol=1e-6)
    assert act.dtype == np.float32
    with pytest.raises(ConfigError, match="6 dims"):
        to_embodia_action(np.zeros(6))


def test_temporal_ensembler_weights_overlapping_chunks():
    ens = TemporalEnsembler(chunk=3, decay=0.0)  # decay 0: plain mean of the predictions for each step
    a0 = ens.add(np.array([[0.0], [1.0], [2.0]]))
    assert a0 == pytest.approx([0.0])
    a1 = ens.add(np.array([[10.0], [11.0], [12.0]]))  # step 1: old chunk says 1, new says 10
    assert a1 == pytest.approx([5.5])
    a2 = ens.add(np.array([[20.0], [21.0], [22.0]]))  # step 2: 2, 11, 20
    assert a2 == pytest.approx([11.0])
    a3 = ens.add(np.array([[30.0], [31.0], [32.0]]))  # first chunk expired: 12, 21, 30
    assert a3 == pytest.approx([21.0])
    ens2 = TemporalEnsembler(chunk=2, decay=1.0)
    ens2.add(np.array([[0.0], [0.0]]))
    w = np.exp(-np.arange(2.0))
    assert ens2.add(np.array([[1.0], [1.0]])) == pytest.approx([w[1] / w.sum()])  # older weighs more
    ens2.reset()
    assert ens2.add(np.array([[3.0], [4.0]])) == pytest.approx([3.0])


def test_action_queue_replans_every_n_steps():
    q = ActionQueue(2)
    calls = 0
    out = []
    for _ in range(5):
        if q.needs_chunk():
            q.push(np.arange(4) + 10 * calls)
            calls += 1
        out.append(int(q.pop()))
    assert out == [0, 1, 10, 11, 20] and calls == 3
    with pytest.raises(ConfigError):
        ActionQueue(0)
