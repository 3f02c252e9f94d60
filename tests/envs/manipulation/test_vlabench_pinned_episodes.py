"""Seeded episodes stay byte for byte the same, above all those of the three original tasks as tasks are added.

Policies are trained and evaluated on fixed seeded episodes; a new task or category must never change which objects,
poses, looks or instructions an existing seed gives. ``PINNED`` was computed before the shelf and button tasks and
the book category existed, ``PINNED_NEW`` when they were added. The fingerprints cover the compiled world (every
texture's pixels, mesh vertices, materials, body/camera/light poses), the instruction and episode info, and the
settled first state. Rendering is left out on purpose: pixels depend on the GL backend, while everything that
decides the pixels is in the hash.
"""

import hashlib

import numpy as np
import pytest

pytest.importorskip("envs.manipulation.vlabench.scene")  # sets MUJOCO_GL before mujoco loads

from envs.manipulation.vlabench.env import make_env  # noqa: E402
from envs.manipulation.vlabench.tasks import PICK_PLACE_TASKS, TASKS, TRACKS  # noqa: E402

SEEDS = (0, 13)
PINNED = {
    # (task, track): fingerprints of SEEDS, computed before any task or category was added
    ('select_my_pick', 'personal'): ('4c5c10161cc4c897', '0160fadd88940f5e'),
    ('select_my_pick', 'in_distribution'): ('e39f213781cb624d', '4577796746b697f4'),
    ('select_my_pick', 'unseen_texture'): ('1c8af77186977006', '0c35fbb154feed3e'),
    ('select_my_pick', 'cross_instance'): ('93d9e781b5f8304b', 'a08cc8c48d37b612'),
    ('select_my_in_box', 'personal'): ('ac49c00b6b6880b0', '9add998eaad7c17e'),
    ('select_my_in_box', 'in_distribution'): ('bf87da35e2a046f4', '7cf3e152a777ef6c'),
    ('select_my_in_box', 'unseen_texture'): ('9d2f58eb0fef3bfb', 'bae73d4364956012'),
    ('select_my_in_box', 'cross_instance'): ('696c79d39598fbc3', '21a63f4742915b13'),
    ('select_my_on_plate', 'personal'): ('04c3b4129947c16b', 'b426900a8d6f61bc'),
    ('select_my_on_plate', 'in_distribution'): ('36a0ab098973c93a', '85d1424636ec9f6f'),
    ('select_my_on_plate', 'unseen_texture'): ('ad533beba4053d17', '40b745cdad163299'),
    ('select_my_on_plate', 'cross_instance'): ('3ee8539912738d87', '5f86a4742db7157d'),
}
# The shelf and button tasks, pinned when they were added (the results page's expert runs used these episodes).
PINNED_NEW = {
    ('select_my_from_shelf', 'personal'): ('c72cae072128d049', '3fda858ae3c1ecf1'),
    ('select_my_from_shelf', 'in_distribution'): ('f0ca2bd344cfdf61', 'a7e85ee4d2145c46'),
    ('select_my_from_shelf', 'unseen_texture'): ('07e3b2a92b2d36a0', 'd2c531625852ad2a'),
    ('select_my_from_shelf', 'cross_instance'): ('0fc9db469bc1ce03', '9514995f179e4707'),
    ('select_my_button', 'personal'): ('c93bfe4bb6b9116d', '62734a729f8c3d98'),
    ('select_my_button', 'in_distribution'): ('42965f039ca66e96', '1d13352d0be60ce2'),
    ('select_my_button', 'unseen_texture'): ('3e6dca0e7357b0e4', '97d910ab00fe3d8a'),
    ('select_my_button', 'cross_instance'): ('e801f9900fb42d21', 'f81b3a1d71b8f307'),
}


def episode_fingerprint(env, seed: int) -> str:
    """sha256 over the episode's compiled world, its instruction and info, and the settled first state."""
    obs, info = env.reset(seed=seed)
    m, d = env.scene.model, env.scene.data
    h = hashlib.sha256()
    for arr in (m.tex_data, m.tex_height, m.tex_width, m.mesh_vert, m.mesh_face, m.mat_rgba, m.mat_texid,
                m.geom_type, m.geom_size, m.geom_pos, m.geom_quat, m.geom_rgba, m.geom_matid, m.body_pos,
                m.body_quat, m.body_mass, m.cam_pos, m.cam_quat, m.cam_fovy, m.light_dir, m.light_diffuse,
                m.vis.headlight.ambient):
        h.update(np.ascontiguousarray(arr).tobytes())
    keys = ("task", "track", "category", "personal_object", "instruction", "distractors", "receptacle",
            "instruction_style", "target_attributes")
    h.update(repr([(k, info.get(k)) for k in keys]).encode())
    # The settled state, rounded so that only a changed episode (not float noise) can move it.
    for arr in (d.qpos, obs["ee_state"], obs["joints"]):
        h.update(np.round(np.asarray(arr, np.float64), 5).tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("task, track", sorted({**PINNED, **PINNED_NEW}))
def test_task_episodes_unchanged(task, track):
    env = make_env(task, {"image_size": 32, "references": False, "cameras": "front", "track": track})
    try:
        got = [episode_fingerprint(env, s) for s in SEEDS]
    finally:
        env.close()
    assert got == list({**PINNED, **PINNED_NEW}[(task, track)])


def test_every_task_and_track_is_pinned():
    assert {task for task, _ in PINNED} == set(PICK_PLACE_TASKS)
    assert {task for task, _ in PINNED_NEW} == set(TASKS) - set(PICK_PLACE_TASKS)
    assert {track for _, track in PINNED} == {track for _, track in PINNED_NEW} == set(TRACKS)
