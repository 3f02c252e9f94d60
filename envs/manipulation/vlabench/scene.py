"""The MuJoCo table-top scene of Personalized-VLABench: built per episode with ``MjSpec``, stepped at 10 Hz.

Conventions follow VLABench: the Panda's base stands at (0, -0.4, 0.78) facing +y, the table top is the plane
z = 0.78, control runs at 10 Hz (100 substeps of 1 ms), and four cameras are rendered every step (static ``left``,
``right``, ``front`` and the ``wrist`` camera on the hand). Objects carry their library mesh as a textured visual
and a primitive (cylinder / box) collision proxy in geom group 3, which is never rendered. Rendering is offscreen
through MuJoCo's EGL (or OSMesa) backend without shadows or multisampling, so four 224² views stay cheap on a CPU.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field

import numpy as np

from envs.errors import ConfigError

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco loads its GL backend; a user's choice wins

import mujoco  # noqa: E402

from envs.manipulation.vlabench.frames import BASE_POS, BASE_YAW  # noqa: E402,F401  (re-exported: the scene's pose)
from envs.manipulation.vlabench.robot import ARM_JOINTS, FINGER_OPEN, HOME_JOINTS, JOINT_STEP, PandaIK, panda_spec  # noqa: E402

TABLE_Z = 0.78
TABLE_CENTRE, TABLE_HALF = (0.0, 0.15), (0.65, 0.5)
PHYSICS_DT = 0.001
SUBSTEPS = 100  # 10 Hz control
CAMERAS = ("left", "right", "front", "wrist")
WORKSPACE_LOW = np.array([-0.45, -0.2, TABLE_Z + 0.005])
WORKSPACE_HIGH = np.array([0.45, 0.45, TABLE_Z + 0.55])
HOME_TCP = np.array([0.0, 0.05, TABLE_Z + 0.32])
# Metres per axis a delta taken from the measured hand (a hand-frame head's action) may ask for: the scripted
# expert's own step. The SIMPLER convention's 3 cm, added to a hand that trails its command, makes the arm slower
# than the expert it imitates, so more episodes run out of steps.
HAND_MAX_DELTA_POS = 0.05
COLLISION_GROUP = 3  # primitive proxies: simulated, never rendered
SHELF_THICKNESS = 0.012  # boards and panels of the shelf fixture
BUTTON_BASE, BUTTON_TRAVEL, BUTTON_CAP = 0.03, 0.01, 0.014  # pedestal height, cap travel and cap height
BUTTON_TOP = BUTTON_BASE + 1.2 * BUTTON_TRAVEL + BUTTON_CAP  # a resting cap's top above the table


def down_rotation(yaw: float) -> np.ndarray:
    """TCP rotation pointing straight down; at ``yaw`` 0 the fingers close along world y."""
    return euler_to_matrix(math.pi, 0.0, yaw)


def euler_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """R = Rz(yaw) · Ry(pitch) · Rx(roll) (the usual roll-pitch-yaw convention)."""
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), \
        math.sin(yaw)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_to_euler(mat: np.ndarray) -> np.ndarray:
    """Inverse of :func:`euler_to_matrix` (roll, pitch, yaw)."""
    m = np.asarray(mat).reshape(3, 3)
    pitch = -math.asin(float(np.clip(m[2, 0], -1.0, 1.0)))
    return np.array([math.atan2(m[2, 1], m[2, 2]), pitch, math.atan2(m[1, 0], m[0, 0])])


def apply_delta(pos: np.ndarray, rpy: np.ndarray, delta: np.ndarray, max_pos: float, max_rot: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """A SIMPLER delta [dx, dy, dz, droll, dpitch, dyaw] in the robot base frame applied to a world TCP target.

    Translations are clipped to ``max_pos`` per axis and rotated into the world (base x = world +y); roll and pitch
    are ignored (top-down, as in SIMPLER); the yaw change is clipped to ``max_rot``.
    """
    d = np.clip(np.asarray(delta[:3], float), -max_pos, max_pos)
    c, s = math.cos(BASE_YAW), math.sin(BASE_YAW)
    new_pos = np.asarray(pos, float) + np.array([c * d[0] - s * d[1], s * d[0] + c * d[1], d[2]])
    new_rpy = np.asarray(rpy, float).copy()
    new_rpy[2] = (new_rpy[2] + float(np.clip(delta[5], -max_rot, max_rot)) + math.pi) % (2 * math.pi) - math.pi
    return new_pos, new_rpy


def _look_at_quat(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Quaternion of a MuJoCo camera at ``eye`` looking at ``target`` (cameras look along their -z, y up)."""
    fwd = np.asarray(target, float) - np.asarray(eye, float)
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, (0.0, 0.0, 1.0))
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    mat = np.column_stack([right, up, -fwd])
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.reshape(9))
    return quat


