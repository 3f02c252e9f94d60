"""The deterministic constructor: a workflow task's template and parameters → a tool program (JSON form).

It writes what an engineer would write for each template: fan-out reads in ``parallel``, bounded loops with the
list limit as bound, a conditional choice of carrier, ``try``/``compensate`` for the trip, ``retry`` with backoff
around transient-prone writes, and an idempotency key derived from the intent (traveller, order, ticket) on every
``write``. Every program it returns passes :func:`envs.services.programs.checker.check`.
"""

from __future__ import annotations

from typing import Any

from envs.errors import choice_error
from envs.services.workflows import WorkflowTask

J = dict[str, Any]


def lit(v: Any) -> J:
    return {"lit": v}


def var(name: str) -> J:
    return {"var": name}


def get(e: J, *fields: str) -> J:
    for f in fields:
        e = {"get": [e, f]}
    return e


def op(name: str, a: J, b: J) -> J:
    return {"op": name, "args": [a, b]}


def fmt(template: str, *args: J) -> J:
    return {"fmt": template, "args": list(args)}


def call(tool: str, effect: str, bind: str | None = None, key: J | None = None, **args: J) -> J:
    out: J = {"call": tool, "args": args, "effect": effect}
    if bind:
        out["bind"] = bind
    if key is not None:
        out["key"] = key
    return out


def retry(body: J, attempts: int = 4, backoff_ms: int = 20) -> J:
    return {"retry": body, "attempts": attempts, "backoff_ms": backoff_ms}


def first_free(items: J, field: str) -> J:
    return {"find": {"in": items, "as": "x", "where": op("gt", get(var("x"), field), lit(0))}}


def _book_flight(p: J, traveller: J, key: J, bind: str) -> list[J]:
    return [retry(call("search_flights", "read", "fl", origin=lit(p["origin"]), dest=lit(p["dest"]),
                       day=lit(p["day"]))),
            {"let": "pick", "value": first_free(get(var("fl"), "flights"), "seats")},
            {"if": var("pick"), "then": retry(call("book_flight", "write", bind, key, flight_id=get(var("pick"), "id"),
                                                   traveller=traveller))}]


