"""ManiSkill3 (SAPIEN 3) tabletop tasks as Embodia manipulation envs, on a CPU Vulkan driver the project installs.

Importing this package registers ``Embodia/ManiSkill-<Task>-v0`` gymnasium ids (e.g.
``Embodia/ManiSkill-PickCube-v0``; keywords ``image_size`` and ``max_steps``) and the personalized selection task
``Embodia/PersonalizedManiSkill-PickMy-v0`` (``personalized.py``) without importing SAPIEN;
``gym.make`` loads it, and fails with a one-line error naming the fix when the Vulkan driver (``driver.py``) or
the ``mani-skill`` package is missing.
"""

from envs.registration import register_family

TASK_IDS = ("PickCube-v1", "StackCube-v1", "PushCube-v1", "PullCube-v1")
PERSONAL_TASKS = ("pick_my",)  # personalized.TASKS (kept here so registering needs no SAPIEN import)


def gym_id(task: str) -> str:
    """The gymnasium id of a ManiSkill task (``PickCube-v1`` → ``Embodia/ManiSkill-PickCube-v0``)."""
    return f"Embodia/ManiSkill-{task.split('-v')[0]}-v0"


register_family("ManiSkill", TASK_IDS, "envs.manipulation.maniskill.env:ManiSkillEnv", id_of=gym_id)
register_family("PersonalizedManiSkill", PERSONAL_TASKS, "envs.manipulation.maniskill.personalized:make_gym_env")
