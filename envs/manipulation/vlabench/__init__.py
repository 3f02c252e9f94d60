"""Personalized-VLABench: MuJoCo selection tasks on "my" object with four cameras and absolute EE actions.

``envs.manipulation.vlabench.env.make_env(task, options)`` builds one task; see that module for the API. Needs the
``vlabench`` extra (``mujoco``); rendering uses ``MUJOCO_GL=egl`` unless the variable is already set.

Importing this package registers one gymnasium id per task, ``Embodia/PersonalizedVLABench-<Task>-v0`` (e.g.
``gym.make("Embodia/PersonalizedVLABench-SelectMyPick-v0", track="in_distribution", image_size=128)``; keywords:
:class:`~envs.manipulation.vlabench.env.VLABenchOptions`); mujoco is imported only by ``make``.
"""

from envs.manipulation.vlabench.tasks import TASKS
from envs.registration import register_family

register_family("PersonalizedVLABench", TASKS, "envs.manipulation.vlabench.env:make_gym_env")
