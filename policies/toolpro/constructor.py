"""Constraint-guided program construction: a chooser (a language model) builds a program one grammar decision at a
time, and only ever sees choices that keep the partial program well-formed and well-typed.

The program is shown to the chooser as compact pseudo-code (the JSON form is built alongside)::

    r1 = search_flights(origin="AMS", dest="BER", day=1)
    r2 = first(r1.flights, x => x.seats > 0)
    if r2 then
      r3 = book_flight(flight_id=r2.id, traveller="ann")
    end
    end

Every decision offers only continuations the grammar and the tool declarations allow at that point:

- statements: a call of a tool whose required arguments all have a candidate value, ``first(list, x => cond)``,
  ``for`` over a list in scope with a bound ``max``, ``if``/``else``, ``parallel`` (reads whose arguments come from
  before the fan-out), ``try``/``compensate``, ``fail``, ``return``, or the block's end;
- a tool's arguments: required ones in order, then optional ones or ``)``; names from its input schema;
- values: variables and fields in scope whose JSON-schema type matches the argument, and literals taken from the task
  (numbers and strings in its instruction and parameters, the parameter lists) or the schema's ``enum`` that validate
  against the argument's schema;
- conditions: a value in scope, compared with a task number (numeric values) or string, or tested for being empty.

The constructor fixes what has one right answer: result names (``r1``, ``r2``, ...), effect types (from the tool),
a ``retry`` around every call (transient errors), and each ``write``'s idempotency key (the tool name and every
argument, plus each enclosing loop variable the arguments do not already depend on). It also keeps the worst-case
call count under the checker's limit while choosing loop bounds, and caps statements and nesting so decoding ends.
So every program it returns passes :func:`envs.services.programs.checker.check`; the chooser only decides *which*
well-typed program. Choosers: :class:`perception.lm_choice.LMChooser` (the offline SmolLM2) and
:class:`RandomChooser` (uniform over the same choices, a floor for comparison).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import jsonschema
import numpy as np

from envs.config import Options
from envs.services.programs.checker import KEY_FIELD, MAX_CALLS, MAX_ITER, check
from envs.services.programs.program import ProgramError, parse_program

J = dict[str, Any]


class Chooser(Protocol):
    """What drives construction: given the prompt, repeatedly pick one of the offered continuations."""

    def start(self, system: str, user: str, prefix: str = "") -> None: ...

    def choose(self, options: Sequence[str]) -> int: ...

    def append(self, text: str) -> None: ...


class RandomChooser:
    """Uniform choice among the offered continuations (seeded): what the grammar alone produces."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def start(self, system: str, user: str, prefix: str = "") -> None:
        """Nothing to encode."""

    def choose(self, options: Sequence[str]) -> int:
        """A uniformly random index."""
        return int(self.rng.integers(len(options)))

    def append(self, text: str) -> None:
        """Nothing to remember."""


@dataclass(frozen=True)
class ConstructorConfig(Options):
    """Limits that make decoding end and keep programs inside the checker's bounds."""

    max_statements: int = 24  # statements in the whole program
    max_depth: int = 3  # nested blocks
    retry_attempts: int = 3  # the retry put around every call
    backoff_ms: int = 20
    default_bound: int = 100  # loop bound offered besides the task's own numbers


@dataclass
class Construction:
    """A constructed program and what building it cost."""

    program: J
    text: str  # the pseudo-code the chooser saw
    decisions: int  # choices with more than one option
    options: int  # options offered over those choices
    seconds: float


@dataclass(frozen=True)
class Value:
    """An expression available at this point: its JSON form, how the chooser sees it, and its schema."""

    expr: J
    text: str
    schema: Mapping[str, Any] | None


def kind(schema: Mapping[str, Any] | None) -> str | None:
    """The JSON type of a schema (the non-null one of a nullable type), None when unknown."""
    t = (schema or {}).get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    return t


