"""PyBullet tabletop manipulation: the Personalized-SIMPLER tasks (``envs.manipulation.env``) and their parts.

Importing this package registers gymnasium ids ``Embodia/PersonalizedSimpler-<Task>-v0`` (e.g.
``Embodia/PersonalizedSimpler-FractalPickMy-v0``, ``Embodia/GenericSimpler-BridgePutOn-v0``); options
(:class:`envs.manipulation.env.SimplerConfig`) are keywords, ``gym.make(id, image_size=96)``, or
``gym.make(id, options={...})``. ``import envs.manipulation.vlabench`` adds Personalized-VLABench's ids.
"""

from envs.manipulation.tasks import GENERIC_TASKS, PERSONALIZED_TASKS
from envs.registration import register_family


def gym_id(task: str) -> str:
    """The gymnasium id of a task name (``fractal_pick_my`` → ``Embodia/PersonalizedSimpler-FractalPickMy-v0``)."""
    family = "PersonalizedSimpler" if task in PERSONALIZED_TASKS else "GenericSimpler"
    return f"Embodia/{family}-{''.join(w.capitalize() for w in task.split('_'))}-v0"


register_family("PersonalizedSimpler", PERSONALIZED_TASKS, "envs.manipulation.env:make_gym_env", id_of=gym_id)
register_family("GenericSimpler", GENERIC_TASKS, "envs.manipulation.env:make_gym_env", id_of=gym_id)
