"""The tool-program representation: typed expressions and statements, parsed from and printed to JSON.

Statements: ``call`` (with its effect type and, for writes, an idempotency-key expression), ``let``, ``seq``,
``if``, bounded ``for``, ``parallel`` (fan-out/join), ``retry`` (with backoff), ``try``/``compensate``, ``fail`` and
``return``. Expressions: literals, variables, field access, ``len``, binary operators, string formatting and
``find`` (first list element satisfying a predicate). There is no unbounded loop and no recursion in the language.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from envs.errors import ConfigError

BINOPS = ("eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "and", "or")
TRANSIENT = ("unavailable", "timeout")


class ProgramError(ConfigError):
    """A malformed or ill-typed program (the message names the offending node)."""


# ------------------------------------------------------------------------------------------------ expressions
@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Get:
    obj: Expr
    field: str


@dataclass(frozen=True)
class Len:
    of: Expr


@dataclass(frozen=True)
class Op:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not:
    of: Expr


@dataclass(frozen=True)
class Fmt:
    template: str  # "{}" placeholders, filled in order
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Find:
    within: Expr
    name: str  # bound to each element while ``where`` is evaluated
    where: Expr


Expr = Lit | Var | Get | Len | Op | Not | Fmt | Find


# ------------------------------------------------------------------------------------------------- statements
@dataclass(frozen=True)
class Call:
    tool: str
    args: tuple[tuple[str, Expr], ...]
    effect: str
    bind: str | None = None
    key: Expr | None = None


@dataclass(frozen=True)
class Let:
    name: str
    value: Expr


@dataclass(frozen=True)
class Seq:
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class If:
    cond: Expr
    then: Stmt
    orelse: Stmt | None = None


@dataclass(frozen=True)
class For:
    name: str
    within: Expr
    max_iter: int
    body: Stmt


@dataclass(frozen=True)
class Parallel:
    branches: tuple[Stmt, ...]


@dataclass(frozen=True)
class Retry:
    body: Stmt
    attempts: int
    backoff_ms: int


@dataclass(frozen=True)
class Try:
    body: Stmt
    compensate: Stmt


@dataclass(frozen=True)
class Fail:
    message: str


@dataclass(frozen=True)
class Return:
    value: Expr


Stmt = Call | Let | Seq | If | For | Parallel | Retry | Try | Fail | Return


@dataclass(frozen=True)
class Program:
    """A service name and a statement; ``source`` is the JSON it was parsed from (for byte counts)."""

    service: str
    body: Stmt
    source: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"service": self.service, "body": stmt_json(self.body)}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    def pack(self) -> str:
        """The compact wire form: see :func:`pack_program`."""
        return pack_program(self.to_json())


# ----------------------------------------------------------------------------------------------------- parsing
def _need(node: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in node:
        raise ProgramError(f"{where}: missing field {key!r}")
    value = node[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ProgramError(f"{where}: field {key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


EXPR_KINDS = ("lit", "var", "get", "len", "op", "not", "fmt", "find")
STMT_KINDS = ("call", "let", "seq", "if", "for", "parallel", "retry", "try", "fail", "return")


def parse_expr(node: Any, where: str = "expr") -> Expr:
    """An expression from its JSON form."""
    if not isinstance(node, dict) or len(set(node) & set(EXPR_KINDS)) != 1:
        raise ProgramError(f"{where}: not an expression (one of {', '.join(EXPR_KINDS)}): {json.dumps(node)[:80]}")
    if "lit" in node:
        return Lit(node["lit"])
    if "var" in node:
        return Var(_need(node, "var", str, where))
    if "get" in node:
        obj, name = _need(node, "get", list, where) if len(node["get"]) == 2 else (None, None)
        if obj is None or not isinstance(name, str):
            raise ProgramError(f"{where}: get needs [expr, field]")
        return Get(parse_expr(obj, where + ".get"), name)
    if "len" in node:
        return Len(parse_expr(node["len"], where + ".len"))
    if "not" in node:
        return Not(parse_expr(node["not"], where + ".not"))
    if "op" in node:
        op = node["op"]
        if op not in BINOPS:
            raise ProgramError(f"{where}: unknown operator {op!r}; valid: {', '.join(BINOPS)}")
        args = _need(node, "args", list, where)
        if len(args) != 2:
            raise ProgramError(f"{where}: operator {op} takes 2 arguments, got {len(args)}")
        return Op(op, parse_expr(args[0], where + f".{op}[0]"), parse_expr(args[1], where + f".{op}[1]"))
    if "fmt" in node:
        template = _need(node, "fmt", str, where)
        args = tuple(parse_expr(a, f"{where}.fmt[{i}]") for i, a in enumerate(node.get("args", [])))
        if template.count("{}") != len(args):
            raise ProgramError(f"{where}: fmt {template!r} has {template.count('{}')} slots for {len(args)} args")
        return Fmt(template, args)
    spec = _need(node, "find", dict, where)
    return Find(parse_expr(spec.get("in"), where + ".find.in"), _need(spec, "as", str, where + ".find"),
                parse_expr(spec.get("where"), where + ".find.where"))


def parse_stmt(node: Any, where: str = "body") -> Stmt:
    """A statement from its JSON form."""
    if not isinstance(node, dict) or len(set(node) & set(STMT_KINDS)) != 1:
        raise ProgramError(f"{where}: not a statement (one of {', '.join(STMT_KINDS)}): {json.dumps(node)[:80]}")
    if "call" in node:
        args = _need(node, "args", dict, where) if "args" in node else {}
        return Call(_need(node, "call", str, where),
                    tuple((k, parse_expr(v, f"{where}.args.{k}")) for k, v in sorted(args.items())),
                    _need(node, "effect", str, where), node.get("bind"),
                    parse_expr(node["key"], where + ".key") if node.get("key") is not None else None)
    if "let" in node:
        return Let(_need(node, "let", str, where), parse_expr(node.get("value"), where + ".value"))
    if "seq" in node:
        return Seq(tuple(parse_stmt(s, f"{where}[{i}]") for i, s in enumerate(_need(node, "seq", list, where))))
    if "if" in node:
        return If(parse_expr(node["if"], where + ".if"), parse_stmt(node.get("then"), where + ".then"),
                  parse_stmt(node["else"], where + ".else") if node.get("else") is not None else None)
    if "for" in node:
        if "max" not in node:
            raise ProgramError(f"{where}: loop over {node['for']!r} has no iteration bound 'max' (unbounded loop)")
        return For(_need(node, "for", str, where), parse_expr(node.get("in"), where + ".in"),
                   _need(node, "max", int, where), parse_stmt(node.get("do"), where + ".do"))
    if "parallel" in node:
        return Parallel(tuple(parse_stmt(s, f"{where}.parallel[{i}]")
                              for i, s in enumerate(_need(node, "parallel", list, where))))
    if "retry" in node:
        return Retry(parse_stmt(node["retry"], where + ".retry"), _need(node, "attempts", int, where),
                     _need(node, "backoff_ms", int, where))
    if "try" in node:
        return Try(parse_stmt(node["try"], where + ".try"), parse_stmt(node.get("compensate"), where + ".compensate"))
    if "fail" in node:
        return Fail(_need(node, "fail", str, where))
    return Return(parse_expr(node["return"], where + ".return"))


# ------------------------------------------------------------------------------------------- compact wire form
# The program's JSON spelled by its grammar: every node kind and field, the most frequent last (deflate reaches
# back to the end of a preset dictionary most cheaply). Both ends hold it, so it costs nothing on the wire; it
# comes from the grammar above, not from any task's programs.
PACK_DICTIONARY = "".join((
    '{"service":"', '"body":', '{"fail":"', '{"return":', '{"try":', '"compensate":', '{"parallel":[', '{"not":',
    '{"len":', '{"find":{"in":', '"as":"', '"where":', '{"let":"', '"value":', '{"if":', '"then":', '"else":',
    '{"for":"', '"in":', '"max":', '"do":', '{"seq":[', '{"fmt":"', '"args":[', '{"op":"', '"bind":"', '"key":',
    '"attempts":', '"backoff_ms":', '"effect":"idempotent_write"', '"effect":"write"', '"effect":"read"',
    '{"call":"', '"args":{', '{"retry":', '{"get":[', '{"var":"', '{"lit":',
)).encode()
PACK_PREFIX = "tp1:"
MAX_UNPACKED_BYTES = 1 << 20
MAX_PROGRAM_DEPTH = 200  # JSON nesting of a program; planned programs stay under 30, Python recursion ends near 1000


def pack_program(program_json: dict[str, Any]) -> str:
    """``tp1:`` + base85 of the raw-deflated compact JSON, with :data:`PACK_DICTIONARY` preset (~3x smaller)."""
    raw = json.dumps(program_json, separators=(",", ":")).encode()
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, PACK_DICTIONARY)
    return PACK_PREFIX + base64.b85encode(deflate.compress(raw) + deflate.flush()).decode()


def unpack_program(text: str, max_bytes: int = MAX_UNPACKED_BYTES) -> dict[str, Any]:
    """The program JSON of a packed program; ProgramError when it is not one, or inflates past ``max_bytes``
    (a compression bomb is refused before it is expanded in full)."""
    if not text.startswith(PACK_PREFIX):
        raise ProgramError(f"packed program must start with {PACK_PREFIX!r}")
    try:
        data = base64.b85decode(text[len(PACK_PREFIX):])
        inflate = zlib.decompressobj(-15, zdict=PACK_DICTIONARY)
        raw = inflate.decompress(data, max_bytes + 1)
    except (ValueError, binascii.Error, zlib.error) as exc:
        raise ProgramError(f"packed program does not decode: {exc}") from None
    if len(raw) > max_bytes or inflate.unconsumed_tail:
        raise ProgramError(f"packed program inflates past {max_bytes} bytes")
    if not inflate.eof:
        raise ProgramError("packed program is truncated")
    return parse_json_object(raw.decode("utf-8", errors="replace"))


def parse_json_object(text: str) -> Any:
    """JSON text → value; ProgramError naming the position when it is not JSON, or when it nests too deep."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProgramError(f"program is not valid JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:
        raise ProgramError(f"program nests deeper than {MAX_PROGRAM_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer literal past Python's 4300-digit conversion limit
        raise ProgramError(f"program is not valid JSON: {str(exc).splitlines()[0][:120]}") from None


def check_depth(value: Any, limit: int = MAX_PROGRAM_DEPTH) -> None:
    """ProgramError when ``value`` nests lists and objects more than ``limit`` deep (a value that contains itself
    nests without end).

    Iterative, so it never recurses: parsing, checking and compiling recurse once per level and stay far from
    Python's recursion limit only below ``limit``. A node shared by several parents is walked again only when it is
    reached deeper than before, so the walk is at most nodes × limit steps."""
    stack, reached = [(value, 1)], {}
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict | list) or reached.get(id(node), 0) >= depth:
            continue
        if depth > limit:
            raise ProgramError(f"program nests deeper than {limit} levels")
        reached[id(node)] = depth
        stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))