def _matches(actual: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    # Stricter than the checker (which accepts unknown types): only values of a known, matching, non-nullable type
    # are offered (a nullable value may be null, which no argument schema here accepts).
    a, w = (actual or {}).get("type"), kind(wanted)
    return isinstance(a, str) and (a == w or (a == "integer" and w == "number"))


def _schema_of_literal(value: Any) -> J:
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if isinstance(value, list):
        return {"type": "array", "items": _schema_of_literal(value[0]) if value else {}}
    return {"type": kinds.get(type(value), "object")}


@dataclass
class TaskLiterals:
    """Literal values a program may use: numbers and strings of the task, and its list parameters."""

    ints: list[int] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    lists: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, instruction: str, params: Mapping[str, Any]) -> TaskLiterals:
        """Numbers in the instruction, quoted strings in it, and every scalar and list parameter."""
        out = cls()
        for name, v in params.items():
            if isinstance(v, bool):
                continue
            if isinstance(v, int):
                out.ints.append(v)
            elif isinstance(v, str):
                out.strings.append(v)
            elif isinstance(v, list) and v and all(isinstance(x, str | int) for x in v):
                out.lists[name] = v
        out.ints += [int(n) for n in re.findall(r"(?<![\w-])\d+(?![\w-])", instruction)]
        out.strings += re.findall(r"'([^']+)'", instruction) + re.findall(r'"([^"]+)"', instruction)
        out.ints = sorted(set(out.ints))
        out.strings = list(dict.fromkeys(out.strings))
        return out


def _valid(value: Any, schema: Mapping[str, Any]) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


def _vars(e: Any) -> set[str]:
    if isinstance(e, dict):
        if "var" in e:
            return {e["var"]}
        return set().union(*(_vars(v) for v in e.values())) if e else set()
    if isinstance(e, list):
        return set().union(*(_vars(v) for v in e)) if e else set()
    return set()


