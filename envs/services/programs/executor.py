"""The server-side program runtime: check, compile to wasm, and run a program next to a service's database.

Each run gets a fresh value table (handles → immutable JSON values; handle 0 is null, the program's constants come
next) and a fresh wasm instance. Tool calls go to :class:`envs.services.runtime.ServiceRuntime` in-process, so a
program pays no network round trip per call. A write's idempotency key is namespaced by the run id: re-running a
program with the same run id (after a crash or a client retry) replays its completed writes from the service's
journal instead of executing them again.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from envs.services.programs import compiler as op
from envs.services.programs import runlog
from envs.services.programs.checker import check
from envs.services.programs.compiler import compile_program
from envs.services.programs.interpreter import binop, render, truthy
from envs.services.programs.program import BINOPS, TRANSIENT, ProgramError, parse_program
from envs.services.programs.sandbox import HostLimit, Sandbox, SandboxLimits
from envs.services.runtime import ServiceRuntime
from envs.services.tools import ServiceError


@dataclass(frozen=True)
class ExecutorLimits:
    """Host-side budgets per run, on top of the sandbox's fuel, memory, stack and wall-clock limits."""

    sandbox: SandboxLimits = field(default_factory=SandboxLimits)
    max_calls: int = 5000
    max_values: int = 200_000
    max_string_bytes: int = 64 * 1024
    max_list_items: int = 10_000
    max_output_bytes: int = 256 * 1024
    max_depth: int = 64  # nesting of the lists and objects a program builds
    max_int: int = 2**63 - 1  # integer results stay within 64 bits (JSON peers and SQLite hold no more)


