"""The registry: a table of what can be run, and the specs registered from it.

:data:`SUITE_MODULES` names, for every suite, the modules under ``sim_benchmarks/suites/`` that assemble it (the one
declaring the suite first, then those offering more policies for it); :data:`TRAINER_MODULES` does the same for the
training families. A run imports only the modules its suite needs (``launch.eval --env personalized_simpler`` does
not load the VimRAG or ToolPro lines); ``--list`` and :func:`load_all` import them all. Each module declares its
specs in ``SPECS`` (:mod:`sim_benchmarks.specs`) and never imports the registry, so there is no import cycle and no
import-order dependence: the table's order is the registration order. A module that fails to import (an optional
extra is missing) makes its suites unavailable, with the reason, instead of breaking the whole CLI.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from envs.errors import ConfigError, choice_error
from sim_benchmarks.specs import PolicyContext, PolicyExtension, PolicySpec, Spec, SuiteSpec, TrainerSpec

__all__ = ["PolicyContext", "PolicyExtension", "PolicySpec", "SuiteSpec", "TrainerSpec"]

PACKAGE = "sim_benchmarks.suites"

# Suite name -> the modules that assemble it, in registration order.
SUITE_MODULES: dict[str, tuple[str, ...]] = {
    "classic_control": ("classic_control",),
    "games": ("games",),
    "generic_simpler": ("personalized_simpler", "vla_policies"),
    "maniskill": ("personalized_simpler", "maniskill"),
    "personalized_maniskill": ("personalized_simpler", "vla_policies", "vap_policies", "personalized_vlabench",
                               "personalized_maniskill"),
    "personalized_simpler": ("personalized_simpler", "vla_policies", "vap_policies"),
    "personalized_vlabench": ("personalized_simpler", "vla_policies", "vap_policies", "personalized_vlabench"),
    "toolpro": ("toolpro",),
    "vimrag": ("vimrag",),
}
# Modules whose policies every suite offers (``random``).
EVERY_SUITE: tuple[str, ...] = ("common",)
# Training family -> the modules that declare it.
TRAINER_MODULES: dict[str, tuple[str, ...]] = {"streaming": ("arcade",), "games": ("games",)}

_SUITES: dict[str, SuiteSpec] = {}
_POLICIES: dict[str, PolicySpec] = {}
_TRAINERS: dict[str, TrainerSpec] = {}
_LOADED: set[str] = set()  # modules whose specs are registered
_FAILED: dict[str, str] = {}  # module -> why it could not be imported
# Which module declared each suite, and made each policy available for a suite ("*": every suite): the tests check
# them against the table.
SUITE_ORIGINS: dict[str, str] = {}
POLICY_ORIGINS: dict[tuple[str, str], str] = {}


def _register(spec: Spec, module: str) -> None:
    if isinstance(spec, SuiteSpec):
        _SUITES[spec.name] = spec
        SUITE_ORIGINS[spec.name] = module
    elif isinstance(spec, TrainerSpec):
        _TRAINERS[spec.name] = spec
    elif isinstance(spec, PolicySpec):
        _POLICIES[spec.name] = replace(spec, factory=_given_policies(spec.factory))
        for suite in spec.suites or ("*",):
            POLICY_ORIGINS[(spec.name, suite)] = module
    else:
        _extend(spec)
        POLICY_ORIGINS[(spec.name, spec.suite)] = module


def _extend(ext: PolicyExtension) -> None:
    if ext.name not in _POLICIES:  # the table lists the declaring module after this one: a bug, not a user error
        raise RuntimeError(f"{ext.name!r} is extended to {ext.suite} before any module declared it; "
                           "list the declaring module earlier in SUITE_MODULES")
    spec = _POLICIES[ext.name]
    original, factory, suite = spec.factory, _given_policies(ext.factory), ext.suite

    def build(ctx: PolicyContext) -> Any:
        return factory(ctx) if ctx.suite == suite else original(ctx)

    suites = spec.suites if not spec.suites or suite in spec.suites else (*spec.suites, suite)
    typed = ((suite, ext.options_type),) if ext.options_type is not None else ()
    _POLICIES[ext.name] = replace(spec, suites=suites, factory=build,
                                  options=tuple(dict.fromkeys((*spec.options, *ext.options))),
                                  extension_types=spec.extension_types + typed)


def _given_policies(factory: Callable[[PolicyContext], Any]) -> Callable[[PolicyContext], Any]:
    """``factory`` called with the suite's policies in ``ctx.policies`` (unless the caller filled them in)."""

    def build(ctx: PolicyContext) -> Any:
        if not ctx.policies:
            ctx = replace(ctx, policies={n: p for n, p in _POLICIES.items() if not p.suites or ctx.suite in p.suites})
        return factory(ctx)

    return build


