"""Serves one service's tools over MCP (stdio) with the exact JSON schemas of its declarations.

    python -m envs.services.server --service travel --db /tmp/travel.db [--error-rate 0.1 --crash-rate 0.01]

Every call answers ``{"result": ..., "replayed": bool}`` as structured content, or an error result whose text is
``kind: message`` (see :class:`envs.services.tools.ServiceError`). Write tools take an optional
``idempotency_key``. Higher layers add tools (e.g. a program runtime) through ``extra_tools``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from envs.services.runtime import KEY_FIELD, FaultPlan, ServiceRuntime
from envs.services.tools import ServiceError, ToolSpec


@dataclass(frozen=True)
class ExtraTool:
    """A tool added next to a service's own (same process, same database); ``fn`` may raise ServiceError."""

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[[dict[str, Any]], Any]


ENVELOPE = {"type": "object", "properties": {"result": {}, "replayed": {"type": "boolean"}}}


def wire_schema(spec: ToolSpec) -> dict[str, Any]:
    """The input schema clients see: write tools also accept an ``idempotency_key``."""
    schema = json.loads(json.dumps(spec.input_schema))
    if spec.effect in ("write", "idempotent_write"):
        schema["properties"][KEY_FIELD] = {"type": "string", "minLength": 1, "maxLength": 200}
    return schema


def tool_list(runtime: ServiceRuntime, extra: Sequence[ExtraTool] = ()) -> list[types.Tool]:
    """The MCP tool declarations; the effect type travels in ``_meta``."""
    out = [types.Tool(name=s.name, description=s.description, input_schema=wire_schema(s),
                      meta={"effect": s.effect, "output_schema": s.output_schema})
           for s in runtime.tools.values()]
    out += [types.Tool(name=e.name, description=e.description, input_schema=e.input_schema, meta={"effect": "host"})
            for e in extra]
    return out


def ok(result: Any, replayed: bool = False) -> types.CallToolResult:
    payload = {"result": result, "replayed": replayed}
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(payload))],
                                structured_content=payload)


def error(exc: ServiceError) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{exc.kind}: {exc.message}")],
                                structured_content={"error": {"kind": exc.kind, "message": exc.message}},
                                is_error=True)


def build_server(runtime: ServiceRuntime, extra_tools: Sequence[ExtraTool] = ()) -> Server:
    """An MCP server for ``runtime``'s tools plus ``extra_tools``."""
    extras = {e.name: e for e in extra_tools}
    declared = tool_list(runtime, extra_tools)

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=declared)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        try:
            if params.name in extras:
                return ok(extras[params.name].fn(args))
            key = args.pop(KEY_FIELD, None)
            result, replayed = runtime.call(params.name, args, key)
            return ok(result, replayed)
        except ServiceError as exc:
            return error(exc)

    return Server(f"embodia-{runtime.service}", version="0.1.0", on_list_tools=on_list_tools,
                  on_call_tool=on_call_tool)


def serve_stdio(runtime: ServiceRuntime, extra_tools: Sequence[ExtraTool] = ()) -> None:
    """Serve until stdin closes."""
    server = build_server(runtime, extra_tools)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        runtime.close()


def add_server_arguments(p: argparse.ArgumentParser) -> None:
    """The flags shared by every service server entry point."""
    p.add_argument("--service", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--error-rate", type=float, default=0.0)
    p.add_argument("--timeout-rate", type=float, default=0.0)
    p.add_argument("--timeout-s", type=float, default=0.5)
    p.add_argument("--crash-rate", type=float, default=0.0)
    p.add_argument("--fault-seed", type=int, default=0)
    p.add_argument("--incarnation", type=int, default=0, help="restart count (faults are drawn per incarnation)")


def runtime_from_args(args: argparse.Namespace) -> ServiceRuntime:
    """A runtime from the shared flags."""
    faults = FaultPlan(args.error_rate, args.timeout_rate, args.timeout_s, args.crash_rate, args.fault_seed,
                       args.incarnation)
    return ServiceRuntime(args.service, args.db, faults)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="envs.services.server", description=__doc__)
    add_server_arguments(p)
    serve_stdio(runtime_from_args(p.parse_args(argv)))


if __name__ == "__main__":
    main()
