"""Compiles a checked tool program to WebAssembly text.

The module imports exactly two host functions and nothing else (no memory, no WASI):

- ``toolpro.call(tool, args, key, effect) -> handle | -1``: the only way to reach a service. Arguments are handles
  of values in the host's value table (0 is null); -1 means the tool failed (the host keeps the error).
- ``toolpro.value(op, a, b, c) -> i32``: pure operations on immutable JSON values (field access, length,
  indexing, comparison, formatting, building argument objects), backoff sleeps bounded by the run's deadline, and
  setting the program's result. None of them touches files, sockets, clocks or the database.

Control flow (sequence, bounded loops, conditionals, retries, compensation) is compiled to wasm blocks and loops,
so the program itself runs inside the sandbox; constants are preloaded into the value table.
It exports ``run() -> i32`` (0: finished, 1: failed with the host's last error).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from envs.services.programs.program import (
    BINOPS,
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

# value() operation codes (shared with envs.services.programs.executor)
GET, LEN, INDEX, TRUTHY, BINOP, NOT, FMT, LIST_NEW, LIST_PUSH, OBJ_NEW, OBJ_SET = range(1, 12)
ERR_TRANSIENT, SLEEP, RETURN, FAIL, LEN_RAW = range(12, 17)


@dataclass
class Compiled:
    """WebAssembly text and the constant pool whose i-th entry is preloaded as handle i (handle 0 is null)."""

    wat: str
    constants: list[Any]


@dataclass
class _Ctx:
    constants: list[Any] = field(default_factory=lambda: [None])
    index: dict[str, int] = field(default_factory=dict)
    locals: list[str] = field(default_factory=list)
    counter: int = 0

    def const(self, value: Any) -> int:
        key = json.dumps(value, sort_keys=True)
        if key not in self.index:
            self.index[key] = len(self.constants)
            self.constants.append(value)
        return self.index[key]

    def fresh(self, stem: str) -> str:
        self.counter += 1
        name = f"${stem}{self.counter}"
        self.locals.append(name)
        return name

    def var(self, name: str) -> str:
        local = "$v_" + "".join(c if c.isalnum() or c == "_" else "_" for c in name) + f"_{len(name)}"
        if local not in self.locals:
            self.locals.append(local)
        return local


def _value(op: int, a: list[str], b: list[str] | None = None, c: list[str] | None = None) -> list[str]:
    return [f"i32.const {op}", *(a or ["i32.const 0"]), *(b or ["i32.const 0"]), *(c or ["i32.const 0"]), "call $value"]


def _expr(e: Expr, ctx: _Ctx, scope: dict[str, str]) -> list[str]:
    """Instructions that push the handle of ``e``'s value."""
    if isinstance(e, Lit):
        return [f"i32.const {ctx.const(e.value)}"]
    if isinstance(e, Var):
        return [f"local.get {scope.get(e.name) or ctx.var(e.name)}"]
    if isinstance(e, Get):
        return _value(GET, _expr(e.obj, ctx, scope), [f"i32.const {ctx.const(e.field)}"])
    if isinstance(e, Len):
        return _value(LEN, _expr(e.of, ctx, scope))
    if isinstance(e, Not):
        return _value(NOT, _expr(e.of, ctx, scope))
    if isinstance(e, Op):
        return _value(BINOP, _expr(e.left, ctx, scope), _expr(e.right, ctx, scope), [f"i32.const {BINOPS.index(e.op)}"])
    if isinstance(e, Fmt):
        lst = ctx.fresh("fmt")
        out = [*_value(LIST_NEW, []), f"local.set {lst}"]
        for a in e.args:
            out += [*_value(LIST_PUSH, [f"local.get {lst}"], _expr(a, ctx, scope)), "drop"]
        return out + _value(FMT, [f"i32.const {ctx.const(e.template)}"], [f"local.get {lst}"])
    assert isinstance(e, Find)
    lst, n, i, res, item = (ctx.fresh(s) for s in ("flst", "fn", "fi", "fres", "fitem"))
    brk, lp = ctx.fresh("L").replace("$", "$b"), ctx.fresh("L").replace("$", "$l")
    inner = {**scope, e.name: item}
    return [*_expr(e.within, ctx, scope), f"local.set {lst}", *_value(LEN_RAW, [f"local.get {lst}"]),
            f"local.set {n}", "i32.const 0", f"local.set {i}", "i32.const 0", f"local.set {res}",
            f"block {brk}", f"loop {lp}",
            f"local.get {i}", f"local.get {n}", "i32.ge_s", f"br_if {brk}",
            *_value(INDEX, [f"local.get {lst}"], [f"local.get {i}"]), f"local.set {item}",
            *_value(TRUTHY, _expr(e.where, ctx, inner)),
            "if", f"local.get {item}", f"local.set {res}", f"br {brk}", "end",
            f"local.get {i}", "i32.const 1", "i32.add", f"local.set {i}", f"br {lp}", "end", "end",
            f"local.get {res}"]


