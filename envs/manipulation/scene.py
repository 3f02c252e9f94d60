"""The PyBullet tabletop core: one DIRECT client per scene, a table, a Panda arm, cameras and an EE-delta controller.

Two embodiments mirror SIMPLER's two families with the arm that ships in ``pybullet_data``:

* ``fractal`` (Google-Robot-like): tall third-person camera in front of the robot, looking down at the table.
* ``bridge`` (WidowX-like): over-the-shoulder camera behind and beside the robot base.

Control: 10 Hz (24 physics substeps of 1/240 s per ``step``). An action's xyz delta moves a commanded
end-effector target (world/base frame, metres), the gripper stays pointing down (top-down grasps), yaw deltas turn
it about the vertical (at yaw 0 the fingers close along world y); IK turns the target into joint position targets.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import pybullet as p
import pybullet_data
from PIL import Image

from envs.atomic_io import atomic_path
from envs.manipulation.objects import mesh_cache_dir

PHYSICS_DT = 1.0 / 240.0
SUBSTEPS = 24  # → 10 Hz control
CONTROL_HZ = 1.0 / (PHYSICS_DT * SUBSTEPS)
MAX_DELTA_POS = 0.03  # metres per control step, per axis
MAX_DELTA_ROT = 0.15  # radians per control step
EE_LINK = 11  # panda_grasptarget (between the finger pads)
FINGER_LINKS = (9, 10)
ARM_JOINTS = tuple(range(7))
FINGER_OPEN = 0.04  # per finger, metres
HOME_JOINTS = (0.0, -0.25, 0.0, -2.2, 0.0, 1.95, 0.0)
TABLE_COLOUR = (0.62, 0.50, 0.38, 1.0)


@dataclass(frozen=True)
class Embodiment:
    """Camera and workspace of one SIMPLER family (the arm is the pybullet_data Panda for both)."""

    name: str
    camera_eye: tuple[float, float, float]
    camera_target: tuple[float, float, float]
    fov: float
    workspace_low: tuple[float, float, float]  # bounds of the commanded EE target
    workspace_high: tuple[float, float, float]
    spawn_low: tuple[float, float]  # where objects are placed (x, y)
    spawn_high: tuple[float, float]
    home_ee: tuple[float, float, float]


EMBODIMENTS: dict[str, Embodiment] = {
    "fractal": Embodiment("fractal", camera_eye=(0.93, 0.0, 0.56), camera_target=(0.53, 0.0, 0.03), fov=44.0,
                          workspace_low=(0.30, -0.32, 0.012), workspace_high=(0.78, 0.32, 0.45),
                          spawn_low=(0.40, -0.22), spawn_high=(0.66, 0.22), home_ee=(0.45, 0.0, 0.30)),
    "bridge": Embodiment("bridge", camera_eye=(0.16, 0.36, 0.52), camera_target=(0.55, -0.02, 0.02), fov=46.0,
                         workspace_low=(0.30, -0.32, 0.012), workspace_high=(0.78, 0.32, 0.45),
                         spawn_low=(0.40, -0.22), spawn_high=(0.68, 0.20), home_ee=(0.42, 0.0, 0.28)),
}


NEAR, FAR = 0.05, 3.0  # the main camera's clipping planes (metres)


def camera_matrices(embodiment: str) -> tuple[np.ndarray, np.ndarray]:
    """(view, projection) 4×4 matrices of an embodiment's main camera, OpenGL convention (what pybullet renders)."""
    e = EMBODIMENTS[embodiment]
    forward = np.subtract(e.camera_target, e.camera_eye)
    forward = forward / np.linalg.norm(forward)
    side = np.cross(forward, (0.0, 0.0, 1.0))
    side = side / np.linalg.norm(side)
    up = np.cross(side, forward)
    view = np.eye(4)
    view[0, :3], view[1, :3], view[2, :3] = side, up, -forward
    view[:3, 3] = -view[:3, :3] @ np.asarray(e.camera_eye)
    f = 1.0 / math.tan(math.radians(e.fov) / 2)
    proj = np.zeros((4, 4))
    proj[0, 0] = proj[1, 1] = f  # aspect 1: square images
    proj[2, 2], proj[2, 3] = (FAR + NEAR) / (NEAR - FAR), 2 * FAR * NEAR / (NEAR - FAR)
    proj[3, 2] = -1.0
    return view, proj


