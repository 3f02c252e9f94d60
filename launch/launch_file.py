"""ROS 2-style launch files (XML or YAML) for Embodia's launch modules.

A ``<node pkg="embodia" exec="eval">`` runs ``python -m launch.eval`` with each ``<param name value>`` as a
``--name value`` flag. Supported, with ROS 2 semantics: ``<launch>``, ``<arg name default description>``,
``<let name value>``, ``<include file>`` with child ``<arg>``, ``<group>`` (scoping ``let``/``set_env``),
``<set_env name value>``, ``if``/``unless`` on any action, and the substitutions ``$(var x)``,
``$(env X [default])``, ``$(dirname)``, ``$(eval '<python arithmetic/comparison>')``, parsed with the ROS 2
substitution grammar (``launch.ros2_grammar``: single-space separated arguments, a quoted argument is one
argument). Unknown tags or attributes are errors, as in ROS 2.

Every mistake in a file is a ConfigError that starts with ``file:line``: malformed XML/YAML, a missing or unknown
attribute, a value of the wrong kind, an include cycle, a substitution the ROS 2 grammar rejects, or an
``$(eval)`` that is not allowed or fails. ``$(eval)`` is a sandbox: literals and arithmetic, boolean and
comparison operators only (no names,
attributes, calls or subscripts), expressions of at most ``MAX_EXPR_CHARS`` characters and ``MAX_EXPR_NODES``
syntax nodes, integers of at most ``MAX_INT_BITS`` bits and strings of at most ``MAX_VALUE_CHARS`` characters.
A substitution is either fully expanded or rejected; its result is never scanned again.
"""

from __future__ import annotations

import ast
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.parsers import expat

import yaml

from envs.errors import ConfigError
from launch.cli import commands
from launch.ros2_grammar import GrammarError, Substitution, parse_template

ATTRIBUTES = {
    "launch": set(),
    "arg": {"name", "default", "description", "value"},
    "let": {"name", "value", "if", "unless"},
    "include": {"file", "if", "unless"},
    "group": {"if", "unless", "scoped"},
    "set_env": {"name", "value", "if", "unless"},
    "node": {"pkg", "exec", "name", "namespace", "output", "if", "unless", "args"},
    "param": {"name", "value"},
}
REQUIRED = {"arg": ("name",), "let": ("name",), "include": ("file",), "set_env": ("name",),
            "node": ("pkg", "exec"), "param": ("name",)}
CHILDREN = {"launch": None, "group": None, "include": {"arg"}, "node": {"param"}}  # None: any action
PACKAGES = ("embodia",)

MAX_EXPR_CHARS = 1000
MAX_EXPR_NODES = 256
MAX_INT_BITS = 64
MAX_VALUE_CHARS = 100_000
MAX_NESTING = 16  # $( inside $( inside ...
MAX_INCLUDE_DEPTH = 32


@dataclass
class NodeAction:
    """One process to start: ``python -m launch.<exec>`` with flags, in an environment."""

    name: str
    module: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Element:
    """One action of a launch file, with where it was written (for error messages)."""

    tag: str
    attrs: dict[str, str]
    children: list[Element]
    file: Path
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


# ------------------------------------------------------------------------------------------------ $(eval ...)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Eq: operator.eq, ast.NotEq: operator.ne,
        ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}
_CONSTANTS = (bool, int, float, str)


def _bounded(value: Any) -> Any:
    # Every intermediate result stays small, so no expression can exhaust memory or time.
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise ConfigError(f"integer result exceeds {MAX_INT_BITS} bits")
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        raise ConfigError(f"string result exceeds {MAX_VALUE_CHARS} characters")
    return value


def _binop(op: ast.operator, left: Any, right: Any) -> Any:
    if isinstance(op, ast.Mult):  # check a repeated string's size before building it
        for text, times in ((left, right), (right, left)):
            if isinstance(text, str) and isinstance(times, int) and len(text) * max(times, 0) > MAX_VALUE_CHARS:
                raise ConfigError(f"string result exceeds {MAX_VALUE_CHARS} characters")
    return _bounded(_OPS[type(op)](left, right))


