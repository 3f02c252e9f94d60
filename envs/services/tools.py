"""Tool declarations shared by every service: name, effect type, JSON schemas and the SQL handler."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# pure: computes from its arguments only; read: reads service state; write: modifies state and is NOT safe to repeat
# (needs an idempotency key to be exactly-once); idempotent_write: modifies state, repeating it changes nothing more.
Effect = Literal["pure", "read", "write", "idempotent_write"]
EFFECTS: tuple[str, ...] = ("pure", "read", "write", "idempotent_write")


class ServiceError(Exception):
    """A tool failed for a reason the caller can act on (bad argument, sold out, unknown id, injected fault).

    ``kind`` is one of ``invalid_argument``, ``not_found``, ``conflict``, ``unavailable``, ``timeout``.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class ToolSpec:
    """One tool of a service: its schemas, effect type, and the handler that runs it inside a transaction."""

    name: str
    description: str
    effect: Effect
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    handler: Callable[[sqlite3.Connection, dict[str, Any]], Any]

    def public(self) -> dict[str, Any]:
        """The declaration a client sees (no handler)."""
        return {"name": self.name, "description": self.description, "effect": self.effect,
                "input_schema": self.input_schema, "output_schema": self.output_schema}


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """A closed JSON-schema object with the given required and optional properties."""
    props = {**required, **(optional or {})}
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def array(items: dict[str, Any]) -> dict[str, Any]:
    """A JSON-schema array of ``items``."""
    return {"type": "array", "items": items}


STR = {"type": "string", "minLength": 1, "maxLength": 200}
INT = {"type": "integer"}
POS = {"type": "integer", "minimum": 1, "maximum": 1000}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}


def rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Query rows as plain dicts."""
    cur = conn.execute(sql, params)
    cols = [c[0] for c in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def one(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...], what: str) -> dict[str, Any]:
    """Exactly one row, or ServiceError(not_found) naming ``what``."""
    found = rows(conn, sql, params)
    if not found:
        raise ServiceError("not_found", f"no {what}")
    return found[0]
