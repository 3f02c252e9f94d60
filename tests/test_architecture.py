"""The house rules, checked on the source: one-way layers, no import cycle (static or at run time), no reference
outside the repository."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
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


def _below(prefix: str) -> set[str]:
    return {m for m in MODULES if m.startswith(prefix)}


def _name_calls(tree: ast.AST) -> list[ast.Call]:
    """``importlib.import_module(...)`` and ``__import__(...)`` calls: imports by name, made at run time."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Attribute) and n.func.attr == "import_module") or
        (isinstance(n.func, ast.Name) and n.func.id == "__import__"))]


def _dynamic() -> dict[str, set[str]]:
    """The modules each import-by-name site may load (a name built at run time cannot be read off the source)."""
    from launch.cli import commands
    from sim_benchmarks.registry import EVERY_SUITE, PACKAGE, SUITE_MODULES, TRAINER_MODULES
    from sim_benchmarks.studies.aux import _SKIP

    table = {m for mods in (*SUITE_MODULES.values(), *TRAINER_MODULES.values(), EVERY_SUITE) for m in mods}
    aux = "sim_benchmarks.studies.aux."
    return {
        "sim_benchmarks.registry": {f"{PACKAGE}.{m}" for m in table},  # the registry's table
        "launch.__main__": {f"launch.{c}" for c in commands()},  # `embodia NAME` runs launch.NAME
        "launch.study": _below("sim_benchmarks.studies."),  # `launch.study LINE.MODULE`
        "sim_benchmarks.studies.aux": {m for m in _below(aux) if "." not in m[len(aux):]  # the aux methods
                                       and not m[len(aux):].startswith("_") and m[len(aux):] not in _SKIP},
        # outside the project: a stdlib module list, and a gymnasium alias for an external reference script
        "sim_benchmarks.studies.aux.stdlib_docstrings": set(),
        "sim_benchmarks.studies.streaming._reference_runner": set(),
    }


def _imports(name: str, path: Path) -> set[str]:
    """Every project module ``name`` imports, at module level or inside functions (by name too: a literal name
    is read off the call, a computed one comes from :func:`_dynamic`)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for call in _name_calls(tree):
        if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            found |= {call.args[0].value} & set(MODULES)
    for node in ast.walk(tree):
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
for _module, _targets in _dynamic().items():
    GRAPH[_module] |= _targets - {_module}


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


def test_every_import_by_computed_name_is_declared():
    # A new import_module(f"...") site must say what it may load (in _dynamic), or the cycle test cannot see it.
    computed = sorted(name for name, path in MODULES.items() if any(
        not (c.args and isinstance(c.args[0], ast.Constant)) for c in _name_calls(ast.parse(path.read_text()))))
    assert computed == sorted(_dynamic())


# Run in a fresh interpreter: records which project module was executing each time a project module was first
# imported, while the CLI entry points load and the registry imports every suite module.
_RECORDER = """
import json, sys
PROJECT = ("envs", "perception", "policies", "agents", "sim_benchmarks", "launch")
edges = set()
class Recorder:
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in PROJECT:
            frame = sys._getframe(1)
            while frame is not None:
                importer = frame.f_globals.get("__name__", "")
                if importer.split(".")[0] in PROJECT and importer != fullname:
                    edges.add((importer, fullname))
                    break
                frame = frame.f_back
        return None
sys.meta_path.insert(0, Recorder())
import launch.eval, launch.train
from sim_benchmarks import registry
registry.load_all()
print(json.dumps(sorted(edges)))
"""


def test_run_time_imports_are_edges_of_the_checked_graph():
    # What the cycle test checks must be what really happens: every import observed at run time (function-local
    # ones, the registry's table) is an edge of GRAPH, or the import of a package on the way to one.
    out = subprocess.run([sys.executable, "-c", _RECORDER], cwd=ROOT, capture_output=True, text=True, check=True)
    observed = [tuple(e) for e in json.loads(out.stdout.strip().splitlines()[-1])]
    assert len(observed) > 50  # the recorder saw the imports
    unmodelled = [f"{a} -> {b}" for a, b in observed if a in GRAPH and b in MODULES and b not in GRAPH[a]
                  and not any(t.startswith(b + ".") for t in GRAPH[a])]
    assert unmodelled == []


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
