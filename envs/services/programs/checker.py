"""The effect and type checker: a program passes only if it can run safely against the declared tools.

Rejected: unknown tools, a call whose declared effect differs from the tool's, arguments that are missing, unknown
or of the wrong type for the tool's input schema, field access a tool's output schema does not have, undefined
variables, loops without a bound or above ``MAX_ITER``, retries above ``MAX_ATTEMPTS``, state-modifying ``write``
calls without an idempotency key (and, inside loops, keys that do not depend on every enclosing loop variable, which
would make two iterations share one key), parallel branches that read each other's bindings, and programs whose
worst-case number of calls exceeds ``MAX_CALLS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from envs.services.programs.program import (
    Call,
    Expr,
    Fail,
    Find,
    Fmt,
    For,
    Get,
    If,
    Len,
    Let,
    Lit,
    Not,
    Op,
    Parallel,
    Program,
    ProgramError,
    Retry,
    Return,
    Seq,
    Stmt,
    Try,
    Var,
)
from envs.services.tools import EFFECTS

MAX_ITER = 1000
MAX_ATTEMPTS = 10
MAX_BACKOFF_MS = 10_000
MAX_CALLS = 10_000
KEY_FIELD = "idempotency_key"


@dataclass(frozen=True)
class CheckReport:
    """What the checker learned: worst-case calls, and how many call sites have each effect."""

    call_bound: int
    write_bound: int
    sites: dict[str, int]
    nominal_calls: int  # calls when no retry fires: loops at their bound, the larger branch of each conditional


def _schema_of(value: Any) -> dict[str, Any] | None:
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    return {"type": kinds[type(value)]} if type(value) in kinds else None


def _compatible(actual: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    if not actual or "type" not in actual or "type" not in wanted:
        return True
    a, w = actual["type"], wanted["type"]
    return a == w or (a == "integer" and w == "number")


def _vars(e: Expr) -> set[str]:
    if isinstance(e, Var):
        return {e.name}
    if isinstance(e, Get):
        return _vars(e.obj)
    if isinstance(e, Len | Not):
        return _vars(e.of)
    if isinstance(e, Op):
        return _vars(e.left) | _vars(e.right)
    if isinstance(e, Fmt):
        return set().union(*(_vars(a) for a in e.args)) if e.args else set()
    if isinstance(e, Find):
        return _vars(e.within) | (_vars(e.where) - {e.name})
    return set()


class _Checker:
    def __init__(self, tools: Mapping[str, Mapping[str, Any]]) -> None:
        self.tools = tools
        self.sites: dict[str, int] = {e: 0 for e in EFFECTS}
        self.writes = 0

    def nominal(self, s: Stmt) -> int:
        """Calls of ``s`` when every retry succeeds at once (the profile policy's estimate)."""
        if isinstance(s, Call):
            return 1
        if isinstance(s, Seq | Parallel):
            return sum(self.nominal(b) for b in (s.body if isinstance(s, Seq) else s.branches))
        if isinstance(s, If):
            return max(self.nominal(s.then), self.nominal(s.orelse) if s.orelse is not None else 0)
        if isinstance(s, For):
            return s.max_iter * self.nominal(s.body)
        if isinstance(s, Retry):
            return self.nominal(s.body)
        if isinstance(s, Try):
            return self.nominal(s.body)
        return 0

    # types are JSON schemas (None: unknown)
    def expr(self, e: Expr, env: dict[str, Any], where: str) -> dict[str, Any] | None:
        if isinstance(e, Lit):
            return _schema_of(e.value)
        if isinstance(e, Var):
            if e.name not in env:
                raise ProgramError(f"{where}: undefined variable {e.name!r}")
            return env[e.name]
        if isinstance(e, Get):
            t = self.expr(e.obj, env, where)
            if t and t.get("type") in ("array", "string", "integer", "number", "boolean"):
                raise ProgramError(f"{where}: field {e.field!r} read from a {t['type']}")
            props = (t or {}).get("properties")
            if props is not None and e.field not in props:
                raise ProgramError(f"{where}: no field {e.field!r} (has {', '.join(props) or 'none'})")
            return props[e.field] if props is not None else None
        if isinstance(e, Len):
            self.expr(e.of, env, where)
            return {"type": "integer"}
        if isinstance(e, Not):
            self.expr(e.of, env, where)
            return {"type": "boolean"}
        if isinstance(e, Op):
            lt, rt = self.expr(e.left, env, where), self.expr(e.right, env, where)
            if e.op in ("add", "sub", "lt", "le", "gt", "ge"):
                for t in (lt, rt):
                    if t and t.get("type") not in (None, "integer", "number"):
                        raise ProgramError(f"{where}: operator {e.op} on a {t['type']}")
            return {"type": "number"} if e.op in ("add", "sub") else {"type": "boolean"}
        if isinstance(e, Fmt):
            for a in e.args:
                self.expr(a, env, where)
            return {"type": "string"}
        assert isinstance(e, Find)
        t = self.expr(e.within, env, where)
        if t and t.get("type") not in (None, "array"):
            raise ProgramError(f"{where}: find over a {t['type']}")
        item = (t or {}).get("items")
        self.expr(e.where, {**env, e.name: item}, where + ".find")
        return item

    def call(self, s: Call, env: dict[str, Any], loops: tuple[str, ...], where: str) -> None:
        if s.tool not in self.tools:
            raise ProgramError(f"{where}: unknown tool {s.tool!r}; valid: {', '.join(self.tools)}")
        decl = self.tools[s.tool]
        if s.effect not in EFFECTS:
            raise ProgramError(f"{where}: unknown effect {s.effect!r}; valid: {', '.join(EFFECTS)}")
        if s.effect != decl["effect"]:
            raise ProgramError(f"{where}: {s.tool} is declared {decl['effect']}, the program says {s.effect}")
        schema = decl["input_schema"]
        props = {k: v for k, v in schema.get("properties", {}).items() if k != KEY_FIELD}
        given = {k for k, _ in s.args}
        for k in given - set(props):
            raise ProgramError(f"{where}: {s.tool} has no argument {k!r}; valid: {', '.join(props)}")
        for k in schema.get("required", []):
            if k not in given:
                raise ProgramError(f"{where}: {s.tool} needs argument {k!r}")
        for k, v in s.args:
            if isinstance(v, Lit):
                try:
                    jsonschema.validate(v.value, props[k])
                except jsonschema.ValidationError as exc:
                    raise ProgramError(f"{where}: {s.tool}.{k}: {exc.message}") from None
            elif not _compatible(self.expr(v, env, f"{where}.{k}"), props[k]):
                raise ProgramError(f"{where}: {s.tool}.{k} needs {props[k].get('type')}, "
                                   f"got {self.expr(v, env, where).get('type')}")  # type: ignore[union-attr]
        if s.effect == "write":
            if s.key is None:
                raise ProgramError(f"{where}: write call {s.tool} has no idempotency key")
            missing = [v for v in loops if v not in _vars(s.key)]
            if missing:
                raise ProgramError(f"{where}: the idempotency key of {s.tool} does not depend on loop variable "
                                   f"{missing[0]!r}, so its iterations would share one key")
        if s.key is not None:
            self.expr(s.key, env, where + ".key")
        self.sites[s.effect] += 1
        if s.bind:
            env[s.bind] = decl.get("output_schema")

    def stmt(self, s: Stmt, env: dict[str, Any], loops: tuple[str, ...], where: str) -> tuple[int, int]:
        """Check ``s`` (binding into ``env``); returns its worst-case (calls, writes)."""
        if isinstance(s, Call):
            self.call(s, env, loops, where)
            return 1, int(s.effect in ("write", "idempotent_write"))
        if isinstance(s, Let):
            env[s.name] = self.expr(s.value, env, where)
            return 0, 0
        if isinstance(s, Seq):
            totals = [self.stmt(b, env, loops, f"{where}[{i}]") for i, b in enumerate(s.body)]
            return sum(t[0] for t in totals), sum(t[1] for t in totals)
        if isinstance(s, If):
            self.expr(s.cond, env, where + ".if")
            a = self.stmt(s.then, env, loops, where + ".then")
            b = self.stmt(s.orelse, env, loops, where + ".else") if s.orelse is not None else (0, 0)
            return max(a[0], b[0]), max(a[1], b[1])
        if isinstance(s, For):
            if not 1 <= s.max_iter <= MAX_ITER:
                raise ProgramError(f"{where}: loop bound {s.max_iter} outside 1..{MAX_ITER}")
            t = self.expr(s.within, env, where + ".in")
            if t and t.get("type") not in (None, "array"):
                raise ProgramError(f"{where}: loop over a {t['type']}")
            env[s.name] = (t or {}).get("items")
            calls, writes = self.stmt(s.body, env, (*loops, s.name), where + ".do")
            return calls * s.max_iter, writes * s.max_iter
        if isinstance(s, Parallel):
            bound: dict[str, int] = {}
            calls = writes = 0
            for i, b in enumerate(s.branches):
                local = dict(env)
                c, w = self.stmt(b, local, loops, f"{where}.parallel[{i}]")
                calls, writes = calls + c, writes + w
                for name in set(local) - set(env):
                    if name in bound:
                        raise ProgramError(f"{where}: parallel branches {bound[name]} and {i} both bind {name!r}")
                    bound[name] = i
            for i, b in enumerate(s.branches):  # a branch may not read what a sibling binds
                reads = _reads(b)
                for name, j in bound.items():
                    if j != i and name in reads:
                        raise ProgramError(f"{where}: parallel branch {i} reads {name!r} bound by branch {j}")
            for i, b in enumerate(s.branches):
                self.stmt(b, env, loops, f"{where}.parallel[{i}]")
            return calls, writes
        if isinstance(s, Retry):
            if not 1 <= s.attempts <= MAX_ATTEMPTS or not 0 <= s.backoff_ms <= MAX_BACKOFF_MS:
                raise ProgramError(f"{where}: retry needs 1..{MAX_ATTEMPTS} attempts and 0..{MAX_BACKOFF_MS} ms "
                                   f"backoff, got {s.attempts} and {s.backoff_ms}")
            calls, writes = self.stmt(s.body, env, loops, where + ".retry")
            return calls * s.attempts, writes * s.attempts
        if isinstance(s, Try):
            a = self.stmt(s.body, env, loops, where + ".try")
            b = self.stmt(s.compensate, env, loops, where + ".compensate")
            return a[0] + b[0], a[1] + b[1]
        if isinstance(s, Return):
            self.expr(s.value, env, where + ".return")
            return 0, 0
        assert isinstance(s, Fail)
        return 0, 0


def _reads(s: Stmt) -> set[str]:
    """Every variable a statement reads (over-approximated)."""
    if isinstance(s, Call):
        out = set().union(*(_vars(v) for _, v in s.args)) if s.args else set()
        return out | (_vars(s.key) if s.key is not None else set())
    if isinstance(s, Let):
        return _vars(s.value)
    if isinstance(s, Seq | Parallel):
        parts = s.body if isinstance(s, Seq) else s.branches
        return set().union(*(_reads(b) for b in parts)) if parts else set()
    if isinstance(s, If):
        return _vars(s.cond) | _reads(s.then) | (_reads(s.orelse) if s.orelse is not None else set())
    if isinstance(s, For):
        return _vars(s.within) | (_reads(s.body) - {s.name})
    if isinstance(s, Retry):
        return _reads(s.body)
    if isinstance(s, Try):
        return _reads(s.body) | _reads(s.compensate)
    if isinstance(s, Return):
        return _vars(s.value)
    return set()


def check(program: Program, tools: Mapping[str, Mapping[str, Any]], service: str | None = None) -> CheckReport:
    """Check ``program`` against tool declarations (name -> effect, input_schema, output_schema).

    Raises ProgramError naming the first problem; returns the worst-case call bound otherwise.
    """
    if service is not None and program.service != service:
        raise ProgramError(f"program targets service {program.service!r}, this is {service!r}")
    checker = _Checker(tools)
    calls, writes = checker.stmt(program.body, {}, (), "body")
    if calls > MAX_CALLS:
        raise ProgramError(f"program may make {calls} calls, more than the limit {MAX_CALLS}")
    return CheckReport(call_bound=calls, write_bound=writes, sites=checker.sites,
                       nominal_calls=checker.nominal(program.body))
