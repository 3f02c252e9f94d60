"""The services over MCP stdio: schemas enforced, exactly-once keys, typed errors, injected latency measured."""

from __future__ import annotations

import sys
import time

import pytest

from envs.services.client import ServiceClient
from envs.services.link import LinkProfile
from envs.services.runtime import ServiceRuntime, create_database
from envs.services.tools import ServiceError
from envs.services.workflows import TASKS, expected_state, state


def test_stdio_service_errors_keys_and_latency(tmp_path):
    db = create_database(tmp_path / "tickets.db", "tickets", 0)
    cmd = [sys.executable, "-m", "envs.services.server", "--service", "tickets", "--db", str(db)]
    with ServiceClient(cmd, LinkProfile(rtt_ms=100)) as client:
        assert client.tools["assign_ticket"]["effect"] == "write"
        before = client.meter.snapshot()
        t0 = time.perf_counter()
        agents = client.call("list_agents", {"team": "tech"})[0]["agents"]
        assert time.perf_counter() - t0 >= 0.1  # one injected round trip
        assert client.meter.round_trips - before["round_trips"] == 1
        args = {"ticket_id": 1, "agent": agents[0]["name"]}
        assert client.call("assign_ticket", args, key="k")[1] is False
        assert client.call("assign_ticket", args, key="k")[1] is True  # replayed, not re-executed
        load = client.call("list_agents", {"team": "tech"})[0]["agents"]
        assert {a["name"]: a["load"] for a in load}[agents[0]["name"]] == agents[0]["load"] + 1
        with pytest.raises(ServiceError, match="invalid_argument: get_ticket.ticket_id"):
            client.call("get_ticket", {"ticket_id": "one"})
        with pytest.raises(ServiceError, match="unknown tool 'drop_tables'"):
            client.call("drop_tables", {})
        with pytest.raises(ServiceError, match="conflict: idempotency key 'k'"):
            client.call("add_comment", {"ticket_id": 1, "body": "x"}, key="k")


def test_failed_write_leaves_no_trace(tmp_path):
    rt = ServiceRuntime("orders", create_database(tmp_path / "o.db", "orders", 0))
    before = state(rt.conn)
    order = rt.call("create_order", {"customer": "z"}, "o1")[0]["order_id"]
    with pytest.raises(ServiceError, match="conflict: only"):
        rt.call("add_line", {"order_id": order, "sku": "BOO-000", "qty": 1000}, "l1")
    after = state(rt.conn)
    assert len(after["orders"]) == len(before["orders"]) + 1 and after["lines"] == before["lines"]
    assert after["products"] == before["products"]


def test_workflow_set_size_and_reference_is_deterministic():
    assert len(TASKS) >= 30
    hints = sorted(t.calls_hint for t in TASKS.values())
    assert hints[0] <= 2 and hints[-1] == 50  # one single-call task exercises the stepwise-vs-program choice
    assert {t.service for t in TASKS.values()} == {"travel", "orders", "tickets"}
    assert expected_state(TASKS["trip_1"], 5) == expected_state(TASKS["trip_1"], 5)
