"""PyBullet tabletop manipulation: the Personalized-SIMPLER tasks (``envs.manipulation.env``) and their parts.

Importing this package registers gymnasium ids ``Embodia/PersonalizedSimpler-<Task>-v0`` (e.g.
``Embodia/PersonalizedSimpler-FractalPickMy-v0``, ``Embodia/GenericSimpler-BridgePutOn-v0``); options are passed
as ``gym.make(id, options={...})``.
"""

import gymnasium as gym

from envs.manipulation.tasks import GENERIC_TASKS, PERSONALIZED_TASKS


def gym_id(task: str) -> str:
    """The gymnasium id of a task name (``fractal_pick_my`` → ``Embodia/PersonalizedSimpler-FractalPickMy-v0``)."""
    family = "PersonalizedSimpler" if task in PERSONALIZED_TASKS else "GenericSimpler"
    return f"Embodia/{family}-{''.join(w.capitalize() for w in task.split('_'))}-v0"


for _task in [*PERSONALIZED_TASKS, *GENERIC_TASKS]:
    if gym_id(_task) not in gym.registry:
        gym.register(gym_id(_task), entry_point="envs.manipulation.env:PersonalizedSimplerEnv",
                     kwargs={"task": _task}, max_episode_steps=None)
