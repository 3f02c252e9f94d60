"""Embodia's entry points (``python -m launch.<name>`` and the ``embodia`` console script).

Importing the package first imports pybullet, when it is installed, with native output silenced: pybullet prints
its build banner from C on import, and no entry point may print a third-party banner before its own output.
"""

import importlib.util

if importlib.util.find_spec("pybullet") is not None:
    from sim_benchmarks.cli import quiet_native_output

    with quiet_native_output():
        import pybullet  # noqa: F401
