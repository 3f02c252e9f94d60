"""The house rules, checked on the source: one-way layers, no import cycle, no reference outside the repository."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["envs", "perception", "policies", "agents", "sim_benchmarks", "launch"]  # lowest first
AUX_ALLOWED = {"torch", "numpy", "math", "dataclasses", "typing", "collections", "itertools", "functools",
               "__future__", "policies", "abc", "enum", "heapq", "bisect", "random", "warnings"}


def _modules() -> dict[str, Path]:
    out = {}
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every project module ``name`` imports, at module level or inside functions."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def test_no_upward_import_between_layers():
    upward = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() for t in ts if _layer(t) > _layer(m))
    assert upward == []


def test_no_import_cycle():
    # Tarjan's strongly connected components; a component of more than one module is a cycle. Package __init__
    # files that only re-export are part of the graph too.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert cycles == []


# The shared floor: errors, options, paths and caches, atomic writes, statistics. Every layer may import these, so
# they import nothing of the project but each other (importing one never loads an environment).
FLOOR = {"envs.errors", "envs.config", "envs.paths", "envs.atomic_io", "envs.statistics", "envs.cache_files",
         "envs.build_processes", "envs.weights"}


def test_the_shared_floor_imports_only_itself():
    assert all(m in MODULES for m in FLOOR)
    assert sorted(f"{m} -> {t}" for m in FLOOR for t in GRAPH[m] if t not in FLOOR | {"envs"}) == []


def test_aux_methods_depend_on_torch_and_numpy_only():
    bad = []
    for name, path in MODULES.items():
        if not name.startswith("policies.aux"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{name}: {m}" for m in mods if m.split(".")[0] not in AUX_ALLOWED or (
                m.startswith("policies") and not m.startswith("policies.aux"))]
    assert bad == []


def test_nothing_cites_files_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    pattern = re.compile(r"\b(DESIGN|ANCHORS|ECOSYSTEM)\.md\b|\.\./shared/")
    texts = [f for f in tracked if f.endswith((".py", ".md", ".yaml", ".xml", ".toml"))
             and f != "tests/test_architecture.py" and (ROOT / f).is_file()]
    hits = [f for f in texts if pattern.search((ROOT / f).read_text(encoding="utf-8", errors="replace"))]
    assert hits == []
