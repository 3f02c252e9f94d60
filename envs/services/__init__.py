"""Web-service environments for tool-using agents: SQLite-backed MCP services with injectable faults.

Three services (``travel``, ``orders``, ``tickets``) each own a SQLite database, expose read-only and
state-modifying tools with JSON-schema'd inputs and outputs, and are served over MCP (stdio) by
:mod:`envs.services.server`. :mod:`envs.services.workflows` defines the workflow tasks and their checkable final
states; :mod:`envs.services.env` wraps one task as a gymnasium env for the ``toolpro`` suite.
"""

from envs.services.tools import EFFECTS, Effect, ServiceError, ToolSpec

SERVICES = ("travel", "orders", "tickets")

__all__ = ["EFFECTS", "SERVICES", "Effect", "ServiceError", "ToolSpec"]