def parse_program(source: Any) -> Program:
    """A program from its JSON form (a dict, a JSON string or a packed string); ProgramError when malformed."""
    if isinstance(source, str) and source.startswith(PACK_PREFIX):
        source = unpack_program(source)
    elif isinstance(source, str):
        source = parse_json_object(source)
    if not isinstance(source, dict):
        raise ProgramError(f"program must be a JSON object, got {type(source).__name__}")
    check_depth(source)
    return Program(_need(source, "service", str, "program"), parse_stmt(source.get("body"), "body"), source)


# ---------------------------------------------------------------------------------------------------- printing
def expr_json(e: Expr) -> dict[str, Any]:
    """The JSON form of an expression."""
    if isinstance(e, Lit):
        return {"lit": e.value}
    if isinstance(e, Var):
        return {"var": e.name}
    if isinstance(e, Get):
        return {"get": [expr_json(e.obj), e.field]}
    if isinstance(e, Len):
        return {"len": expr_json(e.of)}
    if isinstance(e, Not):
        return {"not": expr_json(e.of)}
    if isinstance(e, Op):
        return {"op": e.op, "args": [expr_json(e.left), expr_json(e.right)]}
    if isinstance(e, Fmt):
        return {"fmt": e.template, "args": [expr_json(a) for a in e.args]}
    return {"find": {"in": expr_json(e.within), "as": e.name, "where": expr_json(e.where)}}


