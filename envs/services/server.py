"""Serves one service's tools over MCP (stdio) with the exact JSON schemas of its declarations.

    python -m envs.services.server --service travel --db travel.db [--seed 3] [--error-rate 0.1 --crash-rate 0.01]
    embodia serve travel --db travel.db          # the same, as the console script

A ``--db`` that does not exist yet is created and seeded (world ``--seed``, default 0); an existing one must be the
service's SQLite database. Every call answers ``{"result": ..., "replayed": bool}`` as structured content, or a tool
result with ``is_error`` whose text is ``kind: message`` (see :class:`envs.services.tools.ServiceError`; any other
failure inside a tool is ``internal: ...``), never a protocol error. Write tools take an optional
``idempotency_key``. Higher layers add tools (e.g. a program runtime) through ``extra_tools``. A bad flag or
database exits 2 with one line on stderr before anything is created.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from envs.errors import ConfigError, choice_error
from envs.services import SERVICES
from envs.services.runtime import KEY_FIELD, FaultPlan, ServiceRuntime, create_database, service_module
from envs.services.tools import ServiceError, ToolSpec

SERVICE_NAMES = SERVICES


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
        except Exception as exc:  # noqa: BLE001 - a tool's failure is the caller's result, not a protocol error
            return error(ServiceError("internal", f"{type(exc).__name__}: {exc}"))

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


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one stderr line and exit status 2 (not usage plus the error)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def add_server_arguments(p: argparse.ArgumentParser, service_flag: bool = True) -> None:
    """The flags shared by every service server entry point (``service_flag=False``: the service is positional)."""
    if service_flag:
        p.add_argument("--service", required=True, help=f"one of {', '.join(SERVICE_NAMES)}")
    else:
        p.add_argument("service", help=f"one of {', '.join(SERVICE_NAMES)}")
    p.add_argument("--db", required=True, help="SQLite file; created and seeded when it does not exist")
    p.add_argument("--seed", type=int, default=None, help="world of a new --db (default 0)")
    p.add_argument("--error-rate", type=float, default=0.0, help="probability a call fails with 503, 0..1")
    p.add_argument("--timeout-rate", type=float, default=0.0, help="probability a call stalls --timeout-s, 0..1")
    p.add_argument("--timeout-s", type=float, default=0.5, help="length of an injected stall, seconds")
    p.add_argument("--crash-rate", type=float, default=0.0, help="probability a write kills the server, 0..1")
    p.add_argument("--fault-seed", type=int, default=0)
    p.add_argument("--incarnation", type=int, default=0, help="restart count (faults are drawn per incarnation)")


def server_flags(deployment: Mapping[str, Any]) -> list[str]:
    """The command-line flags (of :func:`add_server_arguments`) that start a server for ``deployment``: its
    ``service``, ``db`` and injected faults, as :meth:`envs.services.env.WorkflowEnv.deployment` gives them."""
    d = deployment
    return ["--service", str(d["service"]), "--db", str(d["db"]), "--error-rate", str(float(d["error_rate"])),
            "--timeout-rate", str(float(d["timeout_rate"])), "--timeout-s", str(float(d["timeout_s"])),
            "--crash-rate", str(float(d["crash_rate"])), "--fault-seed", str(int(d["fault_seed"]))]


def check_server_arguments(args: argparse.Namespace) -> None:
    """ConfigError naming the first bad flag (ranges argparse cannot express)."""
    if args.service not in SERVICE_NAMES:
        raise choice_error("service", args.service, SERVICE_NAMES)
    for name in ("error_rate", "timeout_rate", "crash_rate"):
        value = getattr(args, name)
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"--{name.replace('_', '-')} must be in 0..1, got {value}")
    if not (math.isfinite(args.timeout_s) and 0.0 <= args.timeout_s <= 3600.0):
        raise ConfigError(f"--timeout-s must be in 0..3600 seconds, got {args.timeout_s}")
    for name in ("seed", "fault_seed", "incarnation"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 0, got {value}")


def open_database(service: str, db: str | Path, seed: int | None = None) -> Path:
    """The service's database at ``db``: a new file is created and seeded with world ``seed`` (default 0); an
    existing one must be a SQLite database holding the service's tables. ConfigError (nothing created) otherwise."""
    path = Path(db).expanduser()
    if path.is_dir():
        raise ConfigError(f"--db {str(db)!r} is a folder; give a file path (created when missing)")
    if not path.exists():
        if not path.parent.is_dir():
            raise ConfigError(f"--db {str(db)!r}: folder {str(path.parent)!r} does not exist")
        return create_database(path, service, 0 if seed is None else seed)
    if seed is not None:
        raise ConfigError(f"--seed {seed} only seeds a new database, and --db {str(db)!r} exists; "
                          "give a new path or leave out --seed")
    try:
        # immutable: a read-only look that creates no -wal/-shm files next to a database that turns out to be wrong
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, timeout=30)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"--db {str(db)!r} is not a SQLite database ({exc}); give a new path to create one") from None
    needed = _service_tables(service)
    if not needed <= tables:
        raise ConfigError(f"--db {str(db)!r} is not a {service} database (tables missing: "
                          f"{', '.join(sorted(needed - tables))}); give a new path to create one")
    return path


def _service_tables(service: str) -> set[str]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(service_module(service).SCHEMA)
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        conn.close()


def runtime_from_args(args: argparse.Namespace) -> ServiceRuntime:
    """A runtime from the shared flags (checked; a new --db is created and seeded)."""
    check_server_arguments(args)
    db = open_database(args.service, args.db, args.seed)
    faults = FaultPlan(args.error_rate, args.timeout_rate, args.timeout_s, args.crash_rate, args.fault_seed,
                       args.incarnation)
    return ServiceRuntime(args.service, db, faults)


def server_main(prog: str, argv: list[str] | None, description: str | None,
                extra_tools: Callable[[ServiceRuntime], Sequence[ExtraTool]] | None = None,
                service_flag: bool = True) -> int:
    """Parse, check, open the database and serve over stdio; a user error is one stderr line and exit 2."""
    p = _Parser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_arguments(p, service_flag)
    args = p.parse_args(argv)
    try:
        runtime = runtime_from_args(args)
    except ConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # unreadable or unwritable path
        print(f"{prog}: error: --db {str(args.db)!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    serve_stdio(runtime, extra_tools(runtime) if extra_tools is not None else ())
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m envs.services.server``."""
    return server_main("envs.services.server", argv, __doc__)


if __name__ == "__main__":
    raise SystemExit(main())
