"""The reference semantics of tool programs, one tool call at a time.

:func:`steps` is a generator: it yields a :class:`ToolRequest` for every call and is sent back the result (or a
:class:`ToolFailure`); it returns the program's ``return`` value. The stepwise agent drives it over MCP (one round
trip per call); :func:`execute` drives it with any callable. The WebAssembly compilation must agree with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from envs.services.programs.program import (
    TRANSIENT,
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
    Retry,
    Return,
    Seq,
    Stmt,
    Try,
    Var,
)


@dataclass(frozen=True)
class ToolRequest:
    """One tool call the program wants made (``key`` is the program's idempotency key, not yet namespaced)."""

    tool: str
    args: dict[str, Any]
    effect: str
    key: str | None


class ToolFailure(Exception):
    """A tool call failed; ``kind`` as in envs.services.ServiceError."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


class ProgramFailure(Exception):
    """The program ended with an unhandled failure (a ``fail`` statement or a tool error)."""


class _Returned(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def truthy(v: Any) -> bool:
    """JSON truthiness: null, false, 0, "" and empty containers are false."""
    return bool(v)


def binop(op: str, a: Any, b: Any) -> Any:
    """The binary operators; comparisons with null are false, arithmetic on null is null."""
    if op == "eq":
        return a == b
    if op == "ne":
        return a != b
    if op == "and":
        return truthy(a) and truthy(b)
    if op == "or":
        return truthy(a) or truthy(b)
    numeric = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
    if op in ("add", "sub"):
        if not numeric:
            return None
        return a + b if op == "add" else a - b
    if not numeric:
        return False
    return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[op]


def render(v: Any) -> str:
    """How ``fmt`` prints a value (integers without a decimal point, null as 'null')."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def evaluate(e: Expr, env: dict[str, Any]) -> Any:
    """The value of an expression; unbound variables are null."""
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, Get):
        obj = evaluate(e.obj, env)
        return obj.get(e.field) if isinstance(obj, dict) else None
    if isinstance(e, Len):
        v = evaluate(e.of, env)
        return len(v) if isinstance(v, list | str | dict) else 0
    if isinstance(e, Not):
        return not truthy(evaluate(e.of, env))
    if isinstance(e, Op):
        return binop(e.op, evaluate(e.left, env), evaluate(e.right, env))
    if isinstance(e, Fmt):
        out = e.template
        for a in e.args:
            out = out.replace("{}", render(evaluate(a, env)), 1)
        return out
    assert isinstance(e, Find)
    items = evaluate(e.within, env)
    for item in items if isinstance(items, list) else []:
        if truthy(evaluate(e.where, {**env, e.name: item})):
            return item
    return None


Steps = Generator[ToolRequest, Any, Any]


def _run(s: Stmt, env: dict[str, Any], sleep: Callable[[float], None]) -> Steps:
    if isinstance(s, Call):
        key = evaluate(s.key, env) if s.key is not None else None
        result = yield ToolRequest(s.tool, {k: evaluate(v, env) for k, v in s.args}, s.effect,
                                   None if key is None else render(key))
        if s.bind:
            env[s.bind] = result
    elif isinstance(s, Let):
        env[s.name] = evaluate(s.value, env)
    elif isinstance(s, Seq | Parallel):  # parallel branches are independent (checked), so any order is a join
        for b in s.body if isinstance(s, Seq) else s.branches:
            yield from _run(b, env, sleep)
    elif isinstance(s, If):
        if truthy(evaluate(s.cond, env)):
            yield from _run(s.then, env, sleep)
        elif s.orelse is not None:
            yield from _run(s.orelse, env, sleep)
    elif isinstance(s, For):
        items = evaluate(s.within, env)
        for item in (items if isinstance(items, list) else [])[: s.max_iter]:
            env[s.name] = item
            yield from _run(s.body, env, sleep)
    elif isinstance(s, Retry):
        for attempt in range(s.attempts):
            try:
                yield from _run(s.body, env, sleep)
                break
            except ToolFailure as exc:
                if exc.kind not in TRANSIENT or attempt == s.attempts - 1:
                    raise
                sleep(s.backoff_ms * 2**attempt / 1000.0)
    elif isinstance(s, Try):
        try:
            yield from _run(s.body, env, sleep)
        except (ToolFailure, ProgramFailure):
            yield from _run(s.compensate, env, sleep)
    elif isinstance(s, Fail):
        raise ProgramFailure(s.message)
    else:
        assert isinstance(s, Return)
        raise _Returned(evaluate(s.value, env))


def steps(program: Program, sleep: Callable[[float], None] = time.sleep) -> Steps:
    """The program as a generator of tool requests; its return value is the program's result (null if none).

    An unhandled tool failure propagates as ToolFailure, a ``fail`` as ProgramFailure.
    """
    try:
        yield from _run(program.body, {}, sleep)
    except _Returned as r:
        return r.value
    return None


def execute(program: Program, call: Callable[[ToolRequest], Any], sleep: Callable[[float], None] = time.sleep
            ) -> Any:
    """Run a program, making each call with ``call`` (which raises ToolFailure on errors); returns its result."""
    gen = steps(program, sleep)
    try:
        request = next(gen)
        while True:
            try:
                result = call(request)
            except ToolFailure as exc:
                request = gen.throw(exc)
                continue
            request = gen.send(result)
    except StopIteration as stop:
        return stop.value
