"""The services as MCP servers for any client: the official ``mcp`` ClientSession over stdio against
``embodia serve``, a new database created and seeded, tool failures as ``is_error`` results, bad flags exit 2."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from envs.services.runtime import create_database
from envs.services.workflows import state

ROOT = Path(__file__).resolve().parents[3]


def _session(args: list[str]):
    return stdio_client(StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT)))


async def _conversation(db: Path) -> dict:
    out: dict = {}
    async with _session(["-m", "launch", "serve", "travel", "--db", str(db), "--seed", "3"]) as (read, write):
        async with ClientSession(read, write) as session:
            out["server"] = (await session.initialize()).server_info.name
            out["tools"] = {t.name: t for t in (await session.list_tools()).tools}
            flights = await session.call_tool("search_flights", {"origin": "AMS", "dest": "BER", "day": 1})
            out["read"] = flights
            flight = flights.structured_content["result"]["flights"][0]["id"]
            book = {"flight_id": flight, "traveller": "ada", "idempotency_key": "trip-1"}
            out["flight"] = flight
            out["write"] = await session.call_tool("book_flight", book)
            out["replay"] = await session.call_tool("book_flight", book)
            out["bookings"] = await session.call_tool("list_bookings", {"traveller": "ada"})
            out["unknown"] = await session.call_tool("drop_tables", {})
            out["bad_argument"] = await session.call_tool("get_flight", {"flight_id": "one"})
    return out


def test_official_client_lists_reads_writes_replays_and_gets_errors_as_results(tmp_path) -> None:
    db = tmp_path / "new" / "travel.db"
    db.parent.mkdir()
    out = anyio.run(_conversation, db)
    flight = out["flight"]
    assert out["server"] == "embodia-travel"
    tools = out["tools"]
    assert {"search_flights", "book_flight", "list_bookings"} <= set(tools)
    assert tools["book_flight"].meta["effect"] == "write"
    assert "idempotency_key" in tools["book_flight"].input_schema["properties"]
    assert not out["read"].is_error and out["read"].structured_content["result"]["flights"]
    first, again = out["write"].structured_content, out["replay"].structured_content
    assert not out["write"].is_error and first["replayed"] is False
    assert not out["replay"].is_error and again["replayed"] is True and again["result"] == first["result"]
    assert len(out["bookings"].structured_content["result"]["bookings"]) == 1  # the replay booked nothing
    unknown = out["unknown"]
    assert unknown.is_error and unknown.content[0].text.startswith("not_found: unknown tool 'drop_tables'")
    assert unknown.structured_content["error"]["kind"] == "not_found"
    assert out["bad_argument"].is_error and out["bad_argument"].content[0].text.startswith("invalid_argument: ")
    # The new database holds world 3, plus the one booking (one seat fewer on its flight).
    reference = create_database(tmp_path / "ref.db", "travel", 3)
    with sqlite3.connect(db) as got, sqlite3.connect(reference) as ref:
        booked = [(*r[:-1], r[-1] - (r[0] == flight)) for r in state(ref)["flights"]]
        assert state(got)["flights"] == booked


async def _call_after_table_dropped(db: Path) -> tuple:
    async with _session(["-m", "envs.services.server", "--service", "travel", "--db", str(db)]) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            with sqlite3.connect(db) as conn:
                conn.execute("DROP TABLE flights")
            res = await session.call_tool("search_flights", {"origin": "AMS", "dest": "BER", "day": 1})
            alive = await session.call_tool("list_bookings", {"traveller": "ada"})
            return res, alive


def test_a_failure_inside_a_tool_is_an_error_result_not_a_protocol_error(tmp_path) -> None:
    db = create_database(tmp_path / "travel.db", "travel", 0)
    res, alive = anyio.run(_call_after_table_dropped, db)
    assert res.is_error and res.content[0].text == "internal: OperationalError: no such table: flights"
    assert not alive.is_error  # the server keeps serving


@pytest.mark.parametrize("module", ["envs.services.server", "envs.services.site"])
@pytest.mark.parametrize("flags, message", [
    (["--service", "nosuch", "--db", "{tmp}/x.db"], "unknown service 'nosuch'; valid: travel, orders, tickets"),
    (["--service", "travel", "--db", "{tmp}/missing/x.db"], "folder '{tmp}/missing' does not exist"),
    (["--service", "travel", "--db", "{tmp}"], "is a folder"),
    (["--service", "travel", "--db", "{tmp}/garbage.db"], "is not a SQLite database"),
    (["--service", "orders", "--db", "{tmp}/tickets.db"], "is not a orders database (tables missing"),
    (["--service", "tickets", "--db", "{tmp}/tickets.db", "--seed", "2"], "--seed 2 only seeds a new database"),
    (["--service", "travel", "--db", "{tmp}/x.db", "--error-rate", "2"], "--error-rate must be in 0..1, got 2.0"),
    (["--service", "travel", "--db", "{tmp}/x.db", "--timeout-s", "inf"], "--timeout-s must be in 0..3600"),
    (["--service", "travel", "--db", "{tmp}/x.db", "--fault-seed", "-1"], "--fault-seed must be >= 0, got -1"),
    (["--service", "travel"], "the following arguments are required: --db"),
    (["--service", "travel", "--db", "{tmp}/x.db", "--error-rate", "lots"], "argument --error-rate: invalid float"),
])
def test_bad_flags_exit_2_with_one_line_and_create_nothing(module, flags, message, tmp_path) -> None:
    (tmp_path / "garbage.db").write_text("not a database")
    create_database(tmp_path / "tickets.db", "tickets", 0)
    before = sorted(p.name for p in tmp_path.iterdir())
    args = [f.format(tmp=tmp_path) for f in flags]
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message.format(tmp=tmp_path) in lines[0] and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_readme_shows_how_to_connect_a_client() -> None:
    readme = (ROOT / "README.md").read_text()
    page = (ROOT / "docs" / "toolpro.md").read_text()  # the README's link to the client code
    assert "embodia serve travel --db" in readme and "docs/toolpro.md#an-mcp-client" in readme
    assert "## An MCP client" in page and "StdioServerParameters" in page
