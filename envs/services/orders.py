"""The order-fulfilment service: products with stock, orders, order lines and shipments in SQLite."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from envs.services.tools import INT, POS, STR, ServiceError, ToolSpec, array, obj, one, rows

CATEGORIES = ("books", "garden", "kitchen", "toys")
CARRIERS = ("post", "courier", "freight")

SCHEMA = """
CREATE TABLE products (sku TEXT PRIMARY KEY, category TEXT, price INTEGER, stock INTEGER, weight INTEGER);
CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT, status TEXT);
CREATE TABLE lines (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id INTEGER, sku TEXT, qty INTEGER);
CREATE TABLE shipments (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id INTEGER, carrier TEXT);
"""


def seed(conn: sqlite3.Connection, rng: np.random.Generator) -> None:
    """15 products per category (some out of stock) and 90 orders (two thirds paid, waiting to ship)."""
    skus = []
    for cat in CATEGORIES:
        for k in range(15):
            sku = f"{cat[:3].upper()}-{k:03d}"
            skus.append(sku)
            stock = int(rng.choice([0, 1, 3, 10, 50], p=[0.15, 0.1, 0.15, 0.3, 0.3]))
            conn.execute("INSERT INTO products VALUES (?,?,?,?,?)",
                         (sku, cat, int(rng.integers(3, 120)), stock, int(rng.integers(1, 30))))
    for i in range(90):
        cur = conn.execute("INSERT INTO orders (customer, status) VALUES (?, ?)",
                           (f"c{i:03d}", "paid" if i % 3 else "open"))
        for _ in range(int(rng.integers(1, 4))):
            conn.execute("INSERT INTO lines (order_id, sku, qty) VALUES (?,?,?)",
                         (cur.lastrowid, skus[int(rng.integers(len(skus)))], int(rng.integers(1, 4))))


def list_products(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return {"products": rows(conn, "SELECT sku, price, stock FROM products WHERE category=? ORDER BY sku",
                             (a["category"],))}


def check_stock(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    return one(conn, "SELECT sku, stock, price FROM products WHERE sku=?", (a["sku"],), f"product {a['sku']}")


def create_order(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    cur = conn.execute("INSERT INTO orders (customer, status) VALUES (?, 'open')", (a["customer"],))
    return {"order_id": int(cur.lastrowid or 0)}


def _order(conn: sqlite3.Connection, order_id: int) -> dict[str, Any]:
    return one(conn, "SELECT * FROM orders WHERE id=?", (order_id,), f"order {order_id}")


def add_line(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, a["order_id"])
    if order["status"] != "open":
        raise ServiceError("conflict", f"order {order['id']} is {order['status']}, not open")
    product = check_stock(conn, a)
    if product["stock"] < a["qty"]:
        raise ServiceError("conflict", f"only {product['stock']} of {a['sku']} in stock")
    conn.execute("UPDATE products SET stock = stock - ? WHERE sku=?", (a["qty"], a["sku"]))
    cur = conn.execute("INSERT INTO lines (order_id, sku, qty) VALUES (?,?,?)", (order["id"], a["sku"], a["qty"]))
    return {"line_id": int(cur.lastrowid or 0), "stock_left": product["stock"] - a["qty"]}


def pay_order(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, a["order_id"])
    if order["status"] not in ("open", "paid"):
        raise ServiceError("conflict", f"order {order['id']} is {order['status']}")
    conn.execute("UPDATE orders SET status='paid' WHERE id=?", (order["id"],))
    total = conn.execute("SELECT COALESCE(SUM(l.qty * p.price), 0) FROM lines l JOIN products p ON p.sku = l.sku "
                         "WHERE l.order_id=?", (order["id"],)).fetchone()[0]
    return {"order_id": order["id"], "status": "paid", "total": int(total)}


def list_orders(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    found = rows(conn, "SELECT o.id, o.customer, COALESCE(SUM(l.qty * p.weight), 0) AS weight FROM orders o "
                 "LEFT JOIN lines l ON l.order_id = o.id LEFT JOIN products p ON p.sku = l.sku WHERE o.status=? "
                 "GROUP BY o.id ORDER BY o.id LIMIT ?", (a["status"], a.get("limit", 100)))
    return {"orders": found}


def ship_order(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, a["order_id"])
    if order["status"] != "paid":
        raise ServiceError("conflict", f"order {order['id']} is {order['status']}, not paid")
    conn.execute("UPDATE orders SET status='shipped' WHERE id=?", (order["id"],))
    cur = conn.execute("INSERT INTO shipments (order_id, carrier) VALUES (?, ?)", (order["id"], a["carrier"]))
    return {"shipment_id": int(cur.lastrowid or 0)}


def cancel_order(conn: sqlite3.Connection, a: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, a["order_id"])
    if order["status"] == "shipped":
        raise ServiceError("conflict", f"order {order['id']} has shipped")
    if order["status"] != "cancelled":  # release the reserved stock once
        for line in rows(conn, "SELECT sku, qty FROM lines WHERE order_id=?", (order["id"],)):
            conn.execute("UPDATE products SET stock = stock + ? WHERE sku=?", (line["qty"], line["sku"]))
        conn.execute("UPDATE orders SET status='cancelled' WHERE id=?", (order["id"],))
    return {"order_id": order["id"], "status": "cancelled"}


SKU = {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"}
TOOLS = (
    ToolSpec("list_products", "Products of a category with price and stock.", "read",
             obj({"category": {"type": "string", "enum": list(CATEGORIES)}}),
             obj({"products": array(obj({"sku": STR, "price": INT, "stock": INT}))}), list_products),
    ToolSpec("check_stock", "Stock and price of one product.", "read", obj({"sku": SKU}),
             obj({"sku": STR, "stock": INT, "price": INT}), check_stock),
    ToolSpec("create_order", "Open a new empty order for a customer.", "write", obj({"customer": STR}),
             obj({"order_id": INT}), create_order),
    ToolSpec("add_line", "Add a product line to an open order, reserving stock.", "write",
             obj({"order_id": INT, "sku": SKU, "qty": POS}), obj({"line_id": INT, "stock_left": INT}), add_line),
    ToolSpec("pay_order", "Mark an order paid and return its total.", "idempotent_write", obj({"order_id": INT}),
             obj({"order_id": INT, "status": STR, "total": INT}), pay_order),
    ToolSpec("list_orders", "Orders in a status with their total weight.", "read",
             obj({"status": {"type": "string", "enum": ["open", "paid", "shipped", "cancelled"]}}, {"limit": POS}),
             obj({"orders": array(obj({"id": INT, "customer": STR, "weight": INT}))}), list_orders),
    ToolSpec("ship_order", "Ship a paid order with a carrier (creates a shipment).", "write",
             obj({"order_id": INT, "carrier": {"type": "string", "enum": list(CARRIERS)}}),
             obj({"shipment_id": INT}), ship_order),
    ToolSpec("cancel_order", "Cancel an unshipped order and release its stock.", "idempotent_write",
             obj({"order_id": INT}), obj({"order_id": INT, "status": STR}), cancel_order),
)
