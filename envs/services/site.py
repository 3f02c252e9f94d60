"""A service deployed with the ToolPro program runtime beside it (one process, one database).

    python -m envs.services.site --service travel --db /tmp/travel.db [--error-rate 0.05 ...]

Serves the service's own tools over MCP (stdio) exactly as :mod:`envs.services.server` does, plus:
``run_program`` (check → compile to wasm → run next to the database, see :mod:`envs.services.programs.executor`; the
program as JSON or packed, :func:`envs.services.programs.program.pack_program`; a ``brief`` report carries only what the
agent's answer and cost profile use),
``run_module`` (an untrusted WebAssembly text module, run under the same sandbox), ``run_progress`` (how far a run
got before a crash: its logged calls) and ``ping`` (for profiling).
"""

from __future__ import annotations

import uuid
from typing import Any

from envs.services.programs import runlog
from envs.services.programs.executor import ProgramExecutor
from envs.services.runtime import ServiceRuntime
from envs.services.server import ExtraTool, server_main
from envs.services.tools import ServiceError


def program_tools(runtime: ServiceRuntime, executor: ProgramExecutor | None = None) -> list[ExtraTool]:
    """The extra MCP tools of a ToolPro site."""
    executor = executor or ProgramExecutor(runtime)

    def run_program(args: dict[str, Any]) -> dict[str, Any]:
        if ("program" in args) == ("packed" in args):
            raise ServiceError("invalid_argument", "run_program needs one of 'program' (JSON) or 'packed' (tp1:)")
        if args.get("report", "full") not in ("full", "brief"):
            raise ServiceError("invalid_argument", f"run_program report must be full or brief, got {args['report']!r}")
        source = args["program"] if "program" in args else args["packed"]
        return executor.run(source, str(args.get("run_id") or uuid.uuid4().hex), brief=args.get("report") == "brief")

    def run_module(args: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(args.get("wat"), str):
            raise ServiceError("invalid_argument", "run_module needs 'wat' (WebAssembly text)")
        return executor.run_module(args["wat"], str(args.get("run_id") or uuid.uuid4().hex))

    def run_progress(args: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(args.get("run_id"), str):
            raise ServiceError("invalid_argument", "run_progress needs a 'run_id' (string)")
        return {"run_id": args["run_id"], "logged": runlog.progress(runtime.conn, args["run_id"])}

    return [
        ExtraTool("run_program", "Check, compile to WebAssembly and run a tool program next to the service.",
                  {"type": "object", "properties": {"program": {"type": "object"}, "packed": {"type": "string"},
                                                    "run_id": {"type": "string"},
                                                    "report": {"type": "string", "enum": ["full", "brief"]}}},
                  run_program),
        ExtraTool("run_module", "Run an untrusted WebAssembly text module under the program sandbox.",
                  {"type": "object", "properties": {"wat": {"type": "string"}, "run_id": {"type": "string"}},
                   "required": ["wat"]}, run_module),
        ExtraTool("run_progress", "How many calls of a program run are in the run log (after a crash).",
                  {"type": "object", "properties": {"run_id": {"type": "string"}}, "required": ["run_id"]},
                  run_progress),
        ExtraTool("ping", "Answer at once (round-trip profiling).", {"type": "object", "properties": {}},
                  lambda args: {}),
    ]


def main(argv: list[str] | None = None) -> int:
    """``python -m envs.services.site``: the service's tools plus the program tools (flags as the server's)."""
    return server_main("envs.services.site", argv, __doc__, program_tools)


if __name__ == "__main__":
    raise SystemExit(main())