class ProgramHost:
    """The host side of one run: the value table and the two imported functions."""

    def __init__(self, constants: list[Any], runtime: ServiceRuntime, run_id: str, limits: ExecutorLimits,
                 deadline: float) -> None:
        self.values: list[Any] = list(constants)
        self.runtime, self.run_id, self.limits, self.deadline = runtime, run_id, limits, deadline
        self.last_error: tuple[str, str] | None = None
        self.result: Any = None
        self.calls = self.replayed = 0
        self.journal_replayed = 0  # writes answered by the service's idempotency journal (committed, not logged)
        self.trace: list[dict[str, Any]] = []
        # Containers made by LIST_NEW/OBJ_NEW that may still be filled (id -> nesting depth). Putting one inside
        # another closes it, and only open ones take items, so no value can ever contain itself (a cycle could not
        # be serialised) and constants and tool results are never changed.
        self.open: dict[int, int] = {}
        self.depth: dict[int, int] = {}

    def _get(self, h: int) -> Any:
        if not 0 <= h < len(self.values):
            raise HostLimit(f"invalid value handle {h}")
        return self.values[h]

    def _push(self, v: Any) -> int:
        if len(self.values) >= self.limits.max_values:
            raise HostLimit(f"more than {self.limits.max_values} values")
        self.values.append(v)
        return len(self.values) - 1

    def _fill(self, target_h: int, kind: type, item_h: int) -> tuple[Any, Any]:
        """The open container ``target_h`` and the item to put in it; closes the item if it is a container."""
        target, item = self._get(target_h), self._get(item_h)
        if not isinstance(target, kind) or id(target) not in self.open:
            raise HostLimit(f"only a {kind.__name__} the program made, and has not put inside another, can be filled")
        if len(target) >= self.limits.max_list_items:
            raise HostLimit(f"more than {self.limits.max_list_items} items in one {kind.__name__}")
        if item is target:
            raise HostLimit(f"a {kind.__name__} cannot contain itself")
        if isinstance(item, list | dict):
            depth = self.depth.get(id(item), 1) + 1
            if depth > self.limits.max_depth:
                raise HostLimit(f"values nested deeper than {self.limits.max_depth}")
            self.depth[id(target)] = max(self.depth[id(target)], depth)
            self.open.pop(id(item), None)
        return target, item

    def _number(self, v: Any) -> Any:
        """``v`` when it is a representable number result: integers within 64 bits, floats finite."""
        if isinstance(v, int) and not isinstance(v, bool) and not -self.limits.max_int - 1 <= v <= self.limits.max_int:
            raise HostLimit("integer result outside the 64-bit range")
        if isinstance(v, float) and not math.isfinite(v):
            raise HostLimit("number result is not finite")
        return v

    def _new(self, container: list | dict) -> int:
        h = self._push(container)
        self.open[id(container)] = self.depth[id(container)] = 1
        return h

    def call(self, tool_h: int, args_h: int, key_h: int, effect_h: int) -> int:
        """``toolpro.call``: run one tool through the service runtime; -1 (error kept) when it fails."""
        if self.calls >= self.limits.max_calls:
            raise HostLimit(f"more than {self.limits.max_calls} tool calls")
        tool, args, key = self._get(tool_h), self._get(args_h), self._get(key_h)
        if not isinstance(tool, str) or not isinstance(args, dict):
            raise HostLimit("call needs a tool name and an argument object")
        seq = self.calls
        self.calls += 1
        t0 = time.perf_counter()
        try:
            logged = runlog.lookup(self.runtime.conn, self.run_id, seq, tool, args)
        except runlog.ReplayDiverged as exc:
            raise HostLimit(str(exc)) from None
        if logged is not None:  # answered from the run log: the re-run takes the crashed run's path
            self.replayed += 1
            self.trace.append({"tool": tool, "replayed": True, "ms": 1000 * (time.perf_counter() - t0)})
            if "error" in logged:
                self.last_error = tuple(logged["error"])  # type: ignore[assignment]
                return -1
            return self._push(logged["result"])
        try:
            result, replayed = self.runtime.call(tool, args, None if key is None else f"{self.run_id}:{render(key)}")
        except ServiceError as exc:
            self.last_error = (exc.kind, exc.message)
            runlog.record(self.runtime.conn, self.run_id, seq, tool, args, {"error": [exc.kind, exc.message]})
            self.trace.append({"tool": tool, "error": exc.kind, "ms": 1000 * (time.perf_counter() - t0)})
            return -1
        runlog.record(self.runtime.conn, self.run_id, seq, tool, args, {"result": result})
        self.replayed += int(replayed)
        self.journal_replayed += int(replayed)
        self.trace.append({"tool": tool, "replayed": replayed, "ms": 1000 * (time.perf_counter() - t0)})
        return self._push(result)

    def value(self, code: int, a: int, b: int, c: int) -> int:
        """``toolpro.value``: pure operations on values (see :mod:`envs.services.programs.compiler`)."""
        if code == op.GET:
            obj = self._get(a)
            return self._push(obj.get(self._get(b)) if isinstance(obj, dict) else None)
        if code == op.LEN:
            v = self._get(a)
            return self._push(len(v) if isinstance(v, list | str | dict) else 0)
        if code == op.LEN_RAW:
            v = self._get(a)
            return len(v) if isinstance(v, list) else 0
        if code == op.INDEX:
            lst = self._get(a)
            return self._push(lst[b] if isinstance(lst, list) and 0 <= b < len(lst) else None)
        if code == op.TRUTHY:
            return int(truthy(self._get(a)))
        if code == op.BINOP:
            if not 0 <= c < len(BINOPS):
                raise HostLimit(f"unknown operator {c}")
            return self._push(self._number(binop(BINOPS[c], self._get(a), self._get(b))))
        if code == op.NOT:
            return self._push(not truthy(self._get(a)))
        if code == op.FMT:
            template, parts = self._get(a), self._get(b)
            if not isinstance(template, str) or not isinstance(parts, list):
                raise HostLimit("fmt needs a template and a list")
            out = template
            for p in parts:
                out = out.replace("{}", render(p), 1)
                if len(out) > self.limits.max_string_bytes:
                    raise HostLimit(f"string longer than {self.limits.max_string_bytes} bytes")
            return self._push(out)
        if code == op.LIST_NEW:
            return self._new([])
        if code == op.OBJ_NEW:
            return self._new({})
        if code == op.LIST_PUSH:
            lst, item = self._fill(a, list, b)
            lst.append(item)
            return a
        if code == op.OBJ_SET:
            key = self._get(b)
            if not isinstance(key, str):
                raise HostLimit("object field names must be strings")
            obj, item = self._fill(a, dict, c)
            obj[key] = item
            return a
        if code == op.ERR_TRANSIENT:
            return int(self.last_error is not None and self.last_error[0] in TRANSIENT)
        if code == op.SLEEP:
            wanted = max(0, a) * 2 ** min(max(0, b), 16) / 1000.0
            time.sleep(max(0.0, min(wanted, self.deadline - time.perf_counter())))
            return 0
        if code == op.RETURN:
            self.result = self._get(a)
            return 0
        if code == op.FAIL:
            self.last_error = ("failed", render(self._get(a)))
            return 0
        raise HostLimit(f"unknown value operation {code}")


