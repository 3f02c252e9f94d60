"""The VLABench expert's funnel mode: labels for states a learned policy reached, not only the expert's own."""

import numpy as np
import pytest

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from envs.manipulation.vlabench.scene import TABLE_Z  # noqa: E402
from policies.manipulation.vlabench_expert import VLABenchExpert  # noqa: E402

TARGET = {"position": np.array([0.1, 0.2, TABLE_Z]), "start": np.array([0.1, 0.2, TABLE_Z]), "height": 0.1,
          "yaw": 0.0, "category": "bottle", "radius": 0.03}
GRASP_Z = TABLE_Z + 0.1 - 0.035


class _Env:
    """Just the privileged state the expert reads: one target, a box, and a hand placed by the test."""

    def __init__(self, tcp: np.ndarray) -> None:
        self.tcp = np.asarray(tcp, float)
        self.unwrapped = self

    def privileged_state(self) -> dict:
        return {"goal": "in_box", "target": TARGET, "objects": [TARGET], "tcp": self.tcp,
                "fixture": {"kind": "box", "xy": np.array([-0.1, 0.25])}}


def _first_goal(tcp, funnel: bool, phase: str = "approach") -> tuple[np.ndarray, str]:
    expert = VLABenchExpert(_Env(tcp), funnel=funnel)
    expert.phase = phase
    if phase == "carry":
        expert.carry_z, expert.offset = TABLE_Z + 0.2, 0.065
    return expert.act(None), expert.phase


def test_a_hand_low_and_near_the_object_descends_in_funnel_mode_and_backs_up_without_it():
    low_near = np.array([0.1 + 0.01, 0.2, GRASP_Z + 0.04])  # 1 cm off, 4 cm above the grasp height
    funnel, phase = _first_goal(low_near, funnel=True)
    assert phase == "descend" and funnel[2] < low_near[2] and funnel[6] < 0  # down, gripper still open
    assert funnel[0] < low_near[0]  # and centring on the object
    plain, phase = _first_goal(low_near, funnel=False)
    assert phase == "approach" and plain[2] > low_near[2]  # its own waypoint: back up to the hover height
    # far off to the side, the funnel does not apply: up and over first
    far, phase = _first_goal(np.array([0.1 + 0.05, 0.2, GRASP_Z + 0.04]), funnel=True)
    assert phase == "approach" and far[2] > GRASP_Z + 0.04


def test_a_held_object_near_the_box_is_lowered_in_funnel_mode():
    near_box = np.array([-0.1 + 0.02, 0.25, TABLE_Z + 0.2])  # 2 cm from the box centre, at the carry height
    funnel, phase = _first_goal(near_box, funnel=True, phase="carry")
    assert phase == "lower" and funnel[2] < near_box[2] and funnel[6] > 0  # down, still holding
    plain, phase = _first_goal(near_box, funnel=False, phase="carry")
    assert phase == "carry" and plain[2] == pytest.approx(near_box[2], abs=1e-6)  # centres at the carry height
