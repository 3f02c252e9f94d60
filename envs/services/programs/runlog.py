"""The executor's run log: every call a program run made, by (run id, call number), in the service's database.

Idempotency keys make a repeated *write* harmless, but a re-run program also repeats its *reads*, and a read made
after the crash can see the crashed run's own writes (the first paid order is now shipped, an agent's load went
up) and steer the program down another path. Replaying a run therefore answers its first calls from this log —
reads, writes and errors alike — so the re-run makes the same decisions, and only calls the crashed run never
finished reach the service (writes among them still carry their keys, which covers a crash between a write's
commit and its log row).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from envs.services.journal import args_digest

SCHEMA = ("CREATE TABLE IF NOT EXISTS _runlog (run_id TEXT, seq INTEGER, digest TEXT, outcome TEXT, "
          "PRIMARY KEY (run_id, seq))")


class ReplayDiverged(Exception):
    """A re-run asked for a different call than the logged run at the same position."""


def ensure(conn: sqlite3.Connection) -> None:
    """Create the log table if this database has none yet."""
    conn.execute(SCHEMA)


def lookup(conn: sqlite3.Connection, run_id: str, seq: int, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """The logged outcome (``{"result": ...}`` or ``{"error": [kind, message]}``) of call ``seq``, if any."""
    row = conn.execute("SELECT digest, outcome FROM _runlog WHERE run_id=? AND seq=?", (run_id, seq)).fetchone()
    if row is None:
        return None
    if row[0] != args_digest(tool, args):
        raise ReplayDiverged(f"run {run_id} call {seq} was not {tool} with these arguments")
    return json.loads(row[1])


def record(conn: sqlite3.Connection, run_id: str, seq: int, tool: str, args: dict[str, Any],
           outcome: dict[str, Any]) -> None:
    """Log one call's outcome (its own transaction: the connection is in autocommit mode)."""
    conn.execute("INSERT OR REPLACE INTO _runlog VALUES (?,?,?,?)",
                 (run_id, seq, args_digest(tool, args), json.dumps(outcome)))


def progress(conn: sqlite3.Connection, run_id: str) -> int:
    """How many calls of run ``run_id`` are logged (a resend after a crash continues after them)."""
    return int(conn.execute("SELECT COUNT(*) FROM _runlog WHERE run_id=?", (run_id,)).fetchone()[0])
