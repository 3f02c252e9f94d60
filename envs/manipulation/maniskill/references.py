"""Reference images of a personal object rendered by SAPIEN, the renderer of the ManiSkill3 scene it is met in.

Like the PyBullet suite's :func:`envs.manipulation.personal.render_references` — "phone photos" of the object
alone on a neutral surface, from views spread around it, with varied elevation, distance and light — but drawn by
SAPIEN (lavapipe) in a scene of their own, so nothing of the evaluation scene (its table, robot or other objects)
leaks into them and they share the evaluation images' shading. The same object always gets the same set.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from envs.errors import ConfigError
from envs.manipulation.objects import ObjectInstance, instance_mesh_path
from envs.manipulation.personal import PHONE_ELEVATION
from envs.manipulation.scene import texture_file


def _look_at(eye: np.ndarray, target: np.ndarray) -> tuple[list[float], list[float]]:
    """SAPIEN camera pose (x forward, z up) at ``eye`` looking at ``target``: position and quaternion (w, x, y, z)."""
    from scipy.spatial.transform import Rotation

    fwd = (target - eye) / np.linalg.norm(target - eye)
    left = np.cross([0.0, 0.0, 1.0], fwd)
    left /= np.linalg.norm(left)
    up = np.cross(fwd, left)
    x, y, z, w = Rotation.from_matrix(np.stack([fwd, left, up], axis=1)).as_quat()
    return [float(v) for v in eye], [float(w), float(x), float(y), float(z)]


def _light_pose(direction: np.ndarray):
    """A directional light's pose: SAPIEN lights shine along their x axis."""
    import sapien

    p, q = _look_at(np.zeros(3), np.asarray(direction, float))
    return sapien.Pose(p=p, q=q)


_STUDIOS: dict[int, tuple[Any, Any, Any, Any]] = {}


def _studio(size: int) -> tuple[Any, Any, Any, Any]:
    """The process's reference studio for ``size``-pixel images: scene, camera, light and ground material.

    Kept for the life of the process: on lavapipe the first picture of a new camera costs ~6 CPU-seconds of shader
    set-up once the last camera has gone, against milliseconds for the next picture of a live one.
    """
    import sapien

    if size not in _STUDIOS:
        scene = sapien.Scene([sapien.physx.PhysxCpuSystem(), sapien.render.RenderSystem(sapien.Device("cpu"))])
        ground_material = sapien.render.RenderMaterial(base_color=[0.7, 0.7, 0.7, 1.0])
        ground = scene.create_actor_builder()
        ground.add_box_visual(sapien.Pose(p=[0, 0, -0.01]), half_size=[2, 2, 0.01], material=ground_material)
        ground.build_static(name="ground")
        camera = scene.add_camera("reference", size, size, math.radians(40.0), 0.01, 3.0)
        light = scene.add_directional_light([0.3, 0.2, -1.0], [1.0, 1.0, 1.0])
        _STUDIOS[size] = (scene, camera, light, ground_material)
    return _STUDIOS[size]


def render_references(instance: ObjectInstance, texture: np.ndarray, size: int = 224, count: int = 4,
                      elevation: tuple[float, float] = PHONE_ELEVATION, salt: str = "") -> list[np.ndarray]:
    """``count`` (1-16) uint8 H×W×3 views of the object alone; needs the Vulkan driver active (SAPIEN imported)."""
    import sapien

    if not 1 <= count <= 16:
        raise ConfigError(f"reference count must be 1-16, got {count}")
    seed = int(hashlib.sha256((instance.instance_id + salt).encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    mesh, tex = instance_mesh_path(instance), texture_file(texture)
    extent = max(instance.height, 2 * instance.radius)
    from mani_skill.render.shaders import PREBUILT_SHADER_CONFIGS, set_shader_pack

    # the evaluation camera's shader (ManiSkill's "minimal"), set here too: SAPIEN's shader choice is global
    set_shader_pack(PREBUILT_SHADER_CONFIGS["minimal"])
    scene, camera, light, ground_material = _studio(size)
    builder = scene.create_actor_builder()
    material = sapien.render.RenderMaterial(base_color=[1.0, 1.0, 1.0, 1.0], roughness=0.7)
    material.base_color_texture = sapien.render.RenderTexture2D(tex)
    builder.add_visual_from_file(mesh, material=material)
    obj = builder.build_kinematic(name="object")
    images = []
    for k in range(count):
        grey = float(rng.uniform(0.55, 0.8))
        ground_material.base_color = [*np.clip(grey + rng.uniform(-0.04, 0.04, 3), 0, 1), 1.0]
        yaw = float(rng.uniform(-math.pi, math.pi))
        obj.set_pose(sapien.Pose(q=[math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)]))
        # light: an ambient term and one directional light from a random side, slightly warm or cool
        scene.set_ambient_light([float(rng.uniform(0.35, 0.55))] * 3)
        warm = float(rng.uniform(-0.12, 0.12))
        direction = np.array([rng.uniform(-1, 1), rng.uniform(-1, 1), -rng.uniform(0.6, 1.5)])
        light.set_pose(_light_pose(direction))
        light.color = [1.0, 1.0 - abs(warm) / 2, 1.0 - warm]
        azimuth = 2 * math.pi * k / count + float(rng.uniform(-0.4, 0.4))
        elev = float(rng.uniform(*elevation))
        dist = extent * float(rng.uniform(2.2, 2.9)) + 0.05
        target = np.array([0.0, 0.0, instance.height * 0.45])
        eye = target + dist * np.array([math.cos(elev) * math.cos(azimuth), math.cos(elev) * math.sin(azimuth),
                                        math.sin(elev)])
        p, q = _look_at(eye, target)
        camera.entity.set_pose(sapien.Pose(p=p, q=q))
        scene.update_render()
        camera.take_picture()
        rgba = camera.get_picture("Color")  # uint8 RGBA under the minimal shader
        images.append(np.ascontiguousarray(rgba[..., :3], dtype=np.uint8))
    scene.remove_entity(obj)
    return images