def safe_eval(expr: str) -> Any:
    """Evaluate a ``$(eval ...)`` body in the sandbox; ConfigError (without location) when it is refused or fails."""
    if len(expr) > MAX_EXPR_CHARS:
        raise ConfigError(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ConfigError("not a valid expression") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_EXPR_NODES:
        raise ConfigError(f"more than {MAX_EXPR_NODES} syntax nodes")

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, _CONSTANTS):
            return _bounded(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _binop(node.op, ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _bounded(_OPS[type(node.op)](ev(node.operand)))
        if isinstance(node, ast.BoolOp):  # Python's short circuit: the deciding operand, not a bool
            is_and = isinstance(node.op, ast.And)
            for operand in node.values:
                value = ev(operand)
                if bool(value) != is_and:
                    break
            return value
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
            return _OPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        raise ConfigError(f"{type(node).__name__} is not allowed; only literals and arithmetic, boolean and "
                          f"comparison operators")

    try:
        return ev(tree)
    except (ArithmeticError, TypeError, ValueError, RecursionError, MemoryError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{type(exc).__name__}: {exc}") from None


# ------------------------------------------------------------------------------------------------ substitution


class _Scope:
    def __init__(self, variables: dict[str, str], env: dict[str, str], file: Path,
                 includes: tuple[Path, ...] = ()) -> None:
        self.variables, self.env, self.file, self.includes = variables, env, file, includes

    def child(self) -> _Scope:
        return _Scope(dict(self.variables), dict(self.env), self.file, self.includes)

    def substitute(self, text: str, where: str) -> str:
        """``text`` with every ``$(...)`` expanded, parsed with the ROS 2 grammar (nested substitutions first, a quoted
        argument whole); ConfigError naming ``where`` otherwise."""
        if len(text) > MAX_VALUE_CHARS:
            raise ConfigError(f"{where}: a value exceeds {MAX_VALUE_CHARS} characters")
        try:
            parts = parse_template(text)
        except GrammarError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        except RecursionError:
            raise ConfigError(f"{where}: substitutions nested too deeply") from None
        result = self._render(parts, where, 0)
        if len(result) > MAX_VALUE_CHARS:
            raise ConfigError(f"{where}: a substituted value exceeds {MAX_VALUE_CHARS} characters")
        return result

    def _render(self, parts: list[Any], where: str, depth: int) -> str:
        if depth > MAX_NESTING:
            raise ConfigError(f"{where}: substitutions nested deeper than {MAX_NESTING}")
        out = []
        for part in parts:
            if isinstance(part, Substitution):
                out.append(self._apply(part.name, [self._render(a, where, depth + 1) for a in part.args], where))
            else:
                out.append(part[1:] if len(part) == 2 and part[0] == "\\" else part)  # an escaped character
        return "".join(out)

    def _apply(self, kind: str, args: list[str], where: str) -> str:
        if kind == "var":
            if args[0] not in self.variables:
                raise ConfigError(f"{where}: $(var {args[0]}) is not defined; defined: "
                                  f"{', '.join(sorted(self.variables)) or '(none)'}")
            return self.variables[args[0]]
        if kind == "env":
            value = self.env.get(args[0], os.environ.get(args[0]))
            if value is None and len(args) < 2:
                raise ConfigError(f"{where}: $(env {args[0]}) is not set and has no default")
            return value if value is not None else args[1]
        if kind == "dirname":
            return str(self.file.resolve().parent)
        if kind == "eval" and len(args) == 1:
            try:
                return str(safe_eval(args[0]))
            except ConfigError as exc:
                raise ConfigError(f"{where}: $(eval {args[0][:80]}): {exc}") from None
        raise ConfigError(f"{where}: substitution $({kind}{' ...' if args else ''}) is valid ROS 2 but not run "
                          f"here; supported: var, env, dirname, eval (one argument)")

    def condition(self, el: Element) -> bool:
        for key, want in (("if", True), ("unless", False)):
            if key in el.attrs:
                value = self.substitute(el.attrs[key], el.where).strip().lower()
                if value not in {"true", "false", "1", "0"}:
                    raise ConfigError(f"{el.where}: {key}={el.attrs[key]!r} must be true or false, got {value!r}")
                if (value in {"true", "1"}) != want:
                    return False
        return True


# ------------------------------------------------------------------------------------------------ parsing
def _parse(path: Path) -> Element:
    data = path.read_bytes()
    if path.suffix in {".yaml", ".yml"}:
        return _parse_yaml(path, data)
    return _parse_xml(path, data)


def _parse_xml(path: Path, data: bytes) -> Element:
    parser = expat.ParserCreate()
    stack: list[Element] = []
    roots: list[Element] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        el = Element(tag, dict(attrs), [], path, parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(el)
        stack.append(el)

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda tag: stack.pop()
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: malformed XML ({expat.ErrorString(exc.code)}); expected a "
                          f"<launch> document") from None
    except RecursionError:
        raise ConfigError(f"{path}: XML nested too deeply") from None
    return roots[0]


def _parse_yaml(path: Path, data: bytes) -> Element:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a UTF-8 text file (byte {exc.start}); expected a YAML launch file") from None
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if not isinstance(root, yaml.MappingNode) or len(root.value) != 1 or \
                _scalar(loader, path, root.value[0][0]) != "launch" or \
                not isinstance(root.value[0][1], yaml.SequenceNode):
            line = root.start_mark.line + 1 if root is not None else 1
            raise ConfigError(f"{path}:{line}: a YAML launch file is a mapping with one key 'launch' holding a list")
        children = [_yaml_action(loader, path, item) for item in root.value[0][1].value]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{line}: malformed YAML ({problem})") from None
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply") from None
    finally:
        loader.dispose()
    return Element("launch", {}, children, path, root.start_mark.line + 1)


def _scalar(loader: yaml.SafeLoader, path: Path, node: yaml.Node, what: str = "a key") -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise ConfigError(f"{path}:{node.start_mark.line + 1}: expected {what} (a plain value), got a "
                          f"{'list' if isinstance(node, yaml.SequenceNode) else 'mapping'}")
    value = loader.construct_object(node, deep=True)
    return "true" if value is True else "false" if value is False else "" if value is None else str(value)


def _yaml_action(loader: yaml.SafeLoader, path: Path, item: yaml.Node) -> Element:
    line = item.start_mark.line + 1
    if not isinstance(item, yaml.MappingNode) or len(item.value) != 1:
        raise ConfigError(f"{path}:{line}: each launch entry is a one-key mapping like {{arg: {{...}}}}")
    key, body = item.value[0]
    tag = _scalar(loader, path, key)
    attrs: dict[str, str] = {}
    children: list[Element] = []
    if isinstance(body, yaml.ScalarNode) and _scalar(loader, path, body) == "":
        return Element(tag, attrs, children, path, line)
    if not isinstance(body, yaml.MappingNode):
        raise ConfigError(f"{path}:{line}: <{tag}> must be a mapping of attributes")
    for k_node, v_node in body.value:
        name = _scalar(loader, path, k_node)
        if name in ("param", "arg") and isinstance(v_node, yaml.SequenceNode):
            for child in v_node.value:
                if not isinstance(child, yaml.MappingNode):
                    raise ConfigError(f"{path}:{child.start_mark.line + 1}: each {name} is a mapping like "
                                      f"{{name: x, value: y}}")
                children.append(Element(name, {_scalar(loader, path, a): _scalar(loader, path, b, f"{name} value")
                                               for a, b in child.value}, [], path, child.start_mark.line + 1))
        elif name == "actions" and tag == "group":
            if not isinstance(v_node, yaml.SequenceNode):
                raise ConfigError(f"{path}:{v_node.start_mark.line + 1}: group actions must be a list")
            children.extend(_yaml_action(loader, path, c) for c in v_node.value)
        else:
            attrs[name] = _scalar(loader, path, v_node, f"attribute {name!r}")
    return Element(tag, attrs, children, path, line)


# ------------------------------------------------------------------------------------------------ resolving
def load_launch_file(path: str | Path, overrides: dict[str, str] | None = None,
                     _scope: _Scope | None = None) -> list[NodeAction]:
    """Resolve a launch file (with ``name:=value`` overrides for its args) into the nodes it would start."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"launch file {str(path)!r} not found")
    root = _parse(path)
    if root.tag != "launch":
        raise ConfigError(f"{root.where}: root element must be <launch>, got <{root.tag}>")
    _check(root)
    includes = (*(_scope.includes if _scope else ()), path.resolve())
    scope = _Scope(dict(_scope.variables), dict(_scope.env), path, includes) if _scope else \
        _Scope({}, {}, path, includes)
    overrides = dict(overrides or {})
    declared = {el.attrs.get("name") for el in root.children if el.tag == "arg"}
    unknown = sorted(set(overrides) - declared)
    if unknown and _scope is None:
        raise ConfigError(f"{path}: unknown launch argument(s) {', '.join(unknown)}; declared: "
                          f"{', '.join(sorted(n for n in declared if n)) or '(none)'}")
    nodes: list[NodeAction] = []
    _run_actions(root.children, scope, overrides, nodes)
    return nodes


def _check(el: Element) -> None:
    # Tag, attribute names, required attributes and allowed children: before anything is substituted or run.
    if el.tag not in ATTRIBUTES:
        raise ConfigError(f"{el.where}: unknown tag <{el.tag}>; valid: {', '.join(sorted(ATTRIBUTES))}")
    bad = sorted(set(el.attrs) - ATTRIBUTES[el.tag])
    if bad:
        raise ConfigError(f"{el.where}: <{el.tag}> has unknown attribute(s) {', '.join(bad)}; "
                          f"valid: {', '.join(sorted(ATTRIBUTES[el.tag])) or '(none)'}")
    missing = [a for a in REQUIRED.get(el.tag, ()) if not el.attrs.get(a, "").strip()]
    if missing:
        raise ConfigError(f"{el.where}: <{el.tag}> needs the attribute(s) {', '.join(missing)}")
    allowed = CHILDREN.get(el.tag, set())
    for child in el.children:
        if allowed is not None and child.tag not in allowed:
            raise ConfigError(f"{child.where}: <{el.tag}> may contain only "
                              f"{', '.join(f'<{t}>' for t in sorted(allowed)) or 'nothing'}, got <{child.tag}>")
        _check(child)


def _run_actions(children: list[Element], scope: _Scope, overrides: dict[str, str], nodes: list[NodeAction]) -> None:
    for el in children:
        attrs = el.attrs
        if el.tag == "arg":
            name = attrs["name"]
            if name in overrides:
                scope.variables[name] = overrides[name]
            elif "default" in attrs:
                scope.variables[name] = scope.substitute(attrs["default"], el.where)
            elif name not in scope.variables:
                raise ConfigError(f"{el.where}: launch argument {name!r} has no default; pass {name}:=VALUE")
            continue
        if not scope.condition(el):
            continue
        if el.tag == "let":
            scope.variables[attrs["name"]] = scope.substitute(attrs.get("value", ""), el.where)
        elif el.tag == "set_env":
            scope.env[attrs["name"]] = scope.substitute(attrs.get("value", ""), el.where)
        elif el.tag == "group":
            scoped = attrs.get("scoped", "true").strip().lower()
            if scoped not in {"true", "false"}:
                raise ConfigError(f"{el.where}: scoped={attrs['scoped']!r} must be true or false")
            _run_actions(el.children, scope.child() if scoped == "true" else scope, overrides, nodes)
        elif el.tag == "include":
            nodes.extend(_include(el, scope))
        elif el.tag == "node":
            nodes.append(_node(scope, el))
        else:
            raise ConfigError(f"{el.where}: <{el.tag}> is only valid inside another element")


def _include(el: Element, scope: _Scope) -> list[NodeAction]:
    target = Path(scope.substitute(el.attrs["file"], el.where))
    if not target.is_absolute():
        target = scope.file.parent / target
    if not target.is_file():
        raise ConfigError(f"{el.where}: included file {str(target)!r} not found")
    resolved = target.resolve()
    if resolved in scope.includes:
        chain = " -> ".join(p.name for p in (*scope.includes, resolved))
        raise ConfigError(f"{el.where}: include cycle ({chain}); a file may not include itself")
    if len(scope.includes) >= MAX_INCLUDE_DEPTH:
        raise ConfigError(f"{el.where}: includes nested deeper than {MAX_INCLUDE_DEPTH}")
    inner = {a.attrs["name"]: scope.substitute(a.attrs.get("value", ""), a.where) for a in el.children}
    return load_launch_file(target, inner, _scope=_Scope(dict(inner), dict(scope.env), target, scope.includes))


def _node(scope: _Scope, el: Element) -> NodeAction:
    attrs = el.attrs
    pkg = scope.substitute(attrs["pkg"], el.where)
    if pkg not in PACKAGES:
        raise ConfigError(f"{el.where}: node pkg {pkg!r} is unknown; valid: {', '.join(PACKAGES)}")
    exe = scope.substitute(attrs["exec"], el.where)
    if exe not in commands():
        raise ConfigError(f"{el.where}: node exec {exe!r} is unknown; valid: {', '.join(commands())}")
    argv: list[str] = []
    for p in el.children:
        name, value = p.attrs["name"], scope.substitute(p.attrs.get("value", ""), p.where)
        flag = "--" + name.replace("_", "-")
        if value.lower() == "true":
            argv.append(flag)
        elif value.lower() != "false":
            argv += [flag, value]
    if "args" in attrs:
        argv += scope.substitute(attrs["args"], el.where).split()
    return NodeAction(name=scope.substitute(attrs.get("name", exe), el.where), module=f"launch.{exe}", argv=argv,
                      env=dict(scope.env))
