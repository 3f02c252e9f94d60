"""Personalized-VLABench: MuJoCo selection tasks on "my" object with four cameras and absolute EE actions.

``envs.manipulation.vlabench.env.make_env(task, options)`` builds one task; see that module for the API. Needs the
``vlabench`` extra (``mujoco``); rendering uses ``MUJOCO_GL=egl`` unless the variable is already set.
"""
