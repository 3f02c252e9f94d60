"""Web-service environments for tool-using agents: SQLite-backed MCP services with injectable faults.

Three services (``travel``, ``orders``, ``tickets``) each own a SQLite database, expose read-only and
state-modifying tools with JSON-schema'd inputs and outputs, and are served over MCP (stdio) by
:mod:`envs.services.server`. :mod:`envs.services.workflows` defines the workflow tasks and their checkable final
states; :mod:`envs.services.env` wraps one task as a gymnasium env for the ``toolpro`` suite.

Importing this package registers one gymnasium id per workflow task, ``Embodia/ToolPro-<Task>-v0`` (e.g.
``gym.make("Embodia/ToolPro-CancelOpen10-v0", rtt_ms=0)``; keywords: ``envs.services.env.WorkflowEnvOptions``).
"""

from envs.registration import register_family
from envs.services.tools import EFFECTS, Effect, ServiceError, ToolSpec
from envs.services.workflows import TASKS

SERVICES = ("travel", "orders", "tickets")

register_family("ToolPro", TASKS, "envs.services.env:make_workflow_env")

__all__ = ["EFFECTS", "SERVICES", "Effect", "ServiceError", "ToolSpec"]