def describe_tools(tools: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per tool: ``name(arg: type, opt?: type) -> fields [effect] description``."""
    lines = []
    for name, t in tools.items():
        schema = t["input_schema"]
        req = schema.get("required", [])
        args = [f"{a}{'' if a in req else '?'}: {kind(s) or 'any'}"
                + (f" one of {'|'.join(map(str, s['enum']))}" if "enum" in s else "")
                for a, s in schema.get("properties", {}).items() if a != KEY_FIELD]
        out = (t.get("output_schema") or {}).get("properties", {})
        fields = ", ".join(f"{f}{'[]' if kind(s) == 'array' else ''}" for f, s in out.items()) or "result"
        lines.append(f"{name}({', '.join(args)}) -> {fields} [{t['effect']}] {t.get('description', '')}".rstrip())
    return "\n".join(lines)


SYNTAX = """Program syntax, one statement per line:
rN = tool(arg=value, ...)              call a tool, result in rN
rN = first(list, x => x.field > 0)     first element of a list meeting a condition (null if none)
for itemN in list (max N) do ... end   repeat for each element (at most N)
if condition then ... else ... end
parallel do ... end                    independent reads at once
try do ... compensate ... end          undo what failed
fail / return value / end (the program's last line)
Values: "text", numbers, task.<list parameter>, rN.field, itemN.field.
Example (library service; task: lend 'dune' to each reader if a copy is free):
r1 = find_book(title="dune")
for item1 in task.readers (max 3) do
  if r1.copies > 0 then
    r2 = lend_book(book_id=r1.id, reader=item1)
  end
end
end"""

COMPARATORS = {" > ": "gt", " >= ": "ge", " < ": "lt", " <= ": "le", " == ": "eq", " != ": "ne"}


class ProgramConstructor:
    """Builds a checked program for a task with a :class:`Chooser` (see the module docstring)."""

    def __init__(self, chooser: Chooser, config: ConstructorConfig | None = None) -> None:
        self.chooser = chooser
        self.config = config or ConstructorConfig()

    # --------------------------------------------------------------------------------------------- entry point
    def construct(self, instruction: str, params: Mapping[str, Any], service: str,
                  tools: Mapping[str, Mapping[str, Any]]) -> Construction:
        """A program for the task that passes the checker against ``tools`` (name -> effect, schemas, description).

        ``instruction`` and ``params`` are the task as the agent receives it; nothing else about the task is used.
        """
        t0 = time.perf_counter()
        self.tools = {n: t for n, t in tools.items() if t.get("effect") in ("pure", "read", "write",
                                                                           "idempotent_write")}
        self.lits = TaskLiterals.of(instruction, params)
        self.scope: dict[str, Mapping[str, Any] | None] = {}
        self.statements = self.results = self.decisions = self.offered = 0
        self.call_bound = 0
        self.text: list[str] = []
        self.open: tuple[str, ...] = ()  # kinds of the blocks being built, innermost last
        self.snapshot: dict[str, Any] | None = None  # inside a parallel: the scope before the fan-out
        self.joined: dict[str, Any] = {}  # inside a parallel: what its branches bind (visible after the join)
        self.closed = ""  # the keyword that closed the last block
        self.block_calls: list[tuple[str, str]] = []  # (tool, arguments) of the calls in the current block
        # id(schema) -> (schema, its literal values); the schema is held so its id cannot be reused
        self.literal_cache: dict[int, tuple[Mapping[str, Any], list[Value]]] = {}
        system = f"You write a program for the {service} service that does the user's task.\nTools:\n" + \
            describe_tools(self.tools) + "\n" + SYNTAX
        user = f"Task: {instruction}\nParameters: {json.dumps(dict(params))}"
        self.chooser.start(system, user, "Program:")
        body = self._block("top", 0, (), 1)
        program = {"service": service, "body": {"seq": body}}
        try:
            check(parse_program(program), self.tools, service)
        except ProgramError as exc:  # a construction bug, never the chooser's doing
            raise ProgramError(f"constructed program fails the checker: {exc}") from None
        return Construction(program, "".join(self.text), self.decisions, self.offered, time.perf_counter() - t0)

    # ----------------------------------------------------------------------------------------------- decisions
    def _pick(self, options: Sequence[str]) -> int:
        if not options:
            raise ProgramError("construction reached a point with no valid continuation")
        i = self.chooser.choose(options) if len(options) > 1 else 0
        if len(options) > 1:
            self.decisions += 1
            self.offered += len(options)
        self._emit(options[i])
        return i

    def _emit(self, text: str) -> None:
        self.chooser.append(text)
        self.text.append(text)

    # ------------------------------------------------------------------------------------------------- values
    def values(self, scope: Mapping[str, Mapping[str, Any] | None] | None = None) -> list[Value]:
        """Every variable in scope and its fields (two levels), plus the task's list parameters."""
        out = []
        for name, schema in (self.scope if scope is None else scope).items():
            out.append(Value({"var": name}, name, schema))
            for f, s in ((schema or {}).get("properties") or {}).items():
                e = {"get": [{"var": name}, f]}
                out.append(Value(e, f"{name}.{f}", s))
                for g, s2 in ((s or {}).get("properties") or {}).items():
                    out.append(Value({"get": [e, g]}, f"{name}.{f}.{g}", s2))
        for name, v in self.lits.lists.items():
            out.append(Value({"lit": v}, f"task.{name}", _schema_of_literal(v)))
        return out

    def candidates(self, schema: Mapping[str, Any], scope: Mapping[str, Any] | None = None) -> list[Value]:
        """Values an argument with this schema may take: typed values in scope, then task literals that validate."""
        out = [v for v in self.values(scope) if "lit" not in v.expr and _matches(v.schema, schema)]
        return out + self._literals(schema)

    def _literals(self, schema: Mapping[str, Any]) -> list[Value]:
        """The task literals (and enum values) that validate against ``schema``; cached per schema object, as
        the same few argument schemas are asked about at every decision."""
        if id(schema) not in self.literal_cache:
            lits: list[Any] = list(schema.get("enum", []))
            if kind(schema) in ("integer", "number"):
                lits += self.lits.ints
            elif kind(schema) == "string":
                lits += self.lits.strings
            unique = {json.dumps(v): v for v in lits}
            self.literal_cache[id(schema)] = (schema, [Value({"lit": v}, t, _schema_of_literal(v))
                                                       for t, v in unique.items() if _valid(v, schema)])
        return self.literal_cache[id(schema)][1]

    def callable_tools(self, reads_only: bool, scope: Mapping[str, Any] | None, mult: int) -> list[str]:
        """Tools whose required arguments all have a candidate, within the call budget."""
        if self.call_bound + self.config.retry_attempts * mult > MAX_CALLS:
            return []
        out = []
        for name, t in self.tools.items():
            if reads_only and t["effect"] not in ("pure", "read"):
                continue
            schema = t["input_schema"]
            props = schema.get("properties", {})
            counts = [len(self.candidates(props[a], scope)) for a in schema.get("required", []) if a != KEY_FIELD]
            if all(counts) and not self._exhausted(name, counts, props, scope):
                out.append(name)
        return out

    def _exhausted(self, tool: str, counts: list[int], props: Mapping[str, Any], scope: Mapping[str, Any] | None
                   ) -> bool:
        """True when the block already made as many distinct calls of ``tool`` as its argument values allow
        (no optional argument left to vary), so any further call would repeat one."""
        required = set(self.tools[tool]["input_schema"].get("required", []))
        if any(a not in required and self.candidates(props[a], scope) for a in props if a != KEY_FIELD):
            return False
        return sum(t == tool for t, _ in self.block_calls) >= int(np.prod(counts))

    # --------------------------------------------------------------------------------------------- statements
    def _block(self, block: str, depth: int, loops: tuple[tuple[str, J], ...], mult: int) -> list[J]:
        """Statements until the chooser closes the block (``block`` is top, then, else, for, parallel, try,
        compensate); the closing keyword taken is left in ``self.closed``."""
        ind, outer = "  " * depth, "  " * max(depth - 1, 0)
        closers = {"top": ["\nend"], "then": [f"\n{outer}else", f"\n{outer}end"], "try": [f"\n{outer}compensate"]}
        body: list[J] = []
        saved_calls, self.block_calls = self.block_calls, []
        try:
            return self._statements(block, depth, loops, mult, body, closers, ind, outer)
        finally:
            self.block_calls = saved_calls

    def _statements(self, block: str, depth: int, loops: tuple[tuple[str, J], ...], mult: int, body: list[J],
                    closers: dict[str, list[str]], ind: str, outer: str) -> list[J]:
        while True:
            options: list[tuple[str, str]] = []
            # Nothing after a return or fail in the same block: it could never run.
            room = self.statements < self.config.max_statements and not (body and ("return" in body[-1]
                                                                                   or "fail" in body[-1]))
            deeper = room and depth + 1 < self.config.max_depth
            if room and block == "parallel":
                options += [(f"\n{ind}r{self.results + 1} = {t}(", "call:" + t)
                            for t in self.callable_tools(True, self.snapshot, mult)]
            elif room:
                tools = self.callable_tools(False, None, mult)
                if tools or self._arrays(objects=False):
                    options.append((f"\n{ind}r{self.results + 1} =", "assign"))
                if deeper and self._arrays(objects=False) and self.callable_tools(False, None, mult):
                    options.append((f"\n{ind}for", "for"))
                if deeper and self._subjects(None):
                    options.append((f"\n{ind}if", "if"))
                if deeper and "parallel" not in self.open and self.callable_tools(True, None, mult):
                    options.append((f"\n{ind}parallel do", "parallel"))
                if deeper and "try" not in self.open and tools:
                    options.append((f"\n{ind}try do", "try"))
                if block in ("then", "else", "try"):
                    options.append((f"\n{ind}fail", "fail"))
                if self.values():
                    options.append((f"\n{ind}return", "return"))
            if body or not options:
                options += [(c, "close") for c in closers.get(block, [f"\n{outer}end"])]
            i = self._pick([o[0] for o in options])
            action = options[i][1]
            if action == "close":
                self.closed = options[i][0].strip()
                return body
            self.statements += 1
            if action.startswith("call:"):
                body.append(self._call(action[5:], loops, mult, self.snapshot))
            elif action == "assign":
                body.append(self._assign(loops, mult))
            elif action == "for":
                body.append(self._for(depth, loops, mult))
            elif action == "if":
                body.append(self._if(depth, loops, mult))
            elif action == "parallel":
                body.append(self._parallel(depth, loops, mult))
            elif action == "try":
                body.append(self._try(depth, loops, mult))
            elif action == "fail":
                body.append({"fail": "stopped"})
            else:
                self._emit(" ")
                vals = self.values()
                body.append({"return": vals[self._pick([v.text for v in vals])].expr})

    def _nested(self, kind_: str, block: str, depth: int, loops: tuple[tuple[str, J], ...], mult: int) -> list[J]:
        saved = self.open
        self.open = (*saved, kind_)
        try:
            return self._block(block, depth + 1, loops, mult)
        finally:
            self.open = saved

    def _arrays(self, objects: bool) -> list[Value]:
        out = [v for v in self.values() if kind(v.schema) == "array"]
        return [v for v in out if kind((v.schema or {}).get("items")) == "object"] if objects else out

    def _assign(self, loops: tuple[tuple[str, J], ...], mult: int) -> J:
        tools = self.callable_tools(False, None, mult)
        arrays = self._arrays(objects=False)
        options = [f" {t}(" for t in tools] + ([" first("] if arrays else [])
        i = self._pick(options)
        if i < len(tools):
            return self._call(tools[i], loops, mult, None)
        within = arrays[self._pick([v.text for v in arrays])]
        self._emit(", x =>")
        item = (within.schema or {}).get("items")
        cond = self._cond({"x": item}, ")", only_local=True)
        self.results += 1
        name = f"r{self.results}"
        self.scope[name] = item
        return {"let": name, "value": {"find": {"in": within.expr, "as": "x", "where": cond}}}

    def _call(self, tool: str, loops: tuple[tuple[str, J], ...], mult: int, scope: Mapping[str, Any] | None
              ) -> J:
        """The arguments of a call whose head (``rN = tool(``) is already emitted."""
        decl = self.tools[tool]
        schema = decl["input_schema"]
        props = {k: v for k, v in schema.get("properties", {}).items() if k != KEY_FIELD}
        required = [a for a in schema.get("required", []) if a != KEY_FIELD]
        args: dict[str, J] = {}
        for n, a in enumerate(required):
            self._emit(("" if not args else ", ") + f"{a}=")
            vals = self.candidates(props[a], scope)
            vals = self._fresh(tool, args, a, vals, props, scope, required[n + 1:]) or vals  # all repeat: any
            args[a] = vals[self._pick([v.text for v in vals])].expr
        while True:
            optional = [a for a in props if a not in args and self.candidates(props[a], scope)]
            fresh = {a: self._fresh(tool, args, a, self.candidates(props[a], scope), props, scope, [])
                     for a in optional}
            done = self._signature(tool, args) not in self.block_calls
            if done or any(fresh.values()):  # else every way on repeats an earlier call: allow any
                optional = [a for a in optional if fresh[a]]
            else:
                fresh = {a: self.candidates(props[a], scope) for a in optional}
            options = [("" if not args else ", ") + f"{a}=" for a in optional]
            if done or not optional:
                options.append(")")
            i = self._pick(options)
            if options[i] == ")":
                break
            vals = fresh[optional[i]]
            args[optional[i]] = vals[self._pick([v.text for v in vals])].expr
        self.block_calls.append(self._signature(tool, args))
        self.call_bound += self.config.retry_attempts * mult
        self.results += 1
        bind = f"r{self.results}"
        stmt: J = {"call": tool, "args": args, "effect": decl["effect"], "bind": bind}
        if decl["effect"] == "write":
            parts = [args[a] for a in sorted(args)]
            used = set().union(*(_vars(p) for p in parts)) if parts else set()
            parts += [key for name, key in loops if name not in used]
            stmt["key"] = {"fmt": tool + "-{}" * len(parts), "args": parts}
        if scope is None:
            self.scope[bind] = decl.get("output_schema")
        else:  # a parallel branch: visible after the join, not to its siblings
            self.joined[bind] = decl.get("output_schema")
        return {"retry": stmt, "attempts": self.config.retry_attempts, "backoff_ms": self.config.backoff_ms}

    @staticmethod
    def _signature(tool: str, args: Mapping[str, J]) -> tuple[str, str]:
        return tool, json.dumps(args, sort_keys=True)

    def _fresh(self, tool: str, args: Mapping[str, J], name: str, vals: list[Value], props: Mapping[str, Any],
               scope: Mapping[str, Any] | None, rest: list[str]) -> list[Value]:
        """``vals`` without those after which every way to finish the call (the required arguments ``rest`` still
        to choose, any subset of the optional ones not given yet) repeats an earlier call of the block exactly: a
        read would return the same, a write would only replay its journal entry (possibly none).
        """
        required = set(self.tools[tool]["input_schema"].get("required", []))
        optional = [a for a in props if a not in required and a not in args and a != name]
        counts = [len(self.candidates(props[a], scope)) for a in rest]
        counts += [1 + len(self.candidates(props[a], scope)) for a in optional]
        ways = int(np.prod(counts))
        earlier = [json.loads(a) for t, a in self.block_calls if t == tool]
        fresh = []
        for v in vals:
            fixed = {**args, name: v.expr}
            open_keys = set(fixed) | set(rest) | set(optional)
            same = sum(set(e) <= open_keys and all(e.get(k) == x for k, x in fixed.items()) for e in earlier)
            if same < ways:
                fresh.append(v)
        return fresh

    def _subjects(self, local: Mapping[str, Any] | None, only_local: bool = False) -> list[Value]:
        """What a condition may test: variables and fields in scope (with ``local``), not the task's lists."""
        scope = {**(local or {})} if only_local else {**self.scope, **(local or {})}
        return [v for v in self.values(scope) if "lit" not in v.expr]

    def _cond(self, local: Mapping[str, Any] | None, end: str, only_local: bool = False) -> J:
        """subject [comparator literal] followed by ``end``; ``local`` adds bindings (``x`` in ``first``)."""
        subjects = self._subjects(local, only_local)
        self._emit(" ")
        subject = subjects[self._pick([v.text for v in subjects])]
        k = kind(subject.schema)
        comps: list[str] = []
        lits: list[Any] = []
        if k in ("integer", "number"):
            comps, lits = [" > ", " >= ", " < ", " <= ", " == "], sorted({0, *self.lits.ints})
        elif k == "string":
            comps, lits = [" == ", " != "], [*self.lits.strings, *(subject.schema or {}).get("enum", [])]
            if isinstance((subject.schema or {}).get("type"), list):
                lits.append(None)
        options = [*comps, end, f" is empty{end}"]
        if not lits:
            options = [end, f" is empty{end}"]
        i = self._pick(options)
        if options[i] == end:
            return subject.expr
        if options[i] == f" is empty{end}":
            return {"not": subject.expr}
        lits = list(dict.fromkeys(lits))
        value = lits[self._pick([json.dumps(v) for v in lits])]
        self._emit(end)
        return {"op": COMPARATORS[options[i]], "args": [subject.expr, {"lit": value}]}

    def _for(self, depth: int, loops: tuple[tuple[str, J], ...], mult: int) -> J:
        arrays = self._arrays(objects=False)
        name = f"item{len(loops) + 1}"
        within = arrays[self._pick([f" {name} in {v.text}" for v in arrays])]
        if "lit" in within.expr:
            bounds = [len(within.expr["lit"])]
        else:
            bounds = sorted({self.config.default_bound, *self.lits.ints})
        step = self.config.retry_attempts * mult
        bounds = [b for b in bounds if 1 <= b <= MAX_ITER and self.call_bound + step * b <= MAX_CALLS] or [1]
        bound = bounds[self._pick([f" (max {b}) do" for b in bounds])]
        item = (within.schema or {}).get("items")
        self.scope[name] = item
        # The key part that tells iterations apart, for writes whose arguments do not use the loop variable.
        key = {"get": [{"var": name}, "id"]} if "id" in ((item or {}).get("properties") or {}) else {"var": name}
        body = self._nested("for", "for", depth, (*loops, (name, key)), mult * bound)
        return {"for": name, "in": within.expr, "max": bound, "do": {"seq": body}}

    def _if(self, depth: int, loops: tuple[tuple[str, J], ...], mult: int) -> J:
        cond = self._cond(None, " then")
        then = self._nested("if", "then", depth, loops, mult)
        out: J = {"if": cond, "then": {"seq": then}}
        if self.closed == "else":
            out["else"] = {"seq": self._nested("if", "else", depth, loops, mult)}
        return out

    def _parallel(self, depth: int, loops: tuple[tuple[str, J], ...], mult: int) -> J:
        saved_snap, saved_joined = self.snapshot, self.joined
        self.snapshot, self.joined = dict(self.scope), {}
        try:
            branches = self._nested("parallel", "parallel", depth, loops, mult)
            self.scope.update(self.joined)
        finally:
            self.snapshot, self.joined = saved_snap, saved_joined
        return {"parallel": branches}

    def _try(self, depth: int, loops: tuple[tuple[str, J], ...], mult: int) -> J:
        body = self._nested("try", "try", depth, loops, mult)
        undo = self._nested("try", "compensate", depth, loops, mult)
        return {"try": {"seq": body}, "compensate": {"seq": undo}}
