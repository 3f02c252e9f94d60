"""The travel-booking service: flights, hotels and bookings in SQLite."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from envs.services.tools import INT, POS, STR, ServiceError, ToolSpec, array, obj, one, rows

CITIES = ("AMS", "BER", "LIS", "MAD", "PAR", "ROM")
DAYS = 7

SCHEMA = """
CREATE TABLE flights (id INTEGER PRIMARY KEY, origin TEXT, dest TEXT, day INTEGER, price INTEGER, seats INTEGER);
CREATE TABLE hotels (id INTEGER PRIMARY KEY, city TEXT, name TEXT, price INTEGER, rooms INTEGER);
CREATE TABLE bookings (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT, item_id INTEGER, traveller TEXT,
                       nights INTEGER, status TEXT);
"""


def seed(conn: sqlite3.Connection, rng: np.random.Generator) -> None:
    """Three flights per route and day (some sold out), five hotels per city (some full)."""
    fid = 1
    for origin in CITIES:
        for dest in CITIES:
            if origin == dest:
                continue
            for day in range(1, DAYS + 1):
                for _ in range(3):
                    seats = int(rng.choice([0, 1, 2, 4, 9, 30], p=[0.15, 0.1, 0.1, 0.15, 0.2, 0.3]))
                    conn.execute("INSERT INTO flights VALUES (?,?,?,?,?,?)",
                                 (fid, origin, dest, day, int(rng.integers(40, 400)), seats))
                    fid += 1
    hid = 1
    for city in CITIES:
        for k in range(5):
            rooms = int(rng.choice([0, 2, 5, 40], p=[0.2, 0.2, 0.3, 0.3]))
            conn.execute("INSERT INTO hotels VALUES (?,?,?,?,?)",
                         (hid, city, f"{city} hotel {k}", int(rng.integers(50, 300)), rooms))
            hid += 1


def search_flights(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    found = rows(conn, "SELECT id, price, seats FROM flights WHERE origin=? AND dest=? AND day=? ORDER BY price, id",
                 (a["origin"], a["dest"], a["day"]))
    return {"flights": found}


def get_flight(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return one(conn, "SELECT * FROM flights WHERE id=?", (a["flight_id"],), f"flight {a['flight_id']}")


def book_flight(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    flight = get_flight(conn, a)
    if flight["seats"] < 1:
        raise ServiceError("conflict", f"flight {flight['id']} is sold out")
    conn.execute("UPDATE flights SET seats = seats - 1 WHERE id=?", (flight["id"],))
    cur = conn.execute("INSERT INTO bookings (kind, item_id, traveller, nights, status) "
                       "VALUES ('flight',?,?,0,'active')",
                       (flight["id"], a["traveller"]))
    return {"booking_id": int(cur.lastrowid or 0), "price": flight["price"]}


def search_hotels(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    cap = a.get("max_price", 10**9)
    return {"hotels": rows(conn, "SELECT id, price, rooms FROM hotels WHERE city=? AND price<=? ORDER BY price, id",
                           (a["city"], cap))}


def book_hotel(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    hotel = one(conn, "SELECT * FROM hotels WHERE id=?", (a["hotel_id"],), f"hotel {a['hotel_id']}")
    if hotel["rooms"] < 1:
        raise ServiceError("conflict", f"hotel {hotel['id']} is full")
    conn.execute("UPDATE hotels SET rooms = rooms - 1 WHERE id=?", (hotel["id"],))
    cur = conn.execute("INSERT INTO bookings (kind, item_id, traveller, nights, status) "
                       "VALUES ('hotel',?,?,?,'active')",
                       (hotel["id"], a["traveller"], a["nights"]))
    return {"booking_id": int(cur.lastrowid or 0), "total": hotel["price"] * a["nights"]}


def cancel_booking(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    b = one(conn, "SELECT * FROM bookings WHERE id=?", (a["booking_id"],), f"booking {a['booking_id']}")
    if b["status"] == "active":  # cancelling twice restores the seat once: the tool is idempotent
        table, col = ("flights", "seats") if b["kind"] == "flight" else ("hotels", "rooms")
        conn.execute(f"UPDATE {table} SET {col} = {col} + 1 WHERE id=?", (b["item_id"],))
        conn.execute("UPDATE bookings SET status='cancelled' WHERE id=?", (b["id"],))
    return {"booking_id": b["id"], "status": "cancelled"}


def list_bookings(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return {"bookings": rows(conn, "SELECT id, kind, item_id, status FROM bookings WHERE traveller=? ORDER BY id",
                             (a["traveller"],))}


FLIGHT = obj({"id": INT, "price": INT, "seats": INT})
HOTEL = obj({"id": INT, "price": INT, "rooms": INT})
CITY = {"type": "string", "enum": list(CITIES)}
DAY = {"type": "integer", "minimum": 1, "maximum": DAYS}

TOOLS = (
    ToolSpec("search_flights", "Flights on a route and day, cheapest first.", "read",
             obj({"origin": CITY, "dest": CITY, "day": DAY}), obj({"flights": array(FLIGHT)}), search_flights),
    ToolSpec("get_flight", "One flight with its remaining seats.", "read", obj({"flight_id": INT}),
             obj({"id": INT, "origin": STR, "dest": STR, "day": INT, "price": INT, "seats": INT}), get_flight),
    ToolSpec("book_flight", "Book one seat on a flight for a traveller.", "write",
             obj({"flight_id": INT, "traveller": STR}), obj({"booking_id": INT, "price": INT}), book_flight),
    ToolSpec("search_hotels", "Hotels in a city (optionally under a price), cheapest first.", "read",
             obj({"city": CITY}, {"max_price": INT}), obj({"hotels": array(HOTEL)}), search_hotels),
    ToolSpec("book_hotel", "Book one room for a traveller for some nights.", "write",
             obj({"hotel_id": INT, "traveller": STR, "nights": POS}), obj({"booking_id": INT, "total": INT}),
             book_hotel),
    ToolSpec("cancel_booking", "Cancel a booking and release its seat or room.", "idempotent_write",
             obj({"booking_id": INT}), obj({"booking_id": INT, "status": STR}), cancel_booking),
    ToolSpec("list_bookings", "A traveller's bookings.", "read", obj({"traveller": STR}),
             obj({"bookings": array(obj({"id": INT, "kind": STR, "item_id": INT, "status": STR}))}), list_bookings),
)