def plan(task: WorkflowTask) -> J:
    """The program for ``task`` (JSON form)."""
    p, t = task.params, task.template
    if t == "cheapest_flight":
        body = [*_book_flight(p, lit(p["traveller"]), fmt("flight-{}", lit(p["traveller"])), "booking"),
                {"return": var("booking")}]
    elif t == "group_flights":
        body = [{"for": "who", "in": lit(p["travellers"]), "max": len(p["travellers"]),
                 "do": {"seq": _book_flight(p, var("who"), fmt("flight-{}", var("who")), "booking")}}]
    elif t == "trip":
        who = lit(p["traveller"])
        body = [{"try": {"seq": [
            *_book_flight(p, who, fmt("flight-{}", who), "fb"),
            {"if": {"not": var("fb")}, "then": {"fail": "no flight with a free seat"}},
            retry(call("search_hotels", "read", "hs", city=lit(p["city"]), max_price=lit(p["max_price"]))),
            {"let": "h", "value": first_free(get(var("hs"), "hotels"), "rooms")},
            {"if": {"not": var("h")}, "then": {"fail": "no hotel under the price cap"}},
            retry(call("book_hotel", "write", "hb", fmt("hotel-{}", who), hotel_id=get(var("h"), "id"), traveller=who,
                       nights=lit(p["nights"])))]},
            "compensate": {"if": var("fb"), "then": retry(call("cancel_booking", "idempotent_write", "undo",
                                                              booking_id=get(var("fb"), "booking_id")))}},
            {"return": {"op": "and", "args": [var("fb"), var("hb")]}}]
    elif t == "group_trip":
        body = [{"parallel": [  # fan-out: is the trip possible at all? join, then book
            retry(call("search_flights", "read", "probe_f", origin=lit(p["origin"]), dest=lit(p["dest"]),
                       day=lit(p["day"]))),
            retry(call("search_hotels", "read", "probe_h", city=lit(p["city"])))]},
            {"if": op("and", first_free(get(var("probe_f"), "flights"), "seats"),
                      first_free(get(var("probe_h"), "hotels"), "rooms")),
             "then": {"for": "who", "in": lit(p["travellers"]), "max": len(p["travellers"]), "do": {"seq": [
                 *_book_flight(p, var("who"), fmt("flight-{}", var("who")), "fb"),
                 {"if": var("fb"), "then": {"seq": [
                     retry(call("search_hotels", "read", "hs", city=lit(p["city"]))),
                     {"let": "h", "value": first_free(get(var("hs"), "hotels"), "rooms")},
                     {"if": var("h"), "then": retry(call("book_hotel", "write", "hb", fmt("hotel-{}", var("who")),
                                                         hotel_id=get(var("h"), "id"), traveller=var("who"),
                                                         nights=lit(p["nights"])))}]}},
                 {"let": "fb", "value": lit(None)}]}}}]
    elif t == "ship_paid":
        w = get(var("o"), "weight")
        carrier = {"if": op("gt", w, lit(40)), "then": {"let": "carrier", "value": lit("freight")},
                   "else": {"if": op("gt", w, lit(15)), "then": {"let": "carrier", "value": lit("courier")},
                            "else": {"let": "carrier", "value": lit("post")}}}
        body = [retry(call("list_orders", "read", "paid", status=lit("paid"), limit=lit(p["limit"]))),
                {"for": "o", "in": get(var("paid"), "orders"), "max": p["limit"], "do": {"seq": [
                    carrier, retry(call("ship_order", "write", None, fmt("ship-{}", get(var("o"), "id")),
                                        order_id=get(var("o"), "id"), carrier=var("carrier")))]}}]
    elif t == "basket":
        skus, qty, cust = p["skus"], p["qty"], p["customer"]
        enough = [op("ge", get(var(f"s{i}"), "stock"), lit(qty)) for i in range(len(skus))]
        anything = enough[0]
        for e in enough[1:]:
            anything = op("or", anything, e)
        lines = [{"if": enough[i], "then": retry(call("add_line", "write", None, fmt("line-{}-{}", lit(cust), lit(s)),
                                                      order_id=get(var("order"), "order_id"), sku=lit(s),
                                                      qty=lit(qty)))} for i, s in enumerate(skus)]
        body = [{"parallel": [retry(call("check_stock", "read", f"s{i}", sku=lit(s))) for i, s in enumerate(skus)]},
                {"if": anything, "then": {"seq": [
                    retry(call("create_order", "write", "order", fmt("order-{}", lit(cust)), customer=lit(cust))),
                    *lines,
                    retry(call("pay_order", "idempotent_write", "paid", order_id=get(var("order"), "order_id")))]}},
                {"return": var("paid")}]
    elif t == "cancel_open":
        body = [retry(call("list_orders", "read", "open", status=lit("open"), limit=lit(p["limit"]))),
                {"for": "o", "in": get(var("open"), "orders"), "max": p["limit"],
                 "do": retry(call("cancel_order", "idempotent_write", order_id=get(var("o"), "id")))}]
    elif t == "triage":
        body = [retry(call("list_tickets", "read", "ts", status=lit("open"), team=lit(p["team"]),
                           priority=lit(p["priority"]), limit=lit(p["limit"]))),
                {"for": "t", "in": get(var("ts"), "tickets"), "max": p["limit"], "do": {
                    "if": op("eq", get(var("t"), "assignee"), lit(None)), "then": {"seq": [
                        retry(call("list_agents", "read", "ag", team=lit(p["team"]))),
                        {"let": "agent", "value": get(var("ag"), "agents")},
                        {"let": "agent", "value": {"find": {"in": var("agent"), "as": "a", "where": lit(True)}}},
                        retry(call("assign_ticket", "write", None, fmt("assign-{}", get(var("t"), "id")),
                                   ticket_id=get(var("t"), "id"), agent=get(var("agent"), "name"))),
                        retry(call("add_comment", "write", None, fmt("note-{}", get(var("t"), "id")),
                                   ticket_id=get(var("t"), "id"),
                                   body=fmt("assigned to {}", get(var("agent"), "name"))))]}}}]
    elif t == "close_stale":
        body = [retry(call("list_tickets", "read", "ts", status=lit("pending"), team=lit(p["team"]),
                           limit=lit(p["limit"]))),
                {"for": "t", "in": get(var("ts"), "tickets"), "max": p["limit"], "do": {
                    "if": op("ge", get(var("t"), "age_days"), lit(p["min_age"])), "then": {"seq": [
                        retry(call("add_comment", "write", None, fmt("stale-{}", get(var("t"), "id")),
                                   ticket_id=get(var("t"), "id"),
                                   body=fmt("closed after {} days pending", get(var("t"), "age_days")))),
                        retry(call("close_ticket", "idempotent_write", ticket_id=get(var("t"), "id")))]}}}]
    elif t == "escalate_urgent":
        body = [retry(call("list_tickets", "read", "ts", status=lit("open"), team=lit(p["team"]),
                           priority=lit("urgent"), limit=lit(p["limit"]))),
                {"for": "t", "in": get(var("ts"), "tickets"), "max": p["limit"],
                 "do": retry(call("escalate_ticket", "idempotent_write", ticket_id=get(var("t"), "id")),
                             attempts=5, backoff_ms=10)}]
    elif t == "comment":  # a single write: the case where a program's fixed cost cannot pay off
        body = [retry(call("add_comment", "write", "c", fmt("comment-{}", lit(p["ticket"])),
                           ticket_id=lit(p["ticket"]), body=lit(p["body"]))),
                {"return": var("c")}]
    else:
        raise choice_error("workflow template", t, ["cheapest_flight", "group_flights", "trip", "group_trip",
                                                    "ship_paid", "basket", "cancel_open", "triage", "close_stale",
                                                    "escalate_urgent", "comment"])
    return {"service": task.service, "body": {"seq": body}}
