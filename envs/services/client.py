"""A blocking MCP client for one service process (stdio), driven from an event loop on a private thread.

Agents and gym envs are synchronous; this keeps one MCP session open across calls and turns tool results into
Python values and :class:`ServiceError`. Every byte and round trip goes through the simulated link
(:mod:`envs.services.link`), so latency and traffic are measured at the client.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from envs.services.link import LinkProfile, MeteredTransport, TrafficMeter
from envs.services.tools import ServiceError


class ServiceClient:
    """One MCP session to a service server started as ``command`` (killed on :meth:`close`).

    ``meter`` may be shared with earlier sessions to the same service, so traffic spent before a lost server
    still counts.
    """

    def __init__(self, command: Sequence[str], link: LinkProfile | None = None, timeout_s: float = 30.0,
                 connect_timeout_s: float = 60.0, meter: TrafficMeter | None = None) -> None:
        self.link = link or LinkProfile()
        self.meter = meter if meter is not None else TrafficMeter()
        self.timeout_s = timeout_s
        self._params = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._stop: asyncio.Event | None = None
        self._client: Client | None = None
        self._holder: asyncio.Future[Any] | None = None
        self.tools: dict[str, dict[str, Any]] = {}
        try:
            self._run(self._open(), connect_timeout_s)
        except BaseException:
            self.close()
            raise

    def _run(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _open(self) -> None:
        ready: asyncio.Future[None] = self._loop.create_future()
        self._stop = asyncio.Event()
        self._holder = asyncio.ensure_future(self._hold(ready))
        await ready
        assert self._client is not None
        listed = await self._client.list_tools()
        self.tools = {t.name: {"description": t.description, "input_schema": t.input_schema, **(t.meta or {})}
                      for t in listed.tools}

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        # The session's task group must be entered and left in one task: this one, which lives until close().
        errlog = open(os.devnull, "w")  # noqa: SIM115 - closed below when the session ends
        try:
            transport = MeteredTransport(stdio_client(self._params, errlog=errlog), self.link, self.meter)
            async with Client(transport, mode="legacy", read_timeout_seconds=self.timeout_s) as client:
                self._client = client
                ready.set_result(None)
                assert self._stop is not None
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(ServiceError("unavailable", f"cannot reach service: {type(exc).__name__}"))
        finally:
            self._client = None
            errlog.close()

    def call(self, tool: str, args: dict[str, Any], key: str | None = None) -> tuple[Any, bool]:
        """Call a tool; returns (result, replayed). Raises ServiceError for tool errors, timeouts and lost links."""
        if self._client is None:
            raise ServiceError("unavailable", "service connection is closed")
        arguments = dict(args) if key is None else {**args, "idempotency_key": key}
        try:
            res = self._run(self._client.call_tool(tool, arguments), self.timeout_s + 5)
        except ServiceError:
            raise
        except TimeoutError:
            raise ServiceError("timeout", f"{tool} did not answer within {self.timeout_s:g} s") from None
        except Exception as exc:
            text = str(exc)
            if "timed out" in text.lower() or "timeout" in type(exc).__name__.lower():
                raise ServiceError("timeout", f"{tool} did not answer within {self.timeout_s:g} s") from None
            raise ServiceError("unavailable", f"{tool}: connection lost ({type(exc).__name__})") from None
        payload = res.structured_content
        if payload is None:
            payload = json.loads(res.content[0].text) if res.content and not res.is_error else None
        if res.is_error:
            err = (payload or {}).get("error") if isinstance(payload, dict) else None
            if err:
                raise ServiceError(err["kind"], err["message"])
            text = res.content[0].text if res.content else "unknown error"
            raise ServiceError("invalid_argument", text)
        return payload["result"], bool(payload.get("replayed", False))

    def close(self) -> None:
        """End the session, stop the server process and the loop thread (idempotent)."""
        if self._loop.is_closed():
            return
        if self._stop is not None and self._holder is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            try:
                self._run(asyncio.wait_for(asyncio.shield(self._holder), 10), 15)
            except Exception:  # noqa: S110 - the server may already be gone; the loop still stops below
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
