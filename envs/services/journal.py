"""The idempotency journal: one row per completed keyed write, stored in the service's own database.

A keyed write and its journal row commit in the same SQLite transaction, so after any crash either both exist or
neither does. A repeated call with a key that is already journaled returns the stored result and changes nothing:
completed writes are replayed from the journal, never re-executed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from envs.services.tools import ServiceError

SCHEMA = "CREATE TABLE IF NOT EXISTS _journal (key TEXT PRIMARY KEY, tool TEXT, args_sha TEXT, result TEXT);"


def args_digest(tool: str, args: dict[str, Any]) -> str:
    """A stable digest of a call (key order does not matter)."""
    return hashlib.sha256(json.dumps([tool, args], sort_keys=True).encode()).hexdigest()[:32]


def lookup(conn: sqlite3.Connection, key: str, tool: str, args: dict[str, Any]) -> Any | None:
    """The stored result for ``key``, or None; a key reused for a different call is a conflict."""
    row = conn.execute("SELECT tool, args_sha, result FROM _journal WHERE key=?", (key,)).fetchone()
    if row is None:
        return None
    if row[0] != tool or row[1] != args_digest(tool, args):
        raise ServiceError("conflict", f"idempotency key {key!r} was already used for a different call ({row[0]})")
    return json.loads(row[2])


def record(conn: sqlite3.Connection, key: str, tool: str, args: dict[str, Any], result: Any) -> None:
    """Journal a completed write (inside the caller's open transaction)."""
    conn.execute("INSERT INTO _journal VALUES (?,?,?,?)", (key, tool, args_digest(tool, args), json.dumps(result)))


def entries(conn: sqlite3.Connection) -> int:
    """How many writes are journaled."""
    return int(conn.execute("SELECT COUNT(*) FROM _journal").fetchone()[0])
