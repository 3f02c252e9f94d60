"""ROS 2-style launch files (XML or YAML) for Embodia's launch modules.

A ``<node pkg="embodia" exec="eval">`` runs ``python -m launch.eval`` with each ``<param name value>`` as a
``--name value`` flag. Supported, with ROS 2 semantics: ``<launch>``, ``<arg name default description>``,
``<let name value>``, ``<include file>`` with child ``<arg>``, ``<group>`` (scoping ``let``/``set_env``),
``<set_env name value>``, ``if``/``unless`` on any action, and the substitutions ``$(var x)``, ``$(env X [default])``,
``$(dirname)``, ``$(eval <python arithmetic/comparison>)``. Unknown tags or attributes are errors, as in ROS 2.
"""

from __future__ import annotations

import ast
import operator
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envs.errors import ConfigError
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
PACKAGES = ("embodia",)


@dataclass
class NodeAction:
    """One process to start: ``python -m launch.<exec>`` with flags, in an environment."""

    name: str
    module: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Eq: operator.eq, ast.NotEq: operator.ne,
        ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.And: all, ast.Or: any, ast.Not: operator.not_, ast.USub: operator.neg}


def _safe_eval(expr: str) -> Any:
    # $(eval ...) evaluates only literals and arithmetic/boolean operators — never names or calls.
    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        if isinstance(node, ast.BoolOp):
            return _OPS[type(node.op)](ev(v) for v in node.values)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
            return _OPS[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        raise ConfigError(f"$(eval {expr}): only literals and arithmetic/comparison operators are allowed")

    try:
        return ev(ast.parse(expr, mode="eval"))
    except SyntaxError:
        raise ConfigError(f"$(eval {expr}): not a valid expression") from None


class _Scope:
    def __init__(self, variables: dict[str, str], env: dict[str, str], file: Path) -> None:
        self.variables, self.env, self.file = variables, env, file

    def child(self, file: Path | None = None) -> _Scope:
        return _Scope(dict(self.variables), dict(self.env), file or self.file)

    def substitute(self, text: str) -> str:
        """Expand every substitution in ``text``, parsed with the ROS 2 grammar (inside-out, quoted arguments whole)."""
        try:
            parts = parse_template(text)
        except GrammarError as exc:
            raise ConfigError(f"{self.file}: {exc}") from None
        return self._render(parts)

    def _render(self, parts: list[Any]) -> str:
        out = []
        for part in parts:
            if isinstance(part, Substitution):
                out.append(self._apply(part.name, [self._render(arg) for arg in part.args]))
            else:
                out.append(part[1:] if len(part) == 2 and part[0] == "\\" else part)  # an escaped character
        return "".join(out)

    def _apply(self, kind: str, args: list[str]) -> str:
        if kind == "var":
            if args[0] not in self.variables:
                raise ConfigError(f"{self.file}: $(var {args[0]}) is not defined; defined: "
                                  f"{', '.join(sorted(self.variables)) or '(none)'}")
            return self.variables[args[0]]
        if kind == "env":
            value = self.env.get(args[0], os.environ.get(args[0]))
            if value is None and len(args) < 2:
                raise ConfigError(f"{self.file}: $(env {args[0]}) is not set and has no default")
            return value if value is not None else args[1]
        if kind == "dirname":
            return str(self.file.resolve().parent)
        if kind == "eval" and len(args) == 1:
            return str(_safe_eval(args[0]))
        raise ConfigError(f"{self.file}: substitution $({kind}{' ...' if args else ''}) is valid ROS 2 but not run "
                          f"here; supported: var, env, dirname, eval (one argument)")

    def condition(self, attrs: dict[str, str]) -> bool:
        for key, want in (("if", True), ("unless", False)):
            if key in attrs:
                value = self.substitute(attrs[key]).strip().lower()
                if value not in {"true", "false", "1", "0"}:
                    raise ConfigError(f"{self.file}: {key}={attrs[key]!r} must be true or false, got {value!r}")
                if (value in {"true", "1"}) != want:
                    return False
        return True


def _element_tree(path: Path) -> tuple[str, dict[str, str], list[Any]]:
    """Parse XML or YAML into (tag, attrs, children) triples."""
    text = path.read_text()
    if path.suffix in {".yaml", ".yml"}:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: malformed YAML ({str(exc).splitlines()[0]})") from None
        if not isinstance(data, dict) or list(data) != ["launch"] or not isinstance(data["launch"], list):
            raise ConfigError(f"{path}: a YAML launch file is a mapping with one key 'launch' holding a list")
        return ("launch", {}, [_yaml_node(path, item) for item in data["launch"]])
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ConfigError(f"{path}: malformed XML ({exc})") from None

    def conv(el: ET.Element) -> tuple[str, dict[str, str], list[Any]]:
        return (el.tag, dict(el.attrib), [conv(c) for c in el])

    return conv(root)


def _yaml_node(path: Path, item: Any) -> tuple[str, dict[str, str], list[Any]]:
    if not isinstance(item, dict) or len(item) != 1:
        raise ConfigError(f"{path}: each launch entry is a one-key mapping like {{arg: {{...}}}}, got {item!r}")
    tag, body = next(iter(item.items()))
    body = dict(body or {})
    children: list[Any] = []
    for key in ("param", "arg"):
        for child in body.pop(key, []) if isinstance(body.get(key), list) else []:
            children.append((key, {k: str(v) for k, v in child.items()}, []))
    if tag == "group" and "actions" in body:
        children.extend(_yaml_node(path, c) for c in body.pop("actions"))
    attrs = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in body.items()}
    return (tag, attrs, children)


