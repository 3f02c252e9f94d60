"""Seeded episodes stay byte for byte the same, above all those of the three original tasks as tasks are added.

Policies are trained and evaluated on fixed seeded episodes; a new task or category must never change which objects,
poses, looks or instructions an existing seed gives. ``PINNED`` was computed before the shelf and button tasks and
the book category existed, ``PINNED_NEW`` when they were added (both re-pinned once when the fingerprint began to
round floats; the episodes were checked unchanged first). The fingerprints cover the compiled world (every
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
    ('select_my_pick', 'personal'): ('02cff03fe60967ca', '1d975957c726c740'),
    ('select_my_pick', 'in_distribution'): ('e8d7167931c2b712', '9fe8f8c7bd8c5148'),
    ('select_my_pick', 'unseen_texture'): ('bef3f249e1070aec', '998f971fd50dfe5a'),
    ('select_my_pick', 'cross_instance'): ('08ca1ea4debf86a2', '81248824166171fc'),
    ('select_my_in_box', 'personal'): ('6eaae8526c83701f', 'e6f867fd06d7cfed'),
    ('select_my_in_box', 'in_distribution'): ('6d5c1ae6a3b51749', 'cbfa5bacab0f949c'),
    ('select_my_in_box', 'unseen_texture'): ('c8f181cdee826a7d', '24998a4152a4875c'),
    ('select_my_in_box', 'cross_instance'): ('98ddc3e9ece726e3', 'c31955ad5fb915aa'),
    ('select_my_on_plate', 'personal'): ('4ddac069cacbb87e', 'b2b2f7ca60c9a83d'),
    ('select_my_on_plate', 'in_distribution'): ('1499c530a114365f', '38ef7c10341b7458'),
    ('select_my_on_plate', 'unseen_texture'): ('627f3ee16a7059af', 'ecc1ffdd4e491ac2'),
    ('select_my_on_plate', 'cross_instance'): ('70b80f55b60d4c12', '39d156b68f6e6c4e'),
}
# The shelf and button tasks, pinned when they were added (the results page's expert runs used these episodes).
PINNED_NEW = {
    ('select_my_from_shelf', 'personal'): ('ba4b52d99613deb6', 'c188e000df51a5b3'),
    ('select_my_from_shelf', 'in_distribution'): ('0947043b2b344291', '713837a0ed7e914b'),
    ('select_my_from_shelf', 'unseen_texture'): ('a58618f8f3c91520', '7264b88876452c26'),
    ('select_my_from_shelf', 'cross_instance'): ('d6afc7a496387191', '21a0f4d84c248690'),
    ('select_my_button', 'personal'): ('cc5d34c2dde6bbf3', '1a4ed6b8a6599fbd'),
    ('select_my_button', 'in_distribution'): ('6a8265b8e17d15ee', 'dfd62c6a9e157720'),
    ('select_my_button', 'unseen_texture'): ('e53edcf755b8a423', 'df86d7719a12a292'),
    ('select_my_button', 'cross_instance'): ('060a0b61a9fc6e44', '8b51023dd72bed2a'),
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
        h.update(_stable_bytes(arr, 6))
    keys = ("task", "track", "category", "personal_object", "instruction", "distractors", "receptacle",
            "instruction_style", "target_attributes")
    h.update(repr([(k, info.get(k)) for k in keys]).encode())
    for arr in (d.qpos, obs["ee_state"], obs["joints"]):  # the settled state
        h.update(_stable_bytes(arr, 3))  # 1 mm / 1 mrad: settling amplifies float noise
    return h.hexdigest()[:16]


def _stable_bytes(arr, decimals: int) -> bytes:
    """Integer arrays as they are; float arrays rounded (and -0.0 made 0.0), so that only a changed episode moves the
    hash, not float noise: the camera orientation differs in the last bits between BLAS kernels (OpenBLAS picks one
    for the CPU: Haswell, SkylakeX, ...), and the physics settling the first state turns that into ~1e-5 m."""
    a = np.ascontiguousarray(arr)
    if np.issubdtype(a.dtype, np.floating):
        a = np.round(a.astype(np.float64), decimals) + 0.0
    return a.tobytes()


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