@dataclass
class ObjectSpec:
    """One free object: visual mesh + texture, primitive collision, mass, pose (bottom centre, yaw)."""

    name: str
    mesh: str  # OBJ path (stands on z = 0)
    texture: str | None  # PNG path, or None for a flat colour
    rgba: tuple[float, float, float, float]
    collision: tuple[str, tuple[float, ...]]  # ("cylinder", (r,)) or ("box", (hx, hy))
    height: float
    mass: float
    position: tuple[float, float]
    yaw: float
    base_z: float = TABLE_Z  # height of the surface it stands on (a shelf board is higher than the table)


@dataclass
class Look:
    """Appearance of the room: table / floor colours or textures, and the light."""

    table_rgba: tuple[float, float, float, float] = (0.62, 0.50, 0.38, 1.0)
    floor_rgba: tuple[float, float, float, float] = (0.45, 0.45, 0.47, 1.0)
    table_texture: str | None = None
    floor_texture: str | None = None
    light_dir: tuple[float, float, float] = (0.3, 0.2, -1.0)
    light_diffuse: float = 0.7
    ambient: float = 0.35
    front_eye: tuple[float, float, float] = (0.0, 0.85, 1.30)
    front_target: tuple[float, float, float] = (0.0, 0.05, 0.80)


@dataclass
class Fixture:
    """A static fixture: ``kind`` in ("box", "plate", "shelf", "button") at ``position`` (xy) with its size.

    A shelf's ``half`` is the inner half-width (x); ``extra`` gives ``depth`` (half, y), ``board`` (height of the
    board's top above the table) and ``rim`` (how far the side and back panels rise above the board). A button's
    ``half`` is its pedestal's half-width and ``extra["index"]`` the object it stands in front of.
    """

    kind: str
    position: tuple[float, float]
    half: float
    extra: dict[str, float] = field(default_factory=dict)


@functools.lru_cache(maxsize=1)
def backend_check() -> None:
    """Raise ConfigError naming the fix when MuJoCo cannot render offscreen (checked once per process)."""
    backend = os.environ.get("MUJOCO_GL")
    try:
        model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='.1'/></worldbody></mujoco>")
        mujoco.Renderer(model, 8, 8).close()
    except Exception as exc:  # noqa: BLE001 — any GL failure means no offscreen rendering
        raise ConfigError(f"MuJoCo cannot render offscreen with MUJOCO_GL={backend!r} ({type(exc).__name__}); "
                          "set MUJOCO_GL=egl (libegl1) or MUJOCO_GL=osmesa (libosmesa6) before mujoco is "
                          "imported") from None


