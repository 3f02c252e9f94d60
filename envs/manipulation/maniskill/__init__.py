"""ManiSkill3 (SAPIEN 3) tabletop tasks as Embodia manipulation envs, on a CPU Vulkan driver the project installs.

Importing this package registers ``Embodia/ManiSkill-<Task>-v0`` gymnasium ids (e.g. ``Embodia/ManiSkill-PickCube-v0``)
without importing SAPIEN; ``gym.make`` loads it, and exits with a one-line error naming the fix when the Vulkan
driver (``driver.py``) or the ``mani-skill`` package is missing.
"""

import gymnasium as gym

TASK_IDS = ("PickCube-v1", "StackCube-v1", "PushCube-v1", "PullCube-v1")


def gym_id(task: str) -> str:
    """The gymnasium id of a ManiSkill task (``PickCube-v1`` → ``Embodia/ManiSkill-PickCube-v0``)."""
    return f"Embodia/ManiSkill-{task.split('-v')[0]}-v0"


for _task in TASK_IDS:
    if gym_id(_task) not in gym.registry:
        gym.register(gym_id(_task), entry_point="envs.manipulation.maniskill.env:ManiSkillEnv", kwargs={"task": _task})
