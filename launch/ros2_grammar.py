"""A strict check of launch files against the ROS 2 launch frontend (ros2/launch + launch_ros, XML and YAML).

Embodia's runner (``launch.launch_file``) executes a subset of ROS 2 launch; this module makes sure every file it
accepts would also load in ROS 2 itself: the same substitution grammar (``$(name arg arg)`` with single-space
separated arguments, whole-argument single or double quotes, nested substitutions), the arity of each
substitution, and only the tags and attributes ROS 2 defines. ``check_file(path)`` returns the problems found.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# Substitution name -> (min, max) arguments, as the ROS 2 frontend parses them.
SUBSTITUTIONS = {
    "var": (1, 1), "env": (1, 2), "optenv": (1, 2), "eval": (1, 2), "dirname": (0, 0), "filename": (0, 0),
    "anon": (1, 1), "find-pkg-share": (1, 1), "find-pkg-prefix": (1, 1), "find-exec": (1, 1), "command": (1, 2),
}
_ACTION = {"if", "unless"}
# Tag -> attributes (launch and launch_ros frontends); every action also takes if/unless.
TAGS: dict[str, set[str]] = {
    "launch": {"version"},
    "arg": {"name", "default", "description"} | _ACTION,
    "choice": {"value"},
    "let": {"name", "value"} | _ACTION,
    "include": {"file"} | _ACTION,
    "group": {"scoped", "forwarding"} | _ACTION,
    "set_env": {"name", "value"} | _ACTION,
    "unset_env": {"name"} | _ACTION,
    "node": {"pkg", "exec", "name", "namespace", "output", "args", "ros_args", "respawn", "respawn_delay",
             "launch-prefix", "exec_name", "emulate_tty"} | _ACTION,
    "param": {"name", "value", "from", "sep"},
    "remap": {"from", "to"},
    "env": {"name", "value"},
    "executable": {"cmd", "cwd", "name", "args", "shell", "output", "launch-prefix", "emulate_tty",
                   "sigterm_timeout", "sigkill_timeout", "respawn", "respawn_delay"} | _ACTION,
    "push_ros_namespace": {"namespace"} | _ACTION,
}
# Which child tags each tag may hold (an include's arg is the name/value form).
CHILDREN = {
    "launch": {"arg", "let", "include", "group", "set_env", "unset_env", "node", "executable", "push_ros_namespace"},
    "group": {"arg", "let", "include", "group", "set_env", "unset_env", "node", "executable", "push_ros_namespace"},
    "include": {"arg"}, "arg": {"choice"}, "node": {"param", "remap", "env"}, "executable": {"env"},
}


class GrammarError(ValueError):
    """A template that the ROS 2 substitution grammar rejects."""


@dataclass
class Substitution:
    """``$(name args...)``; each argument is a list of text pieces and nested substitutions."""

    name: str
    args: list[list[Any]] = field(default_factory=list)


_IDENT_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_IDENT = _IDENT_START | set("0123456789_-")


class _Parser:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def error(self, what: str) -> GrammarError:
        return GrammarError(f"{what} at column {self.i + 1} of {self.s!r}")

    def peek(self, n: int = 1) -> str:
        return self.s[self.i:self.i + n]

    def template(self) -> list[Any]:
        # Top level: any text (quotes are ordinary characters) and substitutions; a '$' must open one.
        out: list[Any] = []
        while self.i < len(self.s):
            if self.peek(2) == "$(":
                out.append(self.substitution(None))
            elif self.peek() == "$":
                raise self.error("'$' that does not start a substitution")
            elif self.peek() == "\\" and self.i + 1 < len(self.s):
                out.append(self.s[self.i:self.i + 2])
                self.i += 2
            else:
                out.append(self.s[self.i])
                self.i += 1
        return out

    def substitution(self, quote: str | None) -> Substitution:
        self.i += 2
        start = self.i
        if self.peek() not in _IDENT_START:
            raise self.error("a substitution name")
        while self.peek() and self.peek() in _IDENT:
            self.i += 1
        sub = Substitution(self.s[start:self.i])
        if self.peek() == " ":
            while True:
                self.i += 1  # the single space before each argument
                sub.args.append(self.value(quote))
                if self.peek() != " ":
                    break
        if self.peek() != ")":
            raise self.error(f"')' closing $({sub.name} ...)")
        self.i += 1
        return sub

    def value(self, quote: str | None) -> list[Any]:
        # An argument is either a whole quoted template (only outside quotes) or unquoted parts.
        if quote is None and self.peek() in ("'", '"'):
            q = self.peek()
            self.i += 1
            parts: list[Any] = []
            while self.peek() != q:
                if not self.peek():
                    raise self.error(f"closing {q}")
                if self.peek(2) == "$(":
                    parts.append(self.substitution(q))
                elif self.peek() == "$":
                    raise self.error("'$' that does not start a substitution")
                elif self.peek() == "\\":
                    parts.append(self.s[self.i:self.i + 2])
                    self.i += 2
                else:
                    parts.append(self.peek())
                    self.i += 1
            self.i += 1
            if self.peek() not in (" ", ")"):
                raise self.error("a space or ')' after a quoted argument")
            return parts
        parts = []
        while self.peek() and self.peek() not in (" ", ")"):
            c = self.peek()
            if self.peek(2) == "$(":
                parts.append(self.substitution(quote))
            elif c == "\\":
                if self.i + 1 >= len(self.s):
                    raise self.error("a character after '\\'")
                parts.append(self.s[self.i:self.i + 2])
                self.i += 2
            elif c in "$(" or (c in "'\"" and (quote is None or c == quote)):
                raise self.error(f"unescaped {c!r} inside an argument")
            else:
                parts.append(c)
                self.i += 1
        if not parts:
            raise self.error("an argument (two spaces, or a space before ')')")
        return parts


def parse_template(text: str) -> list[Any]:
    """Parse ``text`` with the ROS 2 substitution grammar and check every substitution's name and arity."""
    parsed = _Parser(text).template()
    _check_arity(parsed, text)
    return parsed


