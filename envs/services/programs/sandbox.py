"""A wasmtime sandbox for untrusted modules: allow-listed host imports only, fuel, memory and wall-clock limits.

A module may import only the functions the host offers (by module, name and exact signature); any other import —
WASI file or socket calls, an undeclared host function — rejects the module before it is instantiated. Running out
of fuel (instructions), of wall-clock time (epoch interruption), of wasm stack (deep recursion) or of memory pages
stops the run with a trap; the host keeps serving. Host functions may raise :class:`HostLimit` to stop a run that
exceeds a host-side budget (calls, values, output size); any other exception a host function raises while serving
the module (a value it cannot represent, a recursion it cannot finish) stops the run the same way, as a trap whose
reason names it, so nothing a module does escapes :meth:`Sandbox.run`.

Every limit is armed before the module is instantiated: a ``(start)`` function runs during instantiation, so the
wall-clock timer, fuel and memory limits must already hold there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import wasmtime


class HostLimit(Exception):
    """Raised by a host function to stop the run (a host-side budget was exceeded)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run budgets: instructions (fuel), wall-clock seconds, linear memory bytes, wasm stack bytes."""

    fuel: int = 50_000_000
    wall_s: float = 30.0
    memory_bytes: int = 16 * 1024 * 1024
    stack_bytes: int = 512 * 1024


@dataclass
class SandboxRun:
    """How a run ended: ``ok`` (run returned 0), ``failed`` (returned non-zero), ``rejected`` (not instantiated),
    or ``trapped`` (stopped by a limit or a fault); ``reason`` says which."""

    status: str
    reason: str = ""
    fuel_used: int = 0
    wall_s: float = 0.0
    compile_s: float = 0.0


HostFunc = Callable[..., int]


class Sandbox:
    """Runs modules exporting ``run() -> i32`` with the given host functions (module name -> name -> (arity, fn))."""

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        config = wasmtime.Config()
        config.consume_fuel = True
        config.epoch_interruption = True
        config.max_wasm_stack = self.limits.stack_bytes
        config.cranelift_opt_level = "none"  # programs are short-lived: compile fast rather than run fast
        self.engine = wasmtime.Engine(config)

    def run(self, wat: str | bytes, host: Mapping[str, Mapping[str, tuple[int, HostFunc]]]) -> SandboxRun:
        """Compile, link and run ``wat``; never raises for anything the module does."""
        t0 = time.perf_counter()
        try:
            module = wasmtime.Module(self.engine, wat)
        except wasmtime.WasmtimeError as exc:
            return SandboxRun("rejected", f"invalid module: {str(exc).splitlines()[0][:200]}")
        compile_s = time.perf_counter() - t0
        for imp in module.imports:
            offered = host.get(imp.module, {}).get(imp.name or "")
            ftype = imp.type
            if offered is None or not isinstance(ftype, wasmtime.FuncType):
                return SandboxRun("rejected", f"undeclared host import {imp.module}.{imp.name}", compile_s=compile_s)
            arity = offered[0]
            if [str(p) for p in ftype.params] != ["i32"] * arity or [str(r) for r in ftype.results] != ["i32"]:
                return SandboxRun("rejected", f"host import {imp.module}.{imp.name} has the wrong signature",
                                  compile_s=compile_s)
        exports = {e.name: e.type for e in module.exports}
        run_type = exports.get("run")
        if not isinstance(run_type, wasmtime.FuncType) or list(run_type.params) or len(run_type.results) != 1:
            return SandboxRun("rejected", "module must export run() -> i32", compile_s=compile_s)

        store = wasmtime.Store(self.engine)
        store.set_limits(memory_size=self.limits.memory_bytes, table_elements=10_000, instances=1, tables=1,
                         memories=1)
        store.set_fuel(self.limits.fuel)
        store.set_epoch_deadline(1)
        linker = wasmtime.Linker(self.engine)
        stopped: list[str] = []
        for mod_name, funcs in host.items():
            for name, (arity, fn) in funcs.items():
                linker.define_func(mod_name, name, wasmtime.FuncType([wasmtime.ValType.i32()] * arity,
                                                                     [wasmtime.ValType.i32()]),
                                   _guard(fn, stopped))
        timer = threading.Timer(self.limits.wall_s, self.engine.increment_epoch)
        timer.daemon = True
        start = time.perf_counter()
        timer.start()  # before instantiation: a (start) function runs inside instantiate()
        try:
            instance = linker.instantiate(store, module)
            code = instance.exports(store)["run"](store)
            status, reason = ("ok", "") if code == 0 else ("failed", f"run returned {code}")
        except HostLimit as exc:  # wasmtime re-raises a host function's exception after unwinding the guest
            status, reason = "trapped", stopped[0] if stopped else f"host limit: {exc}"
        except wasmtime.Trap as trap:
            status, reason = "trapped", stopped[0] if stopped else _trap_reason(trap)
        except wasmtime.WasmtimeError as exc:
            status, reason = "trapped", stopped[0] if stopped else str(exc).splitlines()[0][:200]
        except Exception as exc:  # a host function's own fault (re-raised by wasmtime): contained, never escapes
            status, reason = "trapped", stopped[0] if stopped else f"host fault: {_describe(exc)}"
        finally:
            timer.cancel()
        fuel_used = self.limits.fuel - store.get_fuel()
        return SandboxRun(status, reason, fuel_used, time.perf_counter() - start, compile_s)


def _guard(fn: HostFunc, stopped: list[str]) -> Callable[..., int]:
    """Wrap a host function: a HostLimit becomes a trap whose reason is remembered."""

    def wrapped(*args: Any) -> int:
        try:
            return int(fn(*args))
        except HostLimit as exc:
            stopped.append(f"host limit: {exc}")
            raise
        except Exception as exc:  # the module made the host fail (e.g. a value it cannot represent): stop the run
            stopped.append(f"host fault: {_describe(exc)}")
            raise HostLimit(stopped[-1]) from None

    return wrapped


def _describe(exc: BaseException) -> str:
    """``Type: first line of the message`` (at most 160 characters), for a trap reason."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:160]


def _trap_reason(trap: wasmtime.Trap) -> str:
    code = trap.trap_code
    names = {wasmtime.TrapCode.OUT_OF_FUEL: "fuel exhausted", wasmtime.TrapCode.INTERRUPT: "wall-clock deadline",
             wasmtime.TrapCode.STACK_OVERFLOW: "wasm stack exhausted",
             wasmtime.TrapCode.MEMORY_OUT_OF_BOUNDS: "out-of-bounds memory access"}
    return names.get(code, f"trap: {str(trap).splitlines()[0][:120]}")
