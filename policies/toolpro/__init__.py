"""ToolPro's program writers: they build the tool programs that the runtime in :mod:`envs.services.programs` checks,
compiles and runs next to the services.

- :mod:`planner`: the deterministic constructor for the workflow templates.
- :mod:`constructor`: constraint-guided construction, one grammar decision at a time.
- :mod:`profile`: the profile-driven choice between a program and stepwise calling.
"""