def _load(modules: Iterable[str]) -> str | None:
    """Import each module once, in order, and register its ``SPECS``; the reason of the first that cannot be
    imported (then the rest are not tried), or None."""
    for name in modules:
        if name in _FAILED:
            return _FAILED[name]
        if name in _LOADED:
            continue
        try:
            with _quiet_native_stderr():
                module = importlib.import_module(f"{PACKAGE}.{name}")
        except Exception as exc:  # an optional extra is missing, or the module is broken: list it, keep the CLI
            _FAILED[name] = f"{type(exc).__name__}: {exc}"
            return _FAILED[name]
        for spec in module.SPECS:
            _register(spec, name)
        _LOADED.add(name)
    return None


def _load_suite(name: str) -> str | None:
    return _load((*EVERY_SUITE, *SUITE_MODULES[name]))


def load_all() -> None:
    """Import every module of the table (for listings and studies that look across suites)."""
    for name in SUITE_MODULES:
        _load_suite(name)
    for modules in TRAINER_MODULES.values():
        _load(modules)


def suite_names() -> list[str]:
    """Every suite of the table (available or not), without importing any."""
    return sorted(SUITE_MODULES)


def suite(name: str) -> SuiteSpec:
    """The suite ``name``, importing only the modules that assemble it; ConfigError for an unknown name or a
    suite whose modules cannot be imported (with the reason)."""
    if name not in SUITE_MODULES:
        raise choice_error("env", name, suite_names())
    why = _load_suite(name)
    if why is not None or name not in _SUITES:
        raise ConfigError(f"suite {name!r} is not available here ({why or 'its module declares no such suite'})")
    return _SUITES[name]


def policy(name: str, suite_name: str) -> PolicySpec:
    """The policy ``name`` as offered for ``suite_name`` (importing only that suite's modules)."""
    suite(suite_name)
    return _POLICIES[name]


class _quiet_native_stderr:
    """Silence C-level writes to fd 2 during imports (pybullet prints its build time), keeping errors one line."""

    def __enter__(self) -> None:
        sys.stderr.flush()
        self._saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)


def suites() -> dict[str, SuiteSpec]:
    """All available suites by name (imports every suite module)."""
    load_all()
    return dict(sorted(_SUITES.items()))


def policies() -> dict[str, PolicySpec]:
    """All registered policies by name (imports every suite module)."""
    load_all()
    return dict(sorted(_POLICIES.items()))


def trainers() -> dict[str, TrainerSpec]:
    """All registered training families by name (imports their modules only)."""
    for modules in TRAINER_MODULES.values():
        _load(modules)
    return dict(sorted(_TRAINERS.items()))


def unavailable() -> dict[str, str]:
    """Suites whose modules could not be imported, with the reason."""
    load_all()
    return {s: next(_FAILED[m] for m in (*EVERY_SUITE, *mods) if m in _FAILED)
            for s, mods in SUITE_MODULES.items() if any(m in _FAILED for m in (*EVERY_SUITE, *mods))}


def policies_for(suite_name: str) -> list[str]:
    """Names of the policies offered for a suite (importing only that suite's modules)."""
    suite(suite_name)
    return [n for n, p in sorted(_POLICIES.items()) if not p.suites or suite_name in p.suites]


def policy_option_names(suite: str) -> list[str]:
    """Every ``--policy-option`` key some policy offered for ``suite`` reads (sorted)."""
    return sorted({k for n in policies_for(suite) for k in _POLICIES[n].option_names()})


def check_policy_options(suite: str, options: Mapping[str, Any]) -> None:
    """Reject option keys no policy of ``suite`` reads (a typo would otherwise run the default silently)."""
    valid = policy_option_names(suite)
    for key in options:
        if key not in valid:
            raise ConfigError(f"unknown policy option {key!r} for {suite}; valid: {', '.join(valid) or '(none)'}")
    for name in policies_for(suite):  # values: each typed policy checks the keys it owns (types and ranges)
        for options_type in _POLICIES[name].typed_options(suite):
            options_type.from_options(options, strict=False)


def trainer_for(env: str) -> TrainerSpec | None:
    """The training family whose env prefix matches ``env``, if any."""
    for spec in trainers().values():
        if any(env.startswith(prefix) for prefix in spec.env_prefixes):
            return spec
    return None