class VLABenchScene:
    """One compiled MuJoCo world (rebuilt at every reset) with the controller, cameras and metrics queries."""

    def __init__(self, image_size: int = 224, cameras: tuple[str, ...] = CAMERAS) -> None:
        self.image_size = int(image_size)
        self.cameras = tuple(cameras)
        self.model: mujoco.MjModel | None = None
        self.data: mujoco.MjData | None = None
        self._renderer: mujoco.Renderer | None = None
        self.ik: PandaIK | None = None
        self.body_ids: dict[str, int] = {}
        self.target_pos = HOME_TCP.copy()
        self.target_rpy = np.array([math.pi, 0.0, 0.0])
        self.gripper_closed = False

    # ------------------------------------------------------------------ building
    def build(self, objects: list[ObjectSpec], fixtures: list[Fixture], look: Look) -> None:
        """Compile a new world with ``objects`` and ``fixtures``, put the arm at home and run the settle phase."""
        spec, assets = panda_spec()
        self._assets = assets
        spec.option.timestep = PHYSICS_DT
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        spec.option.noslip_iterations = 3
        n = self.image_size
        spec.visual.quality.shadowsize = 0
        spec.visual.quality.offsamples = 0
        spec.visual.global_.offwidth = n
        spec.visual.global_.offheight = n
        spec.visual.headlight.ambient = [look.ambient] * 3
        spec.visual.headlight.diffuse = [0.25] * 3
        spec.visual.headlight.specular = [0.0] * 3
        base = spec.body("panda_link0")
        base.pos = BASE_POS
        base.quat = [math.cos(BASE_YAW / 2), 0.0, 0.0, math.sin(BASE_YAW / 2)]
        world = spec.worldbody
        world.add_light(name="sun", type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, castshadow=0,
                        dir=list(look.light_dir), diffuse=[look.light_diffuse] * 3, specular=[0.05] * 3,
                        pos=[0.0, 0.0, 3.0])
        self._surface(spec, world, "floor", look.floor_rgba, look.floor_texture, (0.0, 0.0, 0.0), (3.0, 3.0, 0.01),
                      collide=False)
        tz = TABLE_Z - 0.025
        self._surface(spec, world, "table", look.table_rgba, look.table_texture,
                      (TABLE_CENTRE[0], TABLE_CENTRE[1], tz), (TABLE_HALF[0], TABLE_HALF[1], 0.025), collide=True)
        for fx in fixtures:
            self._fixture(spec, world, fx)
        for obj in objects:
            self._object(spec, world, obj)
        self._cameras(spec, world, look)
        try:
            self.model = spec.compile()
        except ValueError as exc:  # a mesh the compiler rejects is a bug in the library, not user input
            raise RuntimeError(f"scene does not compile: {exc}") from exc
        self.data = mujoco.MjData(self.model)
        m, d = self.model, self.data
        self.body_ids = {m.body(i).name: i for i in range(m.nbody)}
        self._arm_q = np.array([m.joint(j).qposadr[0] for j in ARM_JOINTS])
        self._finger_q = np.array([m.joint(f"panda_finger_joint{i}").qposadr[0] for i in (1, 2)])
        self._finger_geoms = {g for g in range(m.ngeom)
                              if m.geom_bodyid[g] in (self.body_ids["panda_leftfinger"],
                                                      self.body_ids["panda_rightfinger"])}
        self._left_geoms = {g for g in self._finger_geoms if m.geom_bodyid[g] == self.body_ids["panda_leftfinger"]}
        self._robot_bodies = {i for name, i in self.body_ids.items() if name.startswith("panda_")}
        self.tcp_site = m.site("tcp").id
        self.ik = PandaIK(m)
        # Home pose exactly (set, not simulated), then the settle phase.
        d.qpos[self._arm_q] = HOME_JOINTS
        d.qpos[self._finger_q] = FINGER_OPEN
        self.target_pos, self.target_rpy, self.gripper_closed = HOME_TCP.copy(), np.array([math.pi, 0.0, 0.0]), False
        q = self.ik.solve(d.qpos, self.target_pos, euler_to_matrix(*self.target_rpy))
        d.qpos[self._arm_q] = q
        d.ctrl[:7] = q
        d.ctrl[7] = FINGER_OPEN
        mujoco.mj_forward(m, d)
        self.settle()
        if self._renderer is not None:
            self._renderer.close()
        self._renderer = mujoco.Renderer(m, n, n)
        self._option = mujoco.MjvOption()
        self._option.geomgroup[COLLISION_GROUP] = 0
        self._option.sitegroup[:] = 0

    def _surface(self, spec, world, name: str, rgba, texture: str | None, pos, half, collide: bool) -> None:
        mat = spec.add_material(name=f"{name}_mat", rgba=list(rgba))
        if texture is not None:
            spec.add_texture(name=f"{name}_tex", type=mujoco.mjtTexture.mjTEXTURE_2D, file=texture)
            mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = f"{name}_tex"
            mat.texrepeat = [4.0, 4.0] if name == "floor" else [2.0, 2.0]
            mat.rgba = [1.0, 1.0, 1.0, 1.0]
        kind = mujoco.mjtGeom.mjGEOM_PLANE if name == "floor" else mujoco.mjtGeom.mjGEOM_BOX
        g = world.add_geom(name=name, type=kind, size=list(half), pos=list(pos), material=mat.name)
        if not collide:
            g.contype = g.conaffinity = 0

    def _fixture(self, spec, world, fx: Fixture) -> None:
        name = button_name(int(fx.extra["index"])) if fx.kind == "button" else f"fixture_{fx.kind}"
        body = world.add_body(name=name, pos=[fx.position[0], fx.position[1], TABLE_Z])
        if fx.kind == "button":
            self._button(body, name, fx)
        elif fx.kind == "box":
            wall, t = fx.extra.get("wall", 0.05), 0.006
            h = fx.half
            mat = spec.add_material(name="box_mat", rgba=[0.72, 0.58, 0.34, 1.0])
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[h, h, t / 2], pos=[0, 0, t / 2], material=mat.name,
                          rgba=[0.55, 0.42, 0.25, 1.0])
            for sx, sy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                size = [t / 2, h, wall / 2] if sx else [h, t / 2, wall / 2]
                body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=size, material=mat.name,
                              pos=[sx * (h - t / 2), sy * (h - t / 2), wall / 2])
        elif fx.kind == "shelf":
            self._shelf(spec, body, fx)
        else:  # plate: a low disc with a rim colour
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[fx.half, 0.004, 0], pos=[0, 0, 0.004],
                          rgba=[0.94, 0.94, 0.91, 1.0])
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[fx.half * 0.72, 0.0045, 0],
                          pos=[0, 0, 0.0045], rgba=[0.86, 0.86, 0.82, 1.0], contype=0, conaffinity=0)

    @staticmethod
    def _shelf(spec, body, fx: Fixture) -> None:
        """An open-top shelf of boxes: a raised board between two side panels, a low back panel (on the far side
        from the robot) and a bottom board; the candidates stand on the raised board. Open at the top and the front,
        so the arm reaches in from above and every camera sees the board."""
        w, d, t = fx.half, fx.extra["depth"], SHELF_THICKNESS
        board, rim = fx.extra["board"], fx.extra["rim"]
        mat = spec.add_material(name="shelf_mat", rgba=[0.60, 0.44, 0.28, 1.0])
        top = board + rim
        for size, pos in (([w, d, t / 2], [0, 0, board - t / 2]),  # the board the objects stand on
                          ([w, d, t / 2], [0, 0, t / 2]),  # bottom board
                          ([t / 2, d + t, top / 2], [w + t / 2, t / 2, top / 2]),  # side panels
                          ([t / 2, d + t, top / 2], [-w - t / 2, t / 2, top / 2]),
                          # back panel (+y, away from the robot), from the board up only: low panels and an open
                          # lower compartment keep the objects in view of the front camera, which faces the robot
                          ([w, t / 2, (rim + t) / 2], [0, d + t / 2, board + (rim - t) / 2])):
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=size, pos=pos, material=mat.name,
                          friction=[1.0, 0.02, 0.001])

    @staticmethod
    def _button(body, name: str, fx: Fixture) -> None:
        """A push button: a square pedestal and a red cap on a sprung slide joint (``<name>_press``, travel
        BUTTON_TRAVEL down). The spring's rest point lies above the joint's upper limit, so the cap sits preloaded at
        the top and only a deliberate push (over 1 N) moves it."""
        h, base = fx.half, BUTTON_BASE
        grey = [0.30, 0.30, 0.32, 1.0]
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[h, h, base / 2], pos=[0, 0, base / 2], rgba=grey)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[h * 0.45, BUTTON_TRAVEL, 0], rgba=grey,
                      pos=[0, 0, base + BUTTON_TRAVEL], contype=0, conaffinity=0)  # the stem: looks only
        cap = body.add_body(name=f"{name}_cap", pos=[0, 0, base + 1.2 * BUTTON_TRAVEL])
        cap.add_joint(name=f"{name}_press", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[0, 0, 1],
                      range=[-BUTTON_TRAVEL, 0.0], limited=mujoco.mjtLimited.mjLIMITED_TRUE, stiffness=200.0,
                      springref=0.005, damping=2.0, armature=0.001, solref_limit=[0.004, 1.0])
        cap.add_geom(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[h * 0.75, BUTTON_CAP / 2, 0],
                     pos=[0, 0, BUTTON_CAP / 2], rgba=[0.85, 0.12, 0.10, 1.0], mass=0.01)

    def button_depth(self, index: int) -> float:
        """How far button ``index``'s cap is pushed down (metres, 0 at rest)."""
        return -float(self.data.qpos[self.model.joint(f"{button_name(index)}_press").qposadr[0]])

    def _object(self, spec, world, obj: ObjectSpec) -> None:
        body = world.add_body(name=obj.name, pos=[obj.position[0], obj.position[1], obj.base_z + 0.001],
                              quat=[math.cos(obj.yaw / 2), 0.0, 0.0, math.sin(obj.yaw / 2)])
        body.add_freejoint(name=f"{obj.name}_free")
        kind, dims = obj.collision
        h = obj.height
        if kind == "box":
            ixx = obj.mass * (dims[1] ** 2 + (h / 2) ** 2) / 3
            iyy = obj.mass * (dims[0] ** 2 + (h / 2) ** 2) / 3
            izz = obj.mass * (dims[0] ** 2 + dims[1] ** 2) / 3
        else:
            ixx = iyy = obj.mass * (3 * dims[0] ** 2 + h**2) / 12
            izz = obj.mass * dims[0] ** 2 / 2
        body.mass, body.ipos, body.inertia, body.explicitinertial = obj.mass, [0, 0, h / 2], [ixx, iyy, izz], True
        mesh = spec.add_mesh(name=f"{obj.name}_mesh", file=obj.mesh)
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
        mat = spec.add_material(name=f"{obj.name}_mat", rgba=list(obj.rgba))
        if obj.texture is not None:
            spec.add_texture(name=f"{obj.name}_tex", type=mujoco.mjtTexture.mjTEXTURE_2D, file=obj.texture)
            mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = f"{obj.name}_tex"
        mat.specular = 0.1
        body.add_geom(name=f"{obj.name}_visual", type=mujoco.mjtGeom.mjGEOM_MESH, meshname=mesh.name,
                      material=mat.name, contype=0, conaffinity=0, group=1, mass=0.0, density=0.0)
        common = dict(group=COLLISION_GROUP, friction=[1.2, 0.02, 0.001], condim=4, rgba=[0, 0, 0, 0])
        if kind == "box":
            body.add_geom(name=f"{obj.name}_collision", type=mujoco.mjtGeom.mjGEOM_BOX,
                          size=[dims[0], dims[1], h / 2], pos=[0, 0, h / 2], **common)
        else:
            body.add_geom(name=f"{obj.name}_collision", type=mujoco.mjtGeom.mjGEOM_CYLINDER,
                          size=[dims[0], h / 2, 0], pos=[0, 0, h / 2], **common)

    def _cameras(self, spec, world, look: Look) -> None:
        centre = np.array([0.0, 0.1, TABLE_Z + 0.02])
        poses = {"front": (np.array(look.front_eye), np.array(look.front_target)),
                 "left": (np.array([-0.85, 0.2, 1.32]), centre),
                 "right": (np.array([0.85, 0.2, 1.32]), centre)}
        for name in ("left", "right", "front"):
            eye, target = poses[name]
            world.add_camera(name=name, pos=list(eye), quat=list(_look_at_quat(eye, target)), fovy=50.0)
        # Wrist camera: on the hand, looking along the approach axis past the fingers.
        spec.body("panda_hand").add_camera(name="wrist", pos=[0.06, 0.0, 0.02], fovy=70.0,
                                           quat=list(_wrist_quat()))

    # ------------------------------------------------------------------ control
    def settle(self, steps_without_gravity: int = 60, steps_with_gravity: int = 240) -> None:
        """VLABench's settle phase: let contacts resolve without gravity, then with it (arm held at home)."""
        m, d = self.model, self.data
        gravity = m.opt.gravity.copy()
        m.opt.gravity[:] = 0.0
        mujoco.mj_step(m, d, nstep=steps_without_gravity)
        d.qvel[:] = 0.0
        m.opt.gravity[:] = gravity
        mujoco.mj_step(m, d, nstep=steps_with_gravity)

    def apply_target(self, pos: np.ndarray, rpy: np.ndarray, close: bool) -> None:
        """Drive the TCP toward the absolute world pose (``pos``, roll-pitch-yaw) and simulate one control step."""
        m, d = self.model, self.data
        self.target_pos = np.clip(np.asarray(pos, float), WORKSPACE_LOW, WORKSPACE_HIGH)
        self.target_rpy = np.asarray(rpy, float).copy()
        self.gripper_closed = bool(close)
        q_goal = self.ik.solve(d.qpos, self.target_pos, euler_to_matrix(*self.target_rpy))
        q_from = d.ctrl[:7].copy()
        q_goal = q_from + np.clip(q_goal - q_from, -JOINT_STEP, JOINT_STEP)
        d.ctrl[7] = 0.0 if self.gripper_closed else FINGER_OPEN
        ramp = SUBSTEPS // 2  # interpolate joint targets over the first half of the step: no jerk
        for k in range(ramp):
            d.ctrl[:7] = q_from + (q_goal - q_from) * (k + 1) / ramp
            mujoco.mj_step(m, d)
        mujoco.mj_step(m, d, nstep=SUBSTEPS - ramp)

    # ------------------------------------------------------------------ state
    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The TCP position (world) and rotation matrix."""
        return self.data.site_xpos[self.tcp_site].copy(), self.data.site_xmat[self.tcp_site].reshape(3, 3).copy()

    def gripper_opening(self) -> float:
        """Distance between the fingers (0 closed, 0.08 open)."""
        return float(self.data.qpos[self._finger_q].sum())

    def joints(self) -> np.ndarray:
        """Seven arm joints and two finger joints."""
        return np.concatenate([self.data.qpos[self._arm_q], self.data.qpos[self._finger_q]]).astype(np.float32)

    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Bottom-centre position and rotation matrix of a free object."""
        i = self.body_ids[name]
        return self.data.xpos[i].copy(), self.data.xmat[i].reshape(3, 3).copy()

    def _contacts_with(self, body: int) -> tuple[bool, bool, bool]:
        """(left finger touches, right finger touches, any robot geom touches) for ``body``."""
        m, d = self.model, self.data
        left = right = robot = False
        for c in d.contact[: d.ncon]:
            b1, b2 = m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]
            if body not in (b1, b2):
                continue
            other_geom = c.geom2 if b1 == body else c.geom1
            if m.geom_bodyid[other_geom] in self._robot_bodies:
                robot = True
                if other_geom in self._finger_geoms:
                    left |= other_geom in self._left_geoms
                    right |= other_geom not in self._left_geoms
        return left, right, robot

    def grasped(self, name: str) -> bool:
        """Both fingers touch the object."""
        left, right, _ = self._contacts_with(self.body_ids[name])
        return left and right

    def touching(self, name: str) -> bool:
        """Any robot geom touches the object."""
        return self._contacts_with(self.body_ids[name])[2]

    # ------------------------------------------------------------------ rendering
    def render(self, camera: str, depth: bool = False, segmentation: bool = False) -> np.ndarray:
        """One camera's RGB (uint8 H×W×3), depth (metres) or body-id map (int32, -1 = background)."""
        r = self._renderer
        r.update_scene(self.data, camera=camera, scene_option=self._option)
        if depth:
            r.enable_depth_rendering()
            out = r.render().astype(np.float32)
            r.disable_depth_rendering()
            return out
        if segmentation:
            r.enable_segmentation_rendering()
            seg = r.render()
            r.disable_segmentation_rendering()
            ids = np.full(seg.shape[:2], -1, np.int32)
            geom = (seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)) & (seg[..., 0] >= 0)
            ids[geom] = self.model.geom_bodyid[seg[..., 0][geom]]
            return ids
        return r.render().copy()

    def camera_matrices(self, camera: str) -> tuple[np.ndarray, np.ndarray, float]:
        """(position, rotation camera→world, vertical fov in degrees) of a camera now."""
        c = self.model.camera(camera).id
        return self.data.cam_xpos[c].copy(), self.data.cam_xmat[c].reshape(3, 3).copy(), float(self.model.cam_fovy[c])

    def project(self, camera: str, points: np.ndarray) -> np.ndarray:
        """World xyz points (N×3) → the camera's image coordinates (N×2) in [-1, 1]: x to the right, y downwards,
        ±1 at the image edges (square images; the convention of ``envs.manipulation.scene.project_to_image``).
        Training labels only, never a policy input."""
        pos, rot, fovy = self.camera_matrices(camera)
        cam = (np.asarray(points, np.float64).reshape(-1, 3) - pos) @ rot  # camera frame: looks along -z, y up
        f = 1.0 / math.tan(math.radians(fovy) / 2)
        depth = -cam[:, 2:3]
        return np.concatenate([f * cam[:, 0:1] / depth, -f * cam[:, 1:2] / depth], axis=1)

    def close(self) -> None:
        """Free the GL context (idempotent)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def button_name(index: int) -> str:
    """MuJoCo body name of the button in front of object ``index``."""
    return f"button{index}"


def _wrist_quat() -> np.ndarray:
    # Hand frame: z points from the hand toward the fingertips. The camera looks along its -z, so turn it half a
    # turn about x (looking along the hand's +z), then tilt a little toward the fingers.
    quat = np.zeros(4)
    mat = euler_to_matrix(math.pi + 0.35, 0.0, -math.pi / 2)
    mujoco.mju_mat2Quat(quat, mat.reshape(9))
    return quat
