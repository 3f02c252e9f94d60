"""The workflow tasks: intents over one service, with the final database state they must produce.

Each task is a template with parameters (e.g. "ship the first 24 paid orders, carrier by weight"). Its
``reference`` applies the intended effects directly in SQL to a fresh copy of the episode's seeded database, written
independently of any agent or program; an episode succeeds when every business table of the service ends exactly
equal to the reference (so duplicated, lost or partial effects all fail). Sizes run from 1 to 50 tool calls and
use loops, branches, parallel fan-out/join, retries and compensation.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envs.errors import choice_error
from envs.services.runtime import seed_connection
from envs.services.tools import rows


@dataclass(frozen=True)
class WorkflowTask:
    """One task: its service, template, parameters, a one-line instruction and the number of calls it needs
    on the default data (``calls_hint``, approximate for data-dependent templates)."""

    name: str
    service: str
    template: str
    params: dict[str, Any] = field(hash=False)
    instruction: str
    calls_hint: int


# ------------------------------------------------------------------------------------------- reference effects
def _book_flight(conn: sqlite3.Connection, p: dict[str, Any], traveller: str) -> int | None:
    free = rows(conn, "SELECT id FROM flights WHERE origin=? AND dest=? AND day=? AND seats>0 ORDER BY price, id",
                (p["origin"], p["dest"], p["day"]))
    if not free:
        return None
    conn.execute("UPDATE flights SET seats=seats-1 WHERE id=?", (free[0]["id"],))
    cur = conn.execute("INSERT INTO bookings (kind, item_id, traveller, nights, status) VALUES "
                       "('flight',?,?,0,'active')", (free[0]["id"], traveller))
    return int(cur.lastrowid or 0)


def _book_hotel(conn: sqlite3.Connection, city: str, max_price: int, traveller: str, nights: int) -> bool:
    free = rows(conn, "SELECT id FROM hotels WHERE city=? AND price<=? AND rooms>0 ORDER BY price, id",
                (city, max_price))
    if not free:
        return False
    conn.execute("UPDATE hotels SET rooms=rooms-1 WHERE id=?", (free[0]["id"],))
    conn.execute("INSERT INTO bookings (kind, item_id, traveller, nights, status) VALUES ('hotel',?,?,?,'active')",
                 (free[0]["id"], traveller, nights))
    return True


def ref_cheapest_flight(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    _book_flight(conn, p, p["traveller"])


def ref_group_flights(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    for t in p["travellers"]:
        _book_flight(conn, p, t)


def ref_trip(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    booking = _book_flight(conn, p, p["traveller"])
    if booking is None:
        return
    if not _book_hotel(conn, p["city"], p["max_price"], p["traveller"], p["nights"]):  # compensate the flight
        flight = rows(conn, "SELECT item_id FROM bookings WHERE id=?", (booking,))[0]["item_id"]
        conn.execute("UPDATE flights SET seats=seats+1 WHERE id=?", (flight,))
        conn.execute("UPDATE bookings SET status='cancelled' WHERE id=?", (booking,))


def ref_group_trip(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    for t in p["travellers"]:
        if _book_flight(conn, p, t) is not None:
            _book_hotel(conn, p["city"], 10**9, t, p["nights"])


def _carrier(weight: int) -> str:
    return "freight" if weight > 40 else "courier" if weight > 15 else "post"


def ref_ship_paid(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    orders = rows(conn, "SELECT o.id, COALESCE(SUM(l.qty * pr.weight), 0) AS weight FROM orders o LEFT JOIN lines l "
                  "ON l.order_id = o.id LEFT JOIN products pr ON pr.sku = l.sku WHERE o.status='paid' GROUP BY o.id "
                  "ORDER BY o.id LIMIT ?", (p["limit"],))
    for o in orders:
        conn.execute("UPDATE orders SET status='shipped' WHERE id=?", (o["id"],))
        conn.execute("INSERT INTO shipments (order_id, carrier) VALUES (?, ?)", (o["id"], _carrier(o["weight"])))


def ref_basket(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    stock = {s: rows(conn, "SELECT stock FROM products WHERE sku=?", (s,))[0]["stock"] for s in p["skus"]}
    wanted = [s for s in p["skus"] if stock[s] >= p["qty"]]
    if not wanted:
        return
    order = conn.execute("INSERT INTO orders (customer, status) VALUES (?, 'open')", (p["customer"],)).lastrowid
    for s in wanted:
        conn.execute("UPDATE products SET stock=stock-? WHERE sku=?", (p["qty"], s))
        conn.execute("INSERT INTO lines (order_id, sku, qty) VALUES (?,?,?)", (order, s, p["qty"]))
    conn.execute("UPDATE orders SET status='paid' WHERE id=?", (order,))


def ref_cancel_open(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    for o in rows(conn, "SELECT id FROM orders WHERE status='open' ORDER BY id LIMIT ?", (p["limit"],)):
        for line in rows(conn, "SELECT sku, qty FROM lines WHERE order_id=?", (o["id"],)):
            conn.execute("UPDATE products SET stock=stock+? WHERE sku=?", (line["qty"], line["sku"]))
        conn.execute("UPDATE orders SET status='cancelled' WHERE id=?", (o["id"],))


def ref_triage(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    tickets = rows(conn, "SELECT id, assignee FROM tickets WHERE status='open' AND team=? AND priority=? ORDER BY id "
                   "LIMIT ?", (p["team"], p["priority"], p["limit"]))
    for t in tickets:
        if t["assignee"] is not None:
            continue
        agent = rows(conn, "SELECT name FROM agents WHERE team=? ORDER BY load, name", (p["team"],))[0]["name"]
        conn.execute("UPDATE agents SET load=load+1 WHERE name=?", (agent,))
        conn.execute("UPDATE tickets SET assignee=? WHERE id=?", (agent, t["id"]))
        conn.execute("INSERT INTO comments (ticket_id, body) VALUES (?, ?)", (t["id"], f"assigned to {agent}"))


def ref_close_stale(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    for t in rows(conn, "SELECT id, age_days FROM tickets WHERE status='pending' AND team=? ORDER BY id LIMIT ?",
                  (p["team"], p["limit"])):
        if t["age_days"] >= p["min_age"]:
            conn.execute("INSERT INTO comments (ticket_id, body) VALUES (?, ?)",
                         (t["id"], f"closed after {t['age_days']} days pending"))
            conn.execute("UPDATE tickets SET status='closed' WHERE id=?", (t["id"],))


def ref_escalate_urgent(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    for t in rows(conn, "SELECT id FROM tickets WHERE status='open' AND team=? AND priority='urgent' ORDER BY id "
                  "LIMIT ?", (p["team"], p["limit"])):
        conn.execute("UPDATE tickets SET status='escalated', priority='urgent' WHERE id=?", (t["id"],))


def ref_comment(conn: sqlite3.Connection, p: dict[str, Any]) -> None:
    conn.execute("INSERT INTO comments (ticket_id, body) VALUES (?, ?)", (p["ticket"], p["body"]))


REFERENCES: dict[str, Callable[[sqlite3.Connection, dict[str, Any]], None]] = {
    "cheapest_flight": ref_cheapest_flight, "group_flights": ref_group_flights, "trip": ref_trip,
    "group_trip": ref_group_trip, "ship_paid": ref_ship_paid, "basket": ref_basket, "cancel_open": ref_cancel_open,
    "triage": ref_triage, "close_stale": ref_close_stale, "escalate_urgent": ref_escalate_urgent,
    "comment": ref_comment,
}
SERVICE_OF = {"cheapest_flight": "travel", "group_flights": "travel", "trip": "travel", "group_trip": "travel",
              "ship_paid": "orders", "basket": "orders", "cancel_open": "orders", "triage": "tickets",
              "close_stale": "tickets", "escalate_urgent": "tickets", "comment": "tickets"}


# ------------------------------------------------------------------------------------------------- task list
def _names(n: int) -> list[str]:
    return [f"traveller-{i:02d}" for i in range(n)]


def _skus(n: int) -> list[str]:
    cats = ("BOO", "GAR", "KIT", "TOY")
    return [f"{cats[i % 4]}-{i // 4:03d}" for i in range(n)]


def _build() -> dict[str, WorkflowTask]:
    out: list[WorkflowTask] = []

    def add(name: str, template: str, params: dict[str, Any], instruction: str, calls: int) -> None:
        out.append(WorkflowTask(name, SERVICE_OF[template], template, params, instruction, calls))

    for o, d, day in (("AMS", "BER", 1), ("LIS", "PAR", 3), ("ROM", "MAD", 6)):
        add(f"cheapest_flight_{o}_{d}", "cheapest_flight", {"traveller": "ann", "origin": o, "dest": d, "day": day},
            f"book ann on the cheapest flight with a free seat {o}->{d} on day {day}", 2)
    for n in (1, 3, 6, 12, 24):
        add(f"group_flights_{n}", "group_flights", {"travellers": _names(n), "origin": "PAR", "dest": "ROM", "day": 2},
            f"book each of {n} travellers on the cheapest free flight PAR->ROM on day 2", 2 * n)
    for i, (city, cap) in enumerate((("BER", 300), ("LIS", 80), ("AMS", 120))):
        add(f"trip_{i}", "trip", {"traveller": f"tripper-{i}", "origin": "MAD", "dest": city, "day": 4, "city": city,
                                  "nights": 3, "max_price": cap},
            f"book a flight MAD->{city} and a hotel there under {cap}/night; if no hotel, cancel the flight", 4)
    for n in (2, 5, 12):
        add(f"group_trip_{n}", "group_trip", {"travellers": _names(n), "origin": "BER", "dest": "LIS", "day": 5,
                                              "city": "LIS", "nights": 2},
            f"for {n} travellers book flight BER->LIS on day 5 and a hotel in LIS (check both first)", 2 + 4 * n)
    for k in (1, 4, 9, 19, 24, 49):
        add(f"ship_paid_{k}", "ship_paid", {"limit": k},
            f"ship the first {k} paid orders: freight over 40 kg, courier over 15 kg, else post", 1 + k)
    for n in (1, 3, 8, 16):
        add(f"basket_{n}", "basket", {"customer": f"buyer-{n}", "skus": _skus(n), "qty": 2},
            f"check stock of {n} products in parallel, order 2 of each in stock, then pay", 2 * n + 2)
    for k in (2, 10, 30):
        add(f"cancel_open_{k}", "cancel_open", {"limit": k}, f"cancel the first {k} open orders", 1 + k)
    for team, prio, k in (("tech", "high", 5), ("billing", "normal", 10), ("tech", "normal", 16)):
        add(f"triage_{team}_{prio}_{k}", "triage", {"team": team, "priority": prio, "limit": k},
            f"assign up to {k} open unassigned {prio} {team} tickets to the least-loaded agent, with a note", 1 + 3 * k)
    for team, age, k in (("tech", 10, 6), ("billing", 20, 12), ("tech", 5, 24)):
        add(f"close_stale_{team}_{k}", "close_stale", {"team": team, "min_age": age, "limit": k},
            f"close pending {team} tickets older than {age} days (first {k}) with a comment", 1 + k)
    add("comment_ticket_7", "comment", {"ticket": 7, "body": "customer called back"},
        "add the comment 'customer called back' to ticket 7", 1)
    for team in ("tech", "billing"):
        add(f"escalate_urgent_{team}", "escalate_urgent", {"team": team, "limit": 20},
            f"escalate every open urgent {team} ticket, retrying transient errors", 6)
    return {t.name: t for t in out}


TASKS: dict[str, WorkflowTask] = _build()


def get_task(name: str) -> WorkflowTask:
    """A task by name; ConfigError listing the valid ones otherwise."""
    if name not in TASKS:
        raise choice_error("toolpro task", name, list(TASKS))
    return TASKS[name]


# ------------------------------------------------------------------------------------------------- checking
def state(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every business table's rows in rowid order (the journal and SQLite's own tables excluded)."""
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
            for t in tables if not t.startswith(("_", "sqlite_"))}


