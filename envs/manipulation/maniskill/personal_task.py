"""The ManiSkill3 task behind ``personalized_maniskill``: a Panda at a table with *my* object among look-alikes.

Imports SAPIEN, so it is loaded only once the Vulkan driver is active (``personalized.py`` does that). The objects of
an episode come from Embodia's object library (``envs/manipulation/objects.py``): each is built with ManiSkill's
actor builder from the library instance's own mesh (visual, with its texture) and a cylinder or box collision shape
of the instance's size, as the PyBullet suite does. What to build is passed in ``reset(options={"episode": ...})``:
the scene is rebuilt (``reconfigure``) every reset, so each episode can hold other meshes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sapien
import torch
from mani_skill.agents.robots import Panda
from mani_skill.envs.sapien_env import BaseEnv
from mani_skill.sensors.camera import CameraConfig
from mani_skill.utils import sapien_utils
from mani_skill.utils.registration import register_env
from mani_skill.utils.scene_builder.table import TableSceneBuilder
from mani_skill.utils.structs.pose import Pose

from envs.manipulation.objects import ObjectInstance, instance_mesh_path
from envs.manipulation.scene import texture_file

MS_ID = "EmbodiaPickMy-v1"  # the task's id in ManiSkill's own registry
CAMERA_EYE = (0.32, 0.0, 0.36)  # in front of the table, looking back at the robot over the objects
CAMERA_TARGET = (-0.06, 0.0, 0.0)
CAMERA_FOVY = math.radians(56.0)
FRICTION = 1.0  # fingers and objects: a firm grasp on light library objects
LIFT_SUCCESS = 0.05  # metres above the start height, while grasped (as the PyBullet suite's pick)


@dataclass(frozen=True)
class PlacedObject:
    """One object of an episode: the library instance, its print, where it stands and what it is for."""

    instance: ObjectInstance
    texture: np.ndarray
    xy: tuple[float, float]
    yaw: float
    role: str  # "target", "distractor" or "clutter"


def _quat_z(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


@register_env(MS_ID, max_episode_steps=100)
class PickMyObjectEnv(BaseEnv):
    """Pick up the target among the episode's objects (success: grasped and lifted ``LIFT_SUCCESS``)."""

    SUPPORTED_ROBOTS = ["panda"]
    agent: Panda

    def __init__(self, *args: Any, image_size: int = 224, robot_init_qpos_noise: float = 0.02, **kwargs: Any):
        self.image_size = int(image_size)
        self.robot_init_qpos_noise = robot_init_qpos_noise
        self.episode_objects: list[PlacedObject] = []
        self.objects: list[Any] = []  # ManiSkill actors, in the order of episode_objects
        self.start_z: list[float] = []
        super().__init__(*args, robot_uids="panda", **kwargs)

    @property
    def _default_sensor_configs(self):
        pose = sapien_utils.look_at(eye=CAMERA_EYE, target=CAMERA_TARGET)
        n = self.image_size
        return [CameraConfig("base_camera", pose, n, n, CAMERA_FOVY, 0.01, 10)]

    @property
    def _default_human_render_camera_configs(self):
        pose = sapien_utils.look_at(eye=CAMERA_EYE, target=CAMERA_TARGET)
        return CameraConfig("render_camera", pose, 256, 256, CAMERA_FOVY, 0.01, 10)

    def _load_agent(self, options: dict):
        super()._load_agent(options, sapien.Pose(p=[-0.615, 0, 0]))

    def _load_scene(self, options: dict):
        self.table_scene = TableSceneBuilder(self, robot_init_qpos_noise=self.robot_init_qpos_noise)
        self.table_scene.build()
        self.episode_objects = list(options.get("episode", ()))
        material = sapien.physx.PhysxMaterial(FRICTION, FRICTION, 0.0)
        self.objects = []
        for k, obj in enumerate(self.episode_objects):
            self.objects.append(self._build_object(obj, f"object_{k}", material))

    def _build_object(self, obj: PlacedObject, name: str, material: Any) -> Any:
        inst = obj.instance
        builder = self.scene.create_actor_builder()
        render = sapien.render.RenderMaterial(base_color=[1.0, 1.0, 1.0, 1.0], roughness=0.7)
        render.base_color_texture = sapien.render.RenderTexture2D(texture_file(obj.texture))
        builder.add_visual_from_file(instance_mesh_path(inst), material=render)
        # density so that the body weighs the library's mass (the collision volume is the box or cylinder below)
        half_h = inst.height / 2
        if inst.category == "box":
            half = (inst.radius, inst.radius * inst.shape.get("depth", 1.0), half_h)
            volume = 8 * half[0] * half[1] * half[2]
            builder.add_box_collision(sapien.Pose(p=[0, 0, half_h]), half_size=half, material=material,
                                      density=inst.mass / volume)
        else:  # SAPIEN's cylinder runs along x: turned upright; a mug's handle is visual only, as in PyBullet
            volume = math.pi * inst.radius**2 * inst.height
            builder.add_cylinder_collision(sapien.Pose(p=[0, 0, half_h], q=[math.sqrt(0.5), 0, math.sqrt(0.5), 0]),
                                           radius=inst.radius, half_length=half_h, material=material,
                                           density=inst.mass / volume)
        builder.initial_pose = sapien.Pose(p=[obj.xy[0], obj.xy[1], 0.0], q=_quat_z(obj.yaw))
        return builder.build(name=name)

    def _initialize_episode(self, env_idx: torch.Tensor, options: dict):
        with torch.device(self.device):
            self.table_scene.initialize(env_idx)
            for actor, obj in zip(self.objects, self.episode_objects, strict=True):
                actor.set_pose(Pose.create_from_pq(torch.tensor([[obj.xy[0], obj.xy[1], 0.001]]),
                                                   torch.tensor([_quat_z(obj.yaw)])))
            self.start_z = [0.001] * len(self.objects)

    def evaluate(self):
        if not self.objects:
            false = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
            return {"success": false, "is_grasped": false}
        target = self.objects[0]
        grasped = self.agent.is_grasping(target)
        lifted = target.pose.p[:, 2] - self.start_z[0] >= LIFT_SUCCESS
        return {"success": grasped & lifted, "is_grasped": grasped}

    def compute_dense_reward(self, obs: Any, action: torch.Tensor, info: dict):
        return info["success"].float()

    def compute_normalized_dense_reward(self, obs: Any, action: torch.Tensor, info: dict):
        return self.compute_dense_reward(obs, action, info)