def load_launch_file(path: str | Path, overrides: dict[str, str] | None = None,
                     _scope: _Scope | None = None) -> list[NodeAction]:
    """Resolve a launch file (with ``name:=value`` overrides for its args) into the nodes it would start."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"launch file {str(path)!r} not found")
    tag, attrs, children = _element_tree(path)
    if tag != "launch":
        raise ConfigError(f"{path}: root element must be <launch>, got <{tag}>")
    scope = _scope.child(path) if _scope else _Scope({}, {}, path)
    overrides = dict(overrides or {})
    declared = {a.get("name") for t, a, _ in children if t == "arg"}
    unknown = sorted(set(overrides) - declared)
    if unknown and _scope is None:
        raise ConfigError(f"{path}: unknown launch argument(s) {', '.join(unknown)}; declared: "
                          f"{', '.join(sorted(n for n in declared if n)) or '(none)'}")
    nodes: list[NodeAction] = []
    _run_actions(children, scope, overrides, nodes)
    return nodes


def _check(scope: _Scope, tag: str, attrs: dict[str, str]) -> None:
    if tag not in ATTRIBUTES:
        raise ConfigError(f"{scope.file}: unknown tag <{tag}>; valid: {', '.join(sorted(ATTRIBUTES))}")
    bad = sorted(set(attrs) - ATTRIBUTES[tag])
    if bad:
        raise ConfigError(f"{scope.file}: <{tag}> has unknown attribute(s) {', '.join(bad)}; "
                          f"valid: {', '.join(sorted(ATTRIBUTES[tag]))}")


def _run_actions(children: list[Any], scope: _Scope, overrides: dict[str, str], nodes: list[NodeAction]) -> None:
    for tag, attrs, sub in children:
        _check(scope, tag, attrs)
        if tag == "arg":
            name = attrs.get("name") or ""
            if name in overrides:
                scope.variables[name] = overrides[name]
            elif "default" in attrs:
                scope.variables[name] = scope.substitute(attrs["default"])
            elif name not in scope.variables:
                raise ConfigError(f"{scope.file}: launch argument {name!r} has no default; pass {name}:=VALUE")
            continue
        if not scope.condition(attrs):
            continue
        if tag == "let":
            scope.variables[attrs["name"]] = scope.substitute(attrs.get("value", ""))
        elif tag == "set_env":
            scope.env[attrs["name"]] = scope.substitute(attrs.get("value", ""))
        elif tag == "group":
            _run_actions(sub, scope.child() if attrs.get("scoped", "true") != "false" else scope, overrides, nodes)
        elif tag == "include":
            target = Path(scope.substitute(attrs["file"]))
            if not target.is_absolute():
                target = scope.file.parent / target
            inner = {a["name"]: scope.substitute(a.get("value", "")) for t, a, _ in sub if t == "arg"}
            nodes.extend(load_launch_file(target, inner, _scope=_Scope(dict(inner), dict(scope.env), target)))
        elif tag == "node":
            nodes.append(_node(scope, attrs, sub))
        else:
            raise ConfigError(f"{scope.file}: <{tag}> is only valid inside another element")


def _node(scope: _Scope, attrs: dict[str, str], params: list[Any]) -> NodeAction:
    pkg = scope.substitute(attrs.get("pkg", ""))
    if pkg not in PACKAGES:
        raise ConfigError(f"{scope.file}: node pkg {pkg!r} is unknown; valid: {', '.join(PACKAGES)}")
    from launch.__main__ import commands

    exe = scope.substitute(attrs.get("exec", ""))
    if exe not in commands():
        raise ConfigError(f"{scope.file}: node exec {exe!r} is unknown; valid: {', '.join(commands())}")
    argv: list[str] = []
    for tag, p, _ in params:
        _check(scope, tag, p)
        if tag != "param":
            raise ConfigError(f"{scope.file}: <node> may contain only <param>, got <{tag}>")
        name, value = p["name"], scope.substitute(p.get("value", ""))
        flag = "--" + name.replace("_", "-")
        if value.lower() == "true":
            argv.append(flag)
        elif value.lower() != "false":
            argv += [flag, value]
    if "args" in attrs:
        argv += scope.substitute(attrs["args"]).split()
    return NodeAction(name=scope.substitute(attrs.get("name", exe)), module=f"launch.{exe}", argv=argv,
                      env=dict(scope.env))