def _stmt(s: Stmt, ctx: _Ctx, err: str) -> list[str]:
    """Instructions for ``s``; a failure branches to label ``err``."""
    if isinstance(s, Call):
        obj, res = ctx.fresh("args"), ctx.fresh("res")
        out = [*_value(OBJ_NEW, []), f"local.set {obj}"]
        for k, v in s.args:
            out += [*_value(OBJ_SET, [f"local.get {obj}"], [f"i32.const {ctx.const(k)}"], _expr(v, ctx, {})), "drop"]
        key = _expr(s.key, ctx, {}) if s.key is not None else ["i32.const 0"]
        out += [f"i32.const {ctx.const(s.tool)}", f"local.get {obj}", *key, f"i32.const {ctx.const(s.effect)}",
                "call $call", f"local.tee {res}", "i32.const 0", "i32.lt_s", f"br_if {err}"]
        if s.bind:
            out += [f"local.get {res}", f"local.set {ctx.var(s.bind)}"]
        return out
    if isinstance(s, Let):
        return [*_expr(s.value, ctx, {}), f"local.set {ctx.var(s.name)}"]
    if isinstance(s, Seq | Parallel):  # parallel branches are independent (checked): run them in turn, then join
        return [i for b in (s.body if isinstance(s, Seq) else s.branches) for i in _stmt(b, ctx, err)]
    if isinstance(s, If):
        out = [*_value(TRUTHY, _expr(s.cond, ctx, {})), "if", *_stmt(s.then, ctx, err)]
        if s.orelse is not None:
            out += ["else", *_stmt(s.orelse, ctx, err)]
        return out + ["end"]
    if isinstance(s, For):
        lst, n, i = ctx.fresh("lst"), ctx.fresh("n"), ctx.fresh("i")
        brk, lp = ctx.fresh("L").replace("$", "$b"), ctx.fresh("L").replace("$", "$l")
        return [*_expr(s.within, ctx, {}), f"local.set {lst}", *_value(LEN_RAW, [f"local.get {lst}"]),
                f"local.set {n}", f"local.get {n}", f"i32.const {s.max_iter}", "i32.gt_s",
                "if", f"i32.const {s.max_iter}", f"local.set {n}", "end", "i32.const 0", f"local.set {i}",
                f"block {brk}", f"loop {lp}", f"local.get {i}", f"local.get {n}", "i32.ge_s", f"br_if {brk}",
                *_value(INDEX, [f"local.get {lst}"], [f"local.get {i}"]), f"local.set {ctx.var(s.name)}",
                *_stmt(s.body, ctx, err),
                f"local.get {i}", "i32.const 1", "i32.add", f"local.set {i}", f"br {lp}", "end", "end"]
    if isinstance(s, Retry):
        att = ctx.fresh("att")
        done, again, caught = (ctx.fresh("L").replace("$", p) for p in ("$d", "$a", "$e"))
        return ["i32.const 0", f"local.set {att}", f"block {done}", f"loop {again}", f"block {caught}",
                *_stmt(s.body, ctx, caught), f"br {done}", "end",
                *_value(ERR_TRANSIENT, []), "i32.eqz", f"br_if {err}",
                f"local.get {att}", f"i32.const {s.attempts - 1}", "i32.ge_s", f"br_if {err}",
                *_value(SLEEP, [f"i32.const {s.backoff_ms}"], [f"local.get {att}"]), "drop",
                f"local.get {att}", "i32.const 1", "i32.add", f"local.set {att}", f"br {again}", "end", "end"]
    if isinstance(s, Try):
        ok, caught = ctx.fresh("L").replace("$", "$o"), ctx.fresh("L").replace("$", "$c")
        return [f"block {ok}", f"block {caught}", *_stmt(s.body, ctx, caught), f"br {ok}", "end",
                *_stmt(s.compensate, ctx, err), "end"]
    if isinstance(s, Fail):
        return [*_value(FAIL, [f"i32.const {ctx.const(s.message)}"]), "drop", f"br {err}"]
    assert isinstance(s, Return)
    return [*_value(RETURN, _expr(s.value, ctx, {})), "drop", "i32.const 0", "return"]


def compile_program(program: Program) -> Compiled:
    """The WebAssembly text of ``program`` (check it first) and its constant pool."""
    ctx = _Ctx()
    body = _stmt(program.body, ctx, "$fail")
    lines = ["(module",
             '  (import "toolpro" "call" (func $call (param i32 i32 i32 i32) (result i32)))',
             '  (import "toolpro" "value" (func $value (param i32 i32 i32 i32) (result i32)))',
             '  (func $run (export "run") (result i32)']
    lines += [f"    (local {name} i32)" for name in ctx.locals]
    lines += ["    block $fail", *("      " + i for i in body), "      i32.const 0", "      return", "    end",
              "    i32.const 1)", ")"]
    return Compiled("\n".join(lines), ctx.constants)
