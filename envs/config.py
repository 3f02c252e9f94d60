"""Typed options: frozen dataclasses validated from a ``key=value`` mapping (CLI, launch file or suite default).

Every env, policy and agent that takes options declares them as a subclass of :class:`Options`, and so does every
component configuration (a ``*Config`` dataclass: a model's sizes, a training run, a matcher; ``policies/aux`` aside,
which depends on torch and numpy alone), next to the class it configures and holding the only defaults. A policy's
``--policy-option`` keys live beside the policy and take their defaults from its component configs
(``policies/vap/configuration.py``). The fields are the valid keys; their annotations are the types (``int``,
``float``, ``bool``, ``str``, ``X | None``, ``Literal[...]`` and ``tuple[str, ...]`` from a comma-separated string);
``field(metadata={"help": ...})`` documents them for ``--list``; ``metadata={"min": lo, "max": hi}`` (or
``option(default, doc, min=lo, max=hi)``) declares an inclusive range; :meth:`Options.check` adds cross-field checks
(run on construction, however an instance is made). The launch modules' numeric flags are converted and
range-checked by the same :func:`coerce` and :func:`check_range` (``sim_benchmarks.cli.ArgumentParser``). Two ranges
hold without a declaration: a float is finite (no ``inf`` or ``nan``), and a seed (a field named ``seed`` or
``*_seed``) is a non-negative integer. A wrong key or value raises :class:`ConfigError` naming the bad value and the
valid ones, the same way everywhere.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from envs.errors import ConfigError, choice_error


@dataclasses.dataclass(frozen=True)
class Options:
    """Base of every options and component-configuration dataclass (``*Options``, ``*Config``); subclasses are
    ``@dataclass(frozen=True)``. A field without a default is a required constructor argument (a config built in
    code); ``--list`` and ``from_options`` need defaults on every field."""

    # Shown by --list before the field list, e.g. "VAP options".
    title: ClassVar[str] = ""

    @classmethod
    def names(cls) -> list[str]:
        """The valid option keys."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None, *, strict: bool = True) -> Options:
        """Validate ``options`` into an instance. ``strict=False`` ignores keys that are not fields (a shared bag)."""
        options = dict(options or {})
        names = cls.names()
        if strict:
            for key in options:
                if key not in names:
                    raise choice_error(f"option for {cls.title or cls.__name__}", key, names)
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {name: check_range(name, coerce(name, options[name], hints[name]), bounds(fields[name]))
                  for name in names if name in options}
        return cls(**values)  # __post_init__ runs check()

    def __post_init__(self) -> None:
        # An instance is valid however it was made: from_options, a launch file, or a constructor call in code.
        self.check()

    def check(self) -> None:
        """Range and cross-field checks, run on construction; raise ConfigError. The default accepts everything the
        types allow."""

    def as_dict(self) -> dict[str, Any]:
        """Plain values for ``config.json`` (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def describe(cls) -> list[str]:
        """One line per option: ``name: type = default  help`` (for ``--list``)."""
        hints = typing.get_type_hints(cls)
        lines = []
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            doc = f.metadata.get("help", "")
            lo, hi = bounds(f)
            shown = "" if lo is None and hi is None else f" {_span(lo, hi)}"
            lines.append(f"{f.name}: {type_name(hints[f.name])}{shown} = {default!r}" + (f"  {doc}" if doc else ""))
        return lines


def is_seed(name: str) -> bool:
    """Whether an option or flag named ``name`` is a seed (``seed``, ``corpus_seed``, ``fault-seed``, ...)."""
    name = name.replace("-", "_").lstrip("_")
    return name == "seed" or name.endswith("_seed")


def bounds(f: dataclasses.Field) -> tuple[float | None, float | None]:
    """The inclusive range an option field declares (``metadata`` min/max); seeds are at least 0 by default."""
    lo, hi = f.metadata.get("min"), f.metadata.get("max")
    if lo is None and is_seed(f.name):
        lo = 0
    return lo, hi


def _span(lo: float | None, hi: float | None) -> str:
    """``in 0..1``, ``>= 0`` or ``<= 10``."""
    if lo is not None and hi is not None:
        return f"in {lo}..{hi}"
    return f">= {lo}" if lo is not None else f"<= {hi}"


def check_range(name: str, value: Any, limits: tuple[float | None, float | None], what: str = "option") -> Any:
    """``value`` unless it is a number outside ``limits`` (inclusive) or a non-finite float; ConfigError names both.

    Non-numbers (strings, None, tuples) pass: their types are checked by :func:`coerce`."""
    lo, hi = limits
    if isinstance(value, tuple):
        return tuple(check_range(name, v, limits, what) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        valid = "a finite number" + ("" if lo is None and hi is None else f" {_span(lo, hi)}")
        raise ConfigError(f"{what} {name} must be {valid}, got {value!r}".lstrip())
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ConfigError(f"{what} {name} must be {_span(lo, hi)}, got {value!r}".lstrip())
    return value


def type_name(tp: Any) -> str:
    """A short readable name of an annotation (``int``, ``float | None``, ``one of a|b``)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + "|".join(str(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"comma-separated {type_name(typing.get_args(tp)[0])}s"
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


def coerce(name: str, value: Any, tp: Any, what: str = "option") -> Any:
    """``value`` checked (and, for CLI strings, converted) against annotation ``tp``; ConfigError otherwise.

    ``what`` names the kind of value in the message (``"option"``; ``""`` for a command-line flag)."""
    label = f"{what} {name}".strip()
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None or (isinstance(value, str) and value.lower() == "none" and type(None) in args):
            if type(None) in args:
                return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:  # Optional[X]: X's own message ("must be an integer")
            return coerce(name, value, inner[0], what)
        for arg in inner:
            try:
                return coerce(name, value, arg, what)
            except ConfigError:
                pass
        raise ConfigError(f"{label} must be {type_name(tp)}, got {value!r}")
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise choice_error(f"value for {label}", value, [str(c) for c in choices])
        return value
    if origin is tuple:
        (item,) = typing.get_args(tp)[:1]
        parts = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, list | tuple) else None
        if parts is None:
            raise ConfigError(f"{label} must be {type_name(tp)}, got {value!r}")
        return tuple(coerce(name, p.strip() if isinstance(p, str) else p, item, what) for p in parts if p != "")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{label} must be true or false, got {value!r}")
    if tp is int:
        if isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise ConfigError(f"{label} must be an integer, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{label} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(f"{label} must be a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ConfigError(f"{label} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(f"{label} must be a string, got {value!r}")
        return str(value)
    return value


def option(default: Any, doc: str, *, min: float | None = None, max: float | None = None) -> Any:  # noqa: A002
    """A dataclass field with a default, its ``--list`` help text and an optional inclusive range."""
    metadata: dict[str, Any] = {"help": doc}
    if min is not None:
        metadata["min"] = min
    if max is not None:
        metadata["max"] = max
    return dataclasses.field(default=default, metadata=metadata)


def require(condition: bool, message: str) -> None:
    """Raise ConfigError(message) unless ``condition`` (for :meth:`Options.check`)."""
    if not condition:
        raise ConfigError(message)
