"""ToolPro: executable tool programs with explicit effect types, checked, compiled to WebAssembly and run next to
the services with exactly-once writes.

- :mod:`program`: the typed program representation (JSON form and dataclasses).
- :mod:`checker`: effect and type checking (tools, schemas, scopes, bounded loops, keyed writes, call bound).
- :mod:`interpreter`: the reference semantics, one call at a time (the stepwise agent drives it over MCP).
- :mod:`compiler` and :mod:`sandbox`: program → WebAssembly text → a wasmtime instance whose only way out is the
  host imports; fuel, memory, wall-clock, call and output limits.
- :mod:`executor` and :mod:`site`: the server-side program runtime mounted next to a service (``run_program``).
- :mod:`planner`: the deterministic constructor for the workflow templates.
- :mod:`profile`: the profile-driven choice between a program and stepwise calling.
"""