def _check_arity(parts: list[Any], text: str) -> None:
    for part in parts:
        if isinstance(part, Substitution):
            if part.name not in SUBSTITUTIONS:
                raise GrammarError(f"unknown substitution $({part.name}) in {text!r}; valid: "
                                   + ", ".join(sorted(SUBSTITUTIONS)))
            lo, hi = SUBSTITUTIONS[part.name]
            if not lo <= len(part.args) <= hi:
                raise GrammarError(f"$({part.name}) takes {lo}..{hi} arguments, got {len(part.args)} in {text!r}")
            for arg in part.args:
                _check_arity(arg, text)


def _check_element(tag: str, attrs: dict[str, Any], children: list[tuple[str, dict[str, Any], list]],
                   parent: str | None, where: str, problems: list[str]) -> None:
    if tag not in TAGS:
        problems.append(f"{where}: <{tag}> is not a ROS 2 launch tag")
        return
    if parent is not None and tag not in CHILDREN.get(parent, set()):
        problems.append(f"{where}: <{tag}> cannot be inside <{parent}>")
    allowed = {"name", "value"} | _ACTION if (tag == "arg" and parent == "include") else TAGS[tag]
    for key, value in attrs.items():
        if key not in allowed:
            problems.append(f"{where}: <{tag}> has no attribute {key!r} in ROS 2")
            continue
        try:
            parse_template(str(value))
        except GrammarError as exc:
            problems.append(f"{where}: <{tag} {key}>: {exc}")
    for child in children:
        _check_element(*child, parent=tag, where=where, problems=problems)


def _xml(path: Path) -> tuple[str, dict[str, Any], list]:
    def conv(el: ET.Element) -> tuple[str, dict[str, Any], list]:
        return el.tag, dict(el.attrib), [conv(c) for c in el]

    return conv(ET.parse(path).getroot())


def _yaml(item: Any, tag: str) -> tuple[str, dict[str, Any], list]:
    # YAML form: {tag: {attr: value, child_tag: [ {...}, ... ] or {...}}}
    attrs: dict[str, Any] = {}
    children: list = []
    body = item or {}
    if tag == "launch":
        for entry in body:
            (child_tag, child_body), = entry.items()
            children.append(_yaml(child_body, child_tag))
        return tag, attrs, children
    for key, value in body.items():
        if key in TAGS and isinstance(value, list | dict) and key not in ("launch",):
            for child in value if isinstance(value, list) else [value]:
                children.append(_yaml(child, key))
        else:
            attrs[key] = value
    return tag, attrs, children


def check_file(path: str | Path) -> list[str]:
    """Every way ``path`` departs from what the ROS 2 launch frontend accepts (empty: it would load there)."""
    path = Path(path)
    problems: list[str] = []
    try:
        if path.suffix == ".xml":
            root = _xml(path)
        else:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or list(data) != ["launch"]:
                return [f"{path}: a YAML launch file is one mapping with the single key 'launch'"]
            root = _yaml(data["launch"], "launch")
    except (ET.ParseError, yaml.YAMLError, ValueError, AttributeError) as exc:
        return [f"{path}: not a launch file ({type(exc).__name__}: {exc})"]
    if root[0] != "launch":
        return [f"{path}: the root element must be <launch>, got <{root[0]}>"]
    _check_element(*root, parent=None, where=str(path), problems=problems)
    return problems
