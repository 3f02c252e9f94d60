"""The support-ticket service: tickets, support agents and comments in SQLite."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from envs.services.tools import INT, STR, ToolSpec, array, obj, one, rows

PRIORITIES = ("low", "normal", "high", "urgent")
STATUSES = ("open", "pending", "closed", "escalated")
TEAMS = ("billing", "tech")

SCHEMA = """
CREATE TABLE tickets (id INTEGER PRIMARY KEY, customer TEXT, team TEXT, priority TEXT, status TEXT, assignee TEXT,
                      age_days INTEGER);
CREATE TABLE agents (name TEXT PRIMARY KEY, team TEXT, load INTEGER);
CREATE TABLE comments (id INTEGER PRIMARY KEY AUTOINCREMENT, ticket_id INTEGER, body TEXT);
"""


def seed(conn: sqlite3.Connection, rng: np.random.Generator) -> None:
    """120 tickets over both teams and all priorities, six agents per team with random load."""
    for team in TEAMS:
        for k in range(6):
            conn.execute("INSERT INTO agents VALUES (?,?,?)", (f"{team}-{k}", team, int(rng.integers(0, 8))))
    for i in range(1, 121):
        conn.execute("INSERT INTO tickets VALUES (?,?,?,?,?,NULL,?)",
                     (i, f"c{int(rng.integers(200)):03d}", TEAMS[int(rng.integers(2))],
                      PRIORITIES[int(rng.choice(4, p=[0.3, 0.4, 0.2, 0.1]))],
                      STATUSES[int(rng.choice(2, p=[0.6, 0.4]))], int(rng.integers(0, 30))))


def list_tickets(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    sql, params = "SELECT id, team, priority, age_days, assignee FROM tickets WHERE status=?", [a["status"]]
    for key in ("team", "priority"):
        if key in a:
            sql += f" AND {key}=?"
            params.append(a[key])
    return {"tickets": rows(conn, sql + " ORDER BY id LIMIT ?", (*params, a.get("limit", 100)))}


def get_ticket(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return one(conn, "SELECT * FROM tickets WHERE id=?", (a["ticket_id"],), f"ticket {a['ticket_id']}")


def list_agents(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return {"agents": rows(conn, "SELECT name, load FROM agents WHERE team=? ORDER BY load, name", (a["team"],))}


def assign_ticket(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    ticket = get_ticket(conn, a)
    one(conn, "SELECT name FROM agents WHERE name=?", (a["agent"],), f"agent {a['agent']}")
    conn.execute("UPDATE agents SET load = load + 1 WHERE name=?", (a["agent"],))  # not safe to repeat
    conn.execute("UPDATE tickets SET assignee=? WHERE id=?", (a["agent"], ticket["id"]))
    return {"ticket_id": ticket["id"], "agent": a["agent"]}


def add_comment(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    ticket = get_ticket(conn, a)
    cur = conn.execute("INSERT INTO comments (ticket_id, body) VALUES (?, ?)", (ticket["id"], a["body"]))
    return {"comment_id": int(cur.lastrowid or 0)}


def _set(conn: sqlite3.Connection, a: dict[str, Any], status: str, priority: str | None = None) -> dict[str, Any]:
    ticket = get_ticket(conn, a)
    conn.execute("UPDATE tickets SET status=?, priority=? WHERE id=?", (status, priority or ticket["priority"],
                                                                       ticket["id"]))
    return {"ticket_id": ticket["id"], "status": status}


def close_ticket(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return _set(conn, a, "closed")


def escalate_ticket(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return _set(conn, a, "escalated", "urgent")


TICKET_ID = obj({"ticket_id": INT})
STATUS_OUT = obj({"ticket_id": INT, "status": STR})
TEAM = {"type": "string", "enum": list(TEAMS)}
# What list_tickets returns per ticket (the columns of its SELECT); declared so program checking and construction
# know the fields (assignee is null while unassigned).
TICKET_ROW = obj({"id": INT, "team": STR, "priority": STR, "age_days": INT,
                  "assignee": {"type": ["string", "null"]}})
TOOLS = (
    ToolSpec("list_tickets", "Tickets in a status, optionally of one team and priority.", "read",
             obj({"status": {"type": "string", "enum": list(STATUSES)}},
                 {"team": TEAM, "priority": {"type": "string", "enum": list(PRIORITIES)},
                  "limit": {"type": "integer", "minimum": 1, "maximum": 200}}),
             obj({"tickets": array(TICKET_ROW)}), list_tickets),
    ToolSpec("get_ticket", "One ticket.", "read", TICKET_ID, {"type": "object"}, get_ticket),
    ToolSpec("list_agents", "Support agents of a team, least loaded first.", "read", obj({"team": TEAM}),
             obj({"agents": array(obj({"name": STR, "load": INT}))}), list_agents),
    ToolSpec("assign_ticket", "Assign a ticket to an agent (adds one to the agent's load).", "write",
             obj({"ticket_id": INT, "agent": STR}), obj({"ticket_id": INT, "agent": STR}), assign_ticket),
    ToolSpec("add_comment", "Add a comment to a ticket.", "write", obj({"ticket_id": INT, "body": STR}),
             obj({"comment_id": INT}), add_comment),
    ToolSpec("close_ticket", "Close a ticket.", "idempotent_write", TICKET_ID, STATUS_OUT, close_ticket),
    ToolSpec("escalate_ticket", "Escalate a ticket (priority becomes urgent).", "idempotent_write", TICKET_ID,
             STATUS_OUT, escalate_ticket),
)
