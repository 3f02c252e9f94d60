"""Experiments for the ``policies/aux`` methods: one module per method, found by name (no central list).

A method module defines ``METHOD`` (its CLI name), ``CLAIM`` (one line: what the paper claims and the pass rule) and
``run(seeds: list[int], quick: bool) -> StudyResult``. ``quick`` shrinks the experiment to a smoke run of seconds
(used by the tests); the figures on the results page come from full runs.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

_SKIP = {"__main__", "results", "readme_table"}


def methods() -> dict[str, ModuleType]:
    """Every method module of this package by its ``METHOD`` name."""
    out: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in _SKIP:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "METHOD") and hasattr(module, "run"):
            out[module.METHOD] = module
    return out