def expected_state(task: WorkflowTask, db_seed: int) -> dict[str, list[tuple[Any, ...]]]:
    """The final state the task must produce from the database seeded with ``db_seed`` (built in memory)."""
    conn = sqlite3.connect(":memory:")
    try:
        seed_connection(conn, task.service, db_seed)
        REFERENCES[task.template](conn, task.params)
        conn.commit()
        return state(conn)
    finally:
        conn.close()


def state_diff(actual: dict[str, list[tuple[Any, ...]]], expected: dict[str, list[tuple[Any, ...]]]) -> int:
    """How many rows differ (missing, extra or changed) across all tables; 0 means the task succeeded."""
    diff = 0
    for table in set(actual) | set(expected):
        a, e = actual.get(table, []), expected.get(table, [])
        diff += sum(x != y for x, y in zip(a, e, strict=False)) + abs(len(a) - len(e))
    return diff


def row_diff(actual: dict[str, list[tuple[Any, ...]]], expected: dict[str, list[tuple[Any, ...]]]) -> dict[str, int]:
    """Rows ``extra`` (e.g. a duplicated insert), ``missing`` (a lost insert) and ``changed`` (an update lost,
    doubled or wrong) relative to the reference, summed over tables; all 0 means every effect happened once."""
    extra = missing = changed = 0
    for table in set(actual) | set(expected):
        a, e = actual.get(table, []), expected.get(table, [])
        changed += sum(x != y for x, y in zip(a, e, strict=False))
        extra += max(0, len(a) - len(e))
        missing += max(0, len(e) - len(a))
    return {"extra": extra, "missing": missing, "changed": changed}