class ProgramExecutor:
    """Runs tool programs (or raw untrusted modules) for one service, in a wasm sandbox, next to its database."""

    def __init__(self, runtime: ServiceRuntime, limits: ExecutorLimits | None = None) -> None:
        self.runtime = runtime
        self.limits = limits or ExecutorLimits()
        self.sandbox = Sandbox(self.limits.sandbox)
        self.declarations = {name: spec.public() for name, spec in runtime.tools.items()}
        runlog.ensure(runtime.conn)

    def _host(self, host: ProgramHost) -> dict[str, dict[str, tuple[int, Any]]]:
        return {"toolpro": {"call": (4, host.call), "value": (4, host.value)}}

    def _finish(self, host: ProgramHost, run: Any, t0: float, extra: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"status": run.status, "calls": host.calls, "replayed": host.replayed,
                               "journal_replayed": host.journal_replayed,
                               "compile_ms": 1000 * run.compile_s, "exec_ms": 1000 * run.wall_s,
                               "total_ms": 1000 * (time.perf_counter() - t0), "fuel": run.fuel_used,
                               "call_ms": sum(t["ms"] for t in host.trace), **extra}
        if run.status == "ok":
            out["result"] = host.result
            try:  # what the site sends back must be plain JSON (the host limits make this hold; checked anyway)
                size = len(json.dumps(host.result, allow_nan=False))
            except (ValueError, TypeError, RecursionError) as exc:
                out.update(status="trapped", result=None,
                           error={"kind": "limit", "message": f"result is not plain JSON: {type(exc).__name__}"})
            else:
                if size > self.limits.max_output_bytes:
                    out.update(status="trapped", result=None, error={
                        "kind": "limit", "message": f"output exceeds {self.limits.max_output_bytes} bytes"})
        elif run.status == "failed" and host.last_error is not None:
            out["error"] = {"kind": host.last_error[0], "message": host.last_error[1]}
        else:
            out["error"] = {"kind": run.status, "message": run.reason}
        return out

    def run(self, program_json: Any, run_id: str, brief: bool = False) -> dict[str, Any]:
        """Check, compile and run a program; a malformed or ill-typed one is rejected before any call.

        ``brief``: report only status, result (when not null), error, calls, server-side tool time (whole ms) and
        nonzero replay counts — what the agent answers with and profiles from — instead of every timing.
        """
        report = self._run(program_json, run_id)
        if not brief:
            return report
        out = {k: report[k] for k in ("status", "calls", "error") if k in report}
        out["call_ms"] = round(report.get("call_ms", 0.0))
        if report.get("result") is not None:
            out["result"] = report["result"]
        for k in ("replayed", "journal_replayed"):
            if report.get(k):
                out[k] = report[k]
        return out

    def _run(self, program_json: Any, run_id: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            program = parse_program(program_json)
            report = check(program, self.declarations, service=self.runtime.service)
            compiled = compile_program(program)
        except (ProgramError, ValueError, TypeError, RecursionError) as exc:
            # ValueError/TypeError: a literal JSON cannot hold (an integer past 4300 digits, a non-JSON object)
            message = str(exc) if isinstance(exc, ProgramError) else f"literal is not plain JSON: {exc}"[:200]
            return {"status": "rejected", "error": {"kind": "invalid_program", "message": message}, "calls": 0,
                    "replayed": 0, "total_ms": 1000 * (time.perf_counter() - t0)}
        host = ProgramHost(compiled.constants, self.runtime, run_id, self.limits,
                           time.perf_counter() + self.limits.sandbox.wall_s)
        run = self.sandbox.run(compiled.wat, self._host(host))
        return self._finish(host, run, t0, {"call_bound": report.call_bound})

    def run_module(self, wat: str, run_id: str) -> dict[str, Any]:
        """Run an untrusted module against the same host imports and limits (its constant pool is empty)."""
        t0 = time.perf_counter()
        host = ProgramHost([None], self.runtime, run_id, self.limits, time.perf_counter() + self.limits.sandbox.wall_s)
        return self._finish(host, self.sandbox.run(wat, self._host(host)), t0, {})
