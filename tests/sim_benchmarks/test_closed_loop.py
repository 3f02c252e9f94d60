"""Closed-loop evaluation of a generic head: what acts in each task's episodes."""

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from policies.manipulation.delta_adapter import DeltaToAbsolute  # noqa: E402
from sim_benchmarks import closed_loop  # noqa: E402


class _HandHead:
    def __init__(self):
        self.action_frame = "hand"  # an instance attribute, as the generic head sets it

    def reset(self, instruction, info):
        pass

    def act(self, obs):
        return np.zeros(7, np.float32)


def test_each_vlabench_task_wraps_the_hand_frame_head_once(monkeypatch):
    head, actors = _HandHead(), []

    def fake_episode(env, policy, **kwargs):  # records the actor; the envs themselves are real
        actors.append(policy)
        return SimpleNamespace(metrics={"success": False, "correct_object": False})

    monkeypatch.setattr(closed_loop, "run_episode", fake_episode)
    out = closed_loop.evaluate(head, ["select_my_pick", "select_my_in_box"], episodes=1, seed=0,
                               suite="personalized_vlabench")
    assert len(actors) == 2 and set(out) >= {"select_my_pick", "select_my_in_box", "mean_success_rate"}
    for actor in actors:  # one adapter around the head itself, never an adapter around the previous adapter
        assert isinstance(actor, DeltaToAbsolute) and actor.base is head and actor.frame == "hand"