def project_to_image(embodiment: str, points: np.ndarray) -> np.ndarray:
    """World xyz points (N×3) → main-camera image coordinates (N×2) in [-1, 1]: x to the right, y downwards,
    ±1 at the image edges (independent of the rendered size). Used for training labels, never by a policy."""
    view, proj = camera_matrices(embodiment)
    pts = np.asarray(points, np.float64).reshape(-1, 3)
    clip = (proj @ view @ np.c_[pts, np.ones(len(pts))].T).T
    ndc = clip[:, :2] / clip[:, 3:4]
    return np.stack([ndc[:, 0], -ndc[:, 1]], axis=1)


def texture_file(texture: np.ndarray) -> str:
    """Cache a texture array as PNG (named by content hash) so ``loadTexture`` can read it."""
    digest = hashlib.sha256(texture.tobytes() + str(texture.shape).encode()).hexdigest()[:16]
    path = mesh_cache_dir() / f"tex_{digest}.png"
    if not path.exists():
        with atomic_path(path) as tmp:  # parallel workers share the cache
            Image.fromarray(texture).save(tmp)
    return str(path)


class TabletopScene:
    """A PyBullet world with its own client: build the table and robot, add objects, step the controller, render."""

    def __init__(self, embodiment: str, image_size: int = 224) -> None:
        self.embodiment = EMBODIMENTS[embodiment]
        self.image_size = int(image_size)
        self.client = p.connect(p.DIRECT)
        self._near, self._far = NEAR, FAR
        e = self.embodiment
        self.view = p.computeViewMatrix(e.camera_eye, e.camera_target, (0.0, 0.0, 1.0), physicsClientId=self.client)
        self.proj = p.computeProjectionMatrixFOV(e.fov, 1.0, self._near, self._far, physicsClientId=self.client)
        self.robot = -1
        self.table = -1
        self.target_pos = np.zeros(3)
        self.target_yaw = 0.0
        self.gripper_closed = False
        self._ll = self._ul = self._jr = None
        self._com_offset: dict[int, np.ndarray] = {}  # body -> centre of mass in the body frame

    # ------------------------------------------------------------------ building
    def build(self) -> None:
        """Reset the world: table, robot at its home pose, gripper open (deterministic)."""
        c = self.client
        p.resetSimulation(physicsClientId=c)
        self._com_offset = {}
        p.setGravity(0, 0, -9.81, physicsClientId=c)
        p.setTimeStep(PHYSICS_DT, physicsClientId=c)
        p.setPhysicsEngineParameter(numSolverIterations=60, deterministicOverlappingPairs=1, physicsClientId=c)
        # Table: a wide box whose top is the plane z = 0, plus a grey floor far below for the background.
        col = p.createCollisionShape(p.GEOM_BOX, halfExtents=(0.6, 0.6, 0.02), physicsClientId=c)
        vis = p.createVisualShape(p.GEOM_BOX, halfExtents=(0.6, 0.6, 0.02), rgbaColor=TABLE_COLOUR,
                                  physicsClientId=c)
        self.table = p.createMultiBody(0, col, vis, basePosition=(0.55, 0.0, -0.02), physicsClientId=c)
        floor = p.createVisualShape(p.GEOM_BOX, halfExtents=(3, 3, 0.01), rgbaColor=(0.45, 0.45, 0.47, 1),
                                    physicsClientId=c)
        p.createMultiBody(0, -1, floor, basePosition=(0.5, 0, -0.75), physicsClientId=c)
        p.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=c)
        self.robot = p.loadURDF("franka_panda/panda.urdf", basePosition=(0.0, 0.0, 0.0), useFixedBase=True,
                                flags=p.URDF_ENABLE_CACHED_GRAPHICS_SHAPES, physicsClientId=c)
        info = [p.getJointInfo(self.robot, j, physicsClientId=c) for j in ARM_JOINTS]
        self._ll = [i[8] for i in info]
        self._ul = [i[9] for i in info]
        self._jr = [u - lo for lo, u in zip(self._ll, self._ul, strict=True)]
        for j, q in zip(ARM_JOINTS, HOME_JOINTS, strict=True):
            p.resetJointState(self.robot, j, q, physicsClientId=c)
        for j in FINGER_LINKS:
            p.resetJointState(self.robot, j, FINGER_OPEN, physicsClientId=c)
            p.changeDynamics(self.robot, j, lateralFriction=1.5, spinningFriction=0.01, physicsClientId=c)
        # Move to the embodiment's home EE pose exactly (reset, not simulated, so nothing is disturbed).
        self.target_pos = np.array(self.embodiment.home_ee, float)
        self.target_yaw = 0.0
        self.gripper_closed = False
        for _ in range(3):
            q = self._ik(self.target_pos, self.target_yaw)
            for j, qj in zip(ARM_JOINTS, q, strict=True):
                p.resetJointState(self.robot, j, qj, physicsClientId=c)
        self._command()

    def add_body(self, mesh_path: str, texture: np.ndarray | None, rgba: tuple[float, ...] | None,
                 collision: tuple[str, tuple[float, ...]], mass: float, position: tuple[float, float, float],
                 yaw: float, height: float, friction: float = 1.0) -> int:
        """Add an object whose visual mesh stands on z=0 of its frame; collision is a primitive; returns body id."""
        c = self.client
        kind, dims = collision
        half_h = height / 2
        if kind == "cylinder":
            col = p.createCollisionShape(p.GEOM_CYLINDER, radius=dims[0], height=height,
                                         collisionFramePosition=(0, 0, half_h), physicsClientId=c)
        elif kind == "sphere":
            col = p.createCollisionShape(p.GEOM_SPHERE, radius=dims[0], collisionFramePosition=(0, 0, dims[0]),
                                         physicsClientId=c)
        else:
            col = p.createCollisionShape(p.GEOM_BOX, halfExtents=(dims[0], dims[1], half_h),
                                         collisionFramePosition=(0, 0, half_h), physicsClientId=c)
        vis = p.createVisualShape(p.GEOM_MESH, fileName=mesh_path, rgbaColor=rgba or (1, 1, 1, 1),
                                  physicsClientId=c)
        body = p.createMultiBody(mass, col, vis, basePosition=position,
                                 baseOrientation=p.getQuaternionFromEuler((0, 0, yaw)),
                                 baseInertialFramePosition=(0, 0, half_h) if mass > 0 else (0, 0, 0),
                                 physicsClientId=c)
        if mass > 0:
            self._com_offset[body] = np.array([0.0, 0.0, half_h])
        p.changeDynamics(body, -1, lateralFriction=friction, spinningFriction=0.002, rollingFriction=0.0005,
                         physicsClientId=c)
        if texture is not None:
            tex = p.loadTexture(texture_file(texture), physicsClientId=c)
            p.changeVisualShape(body, -1, textureUniqueId=tex, rgbaColor=(1, 1, 1, 1), physicsClientId=c)
        return body

    def add_basket(self, position: tuple[float, float, float], half: float = 0.085, wall: float = 0.035) -> int:
        """A static open basket (floor + four low walls) centred at ``position``."""
        c = self.client
        t = 0.006
        boxes = [((half, half, t / 2), (0, 0, t / 2))]
        for sx, sy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            ext = (t / 2, half, wall / 2) if sx else (half, t / 2, wall / 2)
            boxes.append((ext, (sx * (half - t / 2), sy * (half - t / 2), wall / 2)))
        col = p.createCollisionShapeArray([p.GEOM_BOX] * 5, halfExtents=[b[0] for b in boxes],
                                          collisionFramePositions=[b[1] for b in boxes], physicsClientId=c)
        colours = [(0.55, 0.42, 0.25, 1)] + [(0.72, 0.58, 0.34, 1)] * 4
        vis = p.createVisualShapeArray([p.GEOM_BOX] * 5, halfExtents=[b[0] for b in boxes],
                                       visualFramePositions=[b[1] for b in boxes], rgbaColors=colours,
                                       physicsClientId=c)
        return p.createMultiBody(0, col, vis, basePosition=position, physicsClientId=c)

    def settle(self, steps: int = 12) -> None:
        """A few physics steps so contacts resolve (objects are spawned at rest, so this barely moves them)."""
        for _ in range(steps):
            p.stepSimulation(physicsClientId=self.client)

    # ------------------------------------------------------------------ control
    def _ik(self, pos: np.ndarray, yaw: float) -> list[float]:
        orn = p.getQuaternionFromEuler((math.pi, 0.0, yaw))  # fingers close along (-sin yaw, cos yaw)
        q = p.calculateInverseKinematics(self.robot, EE_LINK, pos.tolist(), orn, lowerLimits=self._ll,
                                         upperLimits=self._ul, jointRanges=self._jr, restPoses=list(HOME_JOINTS),
                                         maxNumIterations=40, residualThreshold=1e-4, physicsClientId=self.client)
        return list(q[:7])

    def _command(self) -> None:
        c = self.client
        q = self._ik(self.target_pos, self.target_yaw)
        p.setJointMotorControlArray(self.robot, list(ARM_JOINTS), p.POSITION_CONTROL, targetPositions=q,
                                    forces=[200.0] * 7, positionGains=[0.08] * 7, physicsClientId=c)
        finger = 0.0 if self.gripper_closed else FINGER_OPEN
        p.setJointMotorControlArray(self.robot, list(FINGER_LINKS), p.POSITION_CONTROL,
                                    targetPositions=[finger, finger], forces=[60.0, 60.0], physicsClientId=c)

    def apply_action(self, action: np.ndarray) -> None:
        """Apply one 7-D action ``[dx, dy, dz, droll, dpitch, dyaw, gripper]`` and simulate one control step.

        xyz deltas are clipped to ±MAX_DELTA_POS and move the commanded target inside the workspace; roll and pitch
        are ignored (the gripper stays top-down); yaw is clipped to ±MAX_DELTA_ROT and kept in [-π/2, π/2];
        gripper > 0 closes, ≤ 0 opens (absolute command).
        """
        a = np.asarray(action, float).reshape(-1)
        e = self.embodiment
        self.target_pos = np.clip(self.target_pos + np.clip(a[:3], -MAX_DELTA_POS, MAX_DELTA_POS),
                                  e.workspace_low, e.workspace_high)
        self.target_yaw = float(np.clip(self.target_yaw + np.clip(a[5], -MAX_DELTA_ROT, MAX_DELTA_ROT),
                                        -math.pi / 2, math.pi / 2))
        self.gripper_closed = bool(a[6] > 0.0)
        self._command()
        for _ in range(SUBSTEPS):
            p.stepSimulation(physicsClientId=self.client)

    # ------------------------------------------------------------------ state
    def ee_pose(self) -> tuple[np.ndarray, float]:
        """Actual grasp-point position (world, metres) and gripper yaw (radians)."""
        st = p.getLinkState(self.robot, EE_LINK, computeForwardKinematics=True, physicsClientId=self.client)
        yaw = p.getEulerFromQuaternion(st[5])[2]
        yaw = (yaw + math.pi / 2) % math.pi - math.pi / 2  # the gripper is symmetric under a half turn
        return np.array(st[4]), float(yaw)

    def gripper_opening(self) -> float:
        """Distance between the fingers in metres (0 closed, 0.08 fully open)."""
        return float(sum(p.getJointState(self.robot, j, physicsClientId=self.client)[0] for j in FINGER_LINKS))

    def ee_state(self) -> np.ndarray:
        """``[x, y, z, yaw, gripper_opening, gripper_closed_command]`` as float32."""
        pos, yaw = self.ee_pose()
        return np.array([*pos, yaw, self.gripper_opening(), float(self.gripper_closed)], np.float32)

    def grasped(self, body: int) -> bool:
        """True when both fingers touch ``body``."""
        c = self.client
        return all(p.getContactPoints(self.robot, body, linkIndexA=link, physicsClientId=c) for link in FINGER_LINKS)

    def touching(self, body: int) -> bool:
        """True when any robot link touches ``body``."""
        return bool(p.getContactPoints(self.robot, body, physicsClientId=self.client))

    def pose(self, body: int) -> tuple[np.ndarray, np.ndarray]:
        """Position of a body's frame origin (the bottom centre of objects) and its quaternion."""
        pos, orn = p.getBasePositionAndOrientation(body, physicsClientId=self.client)  # centre-of-mass frame
        pos = np.array(pos)
        off = self._com_offset.get(body)
        if off is not None:
            rot = np.array(p.getMatrixFromQuaternion(orn, physicsClientId=self.client)).reshape(3, 3)
            pos = pos - rot @ off
        return pos, np.array(orn)

    # ------------------------------------------------------------------ rendering
    def render(self, segmentation: bool = False) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The main camera: RGB uint8 (H, W, 3), and when asked depth (metres, float32) and body-id mask (int32)."""
        n = self.image_size
        flags = 0 if segmentation else p.ER_NO_SEGMENTATION_MASK
        _, _, rgba, depth, seg = p.getCameraImage(n, n, self.view, self.proj, renderer=p.ER_TINY_RENDERER,
                                                  lightDirection=(0.4, -0.3, 1.0), shadow=0, flags=flags,
                                                  physicsClientId=self.client)
        rgb = np.asarray(rgba, np.uint8).reshape(n, n, 4)[..., :3].copy()
        if not segmentation:
            return rgb, None, None
        d = np.asarray(depth, np.float32).reshape(n, n)
        depth_m = (self._far * self._near / (self._far - (self._far - self._near) * d)).astype(np.float32)
        return rgb, depth_m, np.asarray(seg, np.int32).reshape(n, n)

    def close(self) -> None:
        """Disconnect the client (idempotent)."""
        if self.client >= 0:
            try:
                p.disconnect(physicsClientId=self.client)
            except p.error:
                pass
            self.client = -1