def stmt_json(s: Stmt) -> dict[str, Any]:
    """The JSON form of a statement."""
    if isinstance(s, Call):
        out: dict[str, Any] = {"call": s.tool, "args": {k: expr_json(v) for k, v in s.args}, "effect": s.effect}
        if s.bind:
            out["bind"] = s.bind
        if s.key is not None:
            out["key"] = expr_json(s.key)
        return out
    if isinstance(s, Let):
        return {"let": s.name, "value": expr_json(s.value)}
    if isinstance(s, Seq):
        return {"seq": [stmt_json(b) for b in s.body]}
    if isinstance(s, If):
        out = {"if": expr_json(s.cond), "then": stmt_json(s.then)}
        if s.orelse is not None:
            out["else"] = stmt_json(s.orelse)
        return out
    if isinstance(s, For):
        return {"for": s.name, "in": expr_json(s.within), "max": s.max_iter, "do": stmt_json(s.body)}
    if isinstance(s, Parallel):
        return {"parallel": [stmt_json(b) for b in s.branches]}
    if isinstance(s, Retry):
        return {"retry": stmt_json(s.body), "attempts": s.attempts, "backoff_ms": s.backoff_ms}
    if isinstance(s, Try):
        return {"try": stmt_json(s.body), "compensate": stmt_json(s.compensate)}
    if isinstance(s, Fail):
        return {"fail": s.message}
    return {"return": expr_json(s.value)}
