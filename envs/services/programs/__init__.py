"""The ToolPro program runtime: executable tool programs with explicit effect types, checked, compiled to
WebAssembly and run next to a service with exactly-once writes (served by :mod:`envs.services.site`).

- :mod:`program`: the typed program representation (JSON form, dataclasses, packing).
- :mod:`checker`: effect and type checking (tools, schemas, scopes, bounded loops, keyed writes, call bound).
- :mod:`interpreter`: the reference semantics, one call at a time (the stepwise agent drives it over MCP).
- :mod:`compiler` and :mod:`sandbox`: program → WebAssembly text → a wasmtime instance whose only way out is the
  host imports; fuel, memory, wall-clock, call and output limits.
- :mod:`executor` and :mod:`runlog`: the server-side runtime mounted next to a service (``run_program``) and its
  per-run call log.
"""
