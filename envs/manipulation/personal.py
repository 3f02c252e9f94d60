"""Personal objects and their reference sets: a few "phone photos" of the object alone, never a test-scene frame."""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pybullet as p

from envs.errors import ConfigError, choice_error
from envs.manipulation.objects import (
    CATEGORIES,
    LIBRARY,
    ObjectInstance,
    instance_mesh_path,
    instances,
    load_user_texture,
    make_texture,
)


@dataclass(frozen=True)
class PersonalObject:
    """The user's object: a library instance, or a user texture image wrapped on a category mesh."""

    instance: ObjectInstance
    texture: np.ndarray = field(compare=False, hash=False, repr=False)
    source: str = "library"  # "library" or the user texture path

    @classmethod
    def from_library(cls, instance_id: str) -> PersonalObject:
        """A library instance by id (e.g. ``"mug_03"``)."""
        if instance_id not in LIBRARY:
            raise choice_error("personal object", instance_id, sorted(LIBRARY))
        inst = LIBRARY[instance_id]
        return cls(inst, make_texture(inst))

    @classmethod
    def from_texture(cls, path: str | os.PathLike, category: str) -> PersonalObject:
        """A user's object: ``path`` is any image file (wrapped around the body), ``category`` one of CATEGORIES."""
        if category not in CATEGORIES:
            raise choice_error("personal_category", category, CATEGORIES)
        texture = load_user_texture(path)
        template = instances(category, "test")[0]  # a mid-sized body of the category; its appearance is replaced
        digest = hashlib.sha256(texture.tobytes()).hexdigest()[:8]
        inst = ObjectInstance(f"user_{category}_{digest}", category, "custom", "custom", "user", template.radius,
                              template.height, dict(template.shape), "")
        return cls(inst, texture, source=str(path))


@dataclass
class ReferenceSet:
    """The few reference images (uint8 H×W×3) of one personal object, with the views they were taken from."""

    instance_id: str
    images: list[np.ndarray]
    views: list[dict[str, float]]


PHONE_ELEVATION = (0.25, 0.8)  # radians: a hand-held phone photo of an object on a desk
ROBOT_ELEVATION = (0.7, 1.05)  # the range the tabletop cameras look down at the objects from (40-60 degrees)


def render_references(obj: PersonalObject, size: int = 224, count: int = 4,
                      elevation: tuple[float, float] = PHONE_ELEVATION, salt: str = "") -> ReferenceSet:
    """Render ``count`` (1-16; the env's reference sets are 3-5) views of ``obj`` alone on a neutral surface, spread
    around it, varying elevation (radians, within ``elevation``), distance and light.

    Uses its own short-lived DIRECT client, so nothing of the evaluation scene (or its other objects) can leak into
    the references. Deterministic per instance and ``salt``: the same object always gets the same reference set.
    """
    if not 1 <= count <= 16:
        raise ConfigError(f"reference count must be 1-16, got {count}")
    inst = obj.instance
    seed = int(hashlib.sha256((inst.instance_id + salt).encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    c = p.connect(p.DIRECT)
    try:
        images, views = [], []
        mesh = instance_mesh_path(inst)
        from envs.manipulation.scene import texture_file  # local: scene imports this module's siblings only

        for k in range(count):
            p.resetSimulation(physicsClientId=c)
            grey = float(rng.uniform(0.55, 0.8))
            tint = rng.uniform(-0.04, 0.04, 3)
            ground = p.createVisualShape(p.GEOM_BOX, halfExtents=(2, 2, 0.01),
                                         rgbaColor=(*np.clip(grey + tint, 0, 1), 1.0), physicsClientId=c)
            p.createMultiBody(0, -1, ground, basePosition=(0, 0, -0.01), physicsClientId=c)
            vis = p.createVisualShape(p.GEOM_MESH, fileName=mesh, physicsClientId=c)
            yaw = float(rng.uniform(-math.pi, math.pi))
            body = p.createMultiBody(0, -1, vis, basePosition=(0, 0, 0),
                                     baseOrientation=p.getQuaternionFromEuler((0, 0, yaw)), physicsClientId=c)
            tex = p.loadTexture(texture_file(obj.texture), physicsClientId=c)
            p.changeVisualShape(body, -1, textureUniqueId=tex, rgbaColor=(1, 1, 1, 1), physicsClientId=c)
            # Views spread around the object; elevation within the asked range.
            azimuth = 2 * math.pi * k / count + float(rng.uniform(-0.4, 0.4))
            elev = float(rng.uniform(*elevation))
            extent = max(inst.height, 2 * inst.radius)
            dist = extent * float(rng.uniform(2.2, 2.9)) + 0.05
            target = (0.0, 0.0, inst.height * 0.45)
            eye = (dist * math.cos(elev) * math.cos(azimuth), dist * math.cos(elev) * math.sin(azimuth),
                   target[2] + dist * math.sin(elev))
            view = p.computeViewMatrix(eye, target, (0, 0, 1), physicsClientId=c)
            proj = p.computeProjectionMatrixFOV(40.0, 1.0, 0.01, 3.0, physicsClientId=c)
            light = (float(rng.uniform(-1, 1)), float(rng.uniform(-1, 1)), float(rng.uniform(0.6, 1.5)))
            warm = float(rng.uniform(-0.12, 0.12))
            _, _, rgba, _, _ = p.getCameraImage(size, size, view, proj, renderer=p.ER_TINY_RENDERER,
                                                lightDirection=light, lightColor=(1.0, 1.0 - abs(warm) / 2, 1 - warm),
                                                lightAmbientCoeff=float(rng.uniform(0.45, 0.7)),
                                                lightDiffuseCoeff=float(rng.uniform(0.35, 0.6)),
                                                shadow=0, flags=p.ER_NO_SEGMENTATION_MASK, physicsClientId=c)
            images.append(np.asarray(rgba, np.uint8).reshape(size, size, 4)[..., :3].copy())
            views.append({"azimuth": azimuth, "elevation": elev, "distance": dist, "object_yaw": yaw})
        return ReferenceSet(inst.instance_id, images, views)
    finally:
        p.disconnect(physicsClientId=c)
