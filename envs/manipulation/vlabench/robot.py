"""The Franka Panda for the MuJoCo scenes: ``pybullet_data``'s URDF compiled by MuJoCo, plus actuators and IK.

The URDF names its visual and collision meshes alike (``visual/link1.obj`` and ``collision/link1.obj``), which
MuJoCo's URDF importer cannot tell apart; every link therefore uses the low-poly *collision* mesh as its visual,
which also keeps software rendering fast. Only the hand and fingers collide (convex hulls); the arm links are
visual only. Position actuators drive the seven joints (gravity compensated), one actuator drives finger 1 and an
equality constraint couples finger 2 to it. :class:`PandaIK` solves damped-least-squares IK on the TCP site.
"""

from __future__ import annotations

import functools
import os

import mujoco
import numpy as np

HOME_JOINTS = np.array([0.0, -0.35, 0.0, -2.3, 0.0, 1.95, 0.785])
ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_OPEN = 0.04  # metres per finger
TCP_OFFSET = 0.105  # grasp point below the hand flange (the URDF's panda_grasptarget)
JOINT_STEP = 0.25  # radians: largest joint-target change per control step (about the Panda's speed limit)


@functools.lru_cache(maxsize=1)
def _urdf_and_assets() -> tuple[str, dict[str, bytes]]:
    import pybullet_data

    root = os.path.join(pybullet_data.getDataPath(), "franka_panda")
    with open(os.path.join(root, "panda.urdf")) as fh:
        text = fh.read()
    text = text.replace("package://meshes/visual/", "package://meshes/collision/").replace("package://", "")
    assets = {}
    folder = os.path.join(root, "meshes", "collision")
    for name in os.listdir(folder):
        if name.endswith(".obj"):
            with open(os.path.join(folder, name), "rb") as fh:
                assets[f"meshes/collision/{name}"] = fh.read()
    return text, assets


def panda_spec() -> tuple[mujoco.MjSpec, dict[str, bytes]]:
    """A fresh MjSpec of the Panda (base at the origin, facing +x) with actuators, TCP site and gripper coupling."""
    text, assets = _urdf_and_assets()
    spec = mujoco.MjSpec.from_string(text, assets=assets)
    spec.compiler.fusestatic = False
    spec.compiler.discardvisual = False
    white = spec.add_material(name="panda_white", rgba=[0.92, 0.92, 0.92, 1.0])
    dark = spec.add_material(name="panda_dark", rgba=[0.25, 0.25, 0.27, 1.0])
    for body in spec.bodies:
        if body.name == "world":
            continue
        body.gravcomp = 1.0
        for geom in body.geoms:
            geom.material = dark.name if body.name in ("panda_hand", "panda_leftfinger", "panda_rightfinger") \
                else white.name
            geom.group = 1
            if body.name in ("panda_leftfinger", "panda_rightfinger"):
                geom.friction = [1.5, 0.02, 0.002]
                geom.condim = 4
                geom.solref = [0.005, 1.0]
            elif body.name != "panda_hand":
                geom.contype = geom.conaffinity = 0  # visual only: arm links never touch the table-top objects
    for i, name in enumerate(ARM_JOINTS):
        joint = spec.joint(name)
        joint.damping = [8.0, 0.0, 0.0]
        joint.armature = 0.1
        act = spec.add_actuator(name=f"act_{name}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        kp = 900.0 if i < 4 else 300.0
        act.set_to_position(kp=kp, kv=2 * np.sqrt(kp) * 2)
        act.ctrlrange = joint.range
        act.forcerange = [-87.0, 87.0] if i < 4 else [-12.0 * 1.5, 12.0 * 1.5]
        act.forcelimited = 1
    for name in ("panda_finger_joint1", "panda_finger_joint2"):
        joint = spec.joint(name)
        joint.range = [0.0, FINGER_OPEN]
        joint.damping = [2.0, 0.0, 0.0]
        joint.armature = 0.01
    grip = spec.add_actuator(name="act_gripper", target="panda_finger_joint1", trntype=mujoco.mjtTrn.mjTRN_JOINT)
    grip.set_to_position(kp=400.0, kv=20.0)
    grip.ctrlrange = [0.0, FINGER_OPEN]
    grip.forcerange = [-30.0, 30.0]
    grip.forcelimited = 1
    eq = spec.add_equality(type=mujoco.mjtEq.mjEQ_JOINT, name1="panda_finger_joint2", name2="panda_finger_joint1")
    eq.data[:5] = [0.0, 1.0, 0.0, 0.0, 0.0]
    hand = spec.body("panda_hand")
    hand.add_site(name="tcp", pos=[0.0, 0.0, TCP_OFFSET], size=[0.005, 0.005, 0.005], group=5)
    return spec, assets


class PandaIK:
    """Damped least squares on the TCP site (position + orientation), with a weak pull toward the home pose."""

    def __init__(self, model: mujoco.MjModel, iterations: int = 25, damping: float = 0.05) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        self.iterations, self.damping = iterations, damping
        self.site = model.site("tcp").id
        self.qadr = np.array([model.joint(n).qposadr[0] for n in ARM_JOINTS])
        self.dadr = np.array([model.joint(n).dofadr[0] for n in ARM_JOINTS])
        self.lo = np.array([model.joint(n).range[0] for n in ARM_JOINTS])
        self.hi = np.array([model.joint(n).range[1] for n in ARM_JOINTS])
        self._jp = np.zeros((3, model.nv))
        self._jr = np.zeros((3, model.nv))

    def solve(self, qpos: np.ndarray, pos: np.ndarray, mat: np.ndarray) -> np.ndarray:
        """Arm joints reaching TCP position ``pos`` and rotation matrix ``mat`` (world), starting from ``qpos``."""
        d = self.data
        d.qpos[:] = qpos
        q = d.qpos[self.qadr].copy()
        target_quat = np.zeros(4)
        mujoco.mju_mat2Quat(target_quat, np.asarray(mat, float).reshape(9))
        cur_quat, err_quat = np.zeros(4), np.zeros(4)
        err = np.zeros(6)
        for _ in range(self.iterations):
            d.qpos[self.qadr] = q
            mujoco.mj_kinematics(self.model, d)
            mujoco.mj_comPos(self.model, d)
            err[:3] = pos - d.site_xpos[self.site]
            mujoco.mju_mat2Quat(cur_quat, d.site_xmat[self.site])
            mujoco.mju_negQuat(err_quat, cur_quat)
            mujoco.mju_mulQuat(err_quat, target_quat, err_quat)
            mujoco.mju_quat2Vel(err[3:], err_quat, 1.0)
            if np.linalg.norm(err[:3]) < 5e-4 and np.linalg.norm(err[3:]) < 5e-3:
                break
            mujoco.mj_jacSite(self.model, d, self._jp, self._jr, self.site)
            jac = np.vstack([self._jp[:, self.dadr], self._jr[:, self.dadr]])
            jac[3:] *= 0.5  # orientation error weighs half a metre per radian
            e = err.copy()
            e[3:] *= 0.5
            dq = jac.T @ np.linalg.solve(jac @ jac.T + self.damping**2 * np.eye(6), e)
            null = np.eye(7) - np.linalg.pinv(jac) @ jac
            dq += null @ (0.05 * (HOME_JOINTS - q))
            q = np.clip(q + dq, self.lo, self.hi)
        return q
