"""``python -m sim_benchmarks.studies.aux METHOD --seeds 0-4 --out DIR``: run one aux method's experiment.

Writes ``DIR/results.json`` (schema ``embodia.aux/2``: per-seed numbers, the pass metric with its 95 % CI, wall
time, whether the data is synthetic, the verdict with its margin and headroom) and prints the verdict (yes /
partly / no / inconclusive) with a one-line summary. ``--list`` names every method and its claim. A method may be
named with or without its underscores (``manifold_kv`` or ``manifoldkv``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from envs.errors import ConfigError, choice_error
from sim_benchmarks.cli import ArgumentParser, main_guard, parse_seeds
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.studies.aux import methods
from sim_benchmarks.studies.aux.results import StudyResult


def canonical_name(name: str, registry: dict) -> str | None:
    """The registered method ``name`` means, ignoring case, underscores and hyphens (None if it names none)."""
    def key(text: str) -> str:
        return text.lower().replace("_", "").replace("-", "")
    return {key(m): m for m in registry}.get(key(name))


def merge(module, method: str, folders: list[Path]) -> StudyResult:
    """One result from the per-seed rows of several runs of ``method`` (wall time = the sum of theirs)."""
    if not hasattr(module, "summarise"):
        raise ConfigError(f"--merge is not supported by aux method {method!r}")
    rows, wall = [], 0.0
    for folder in folders:
        path = folder / "results.json"
        if not path.is_file():
            raise ConfigError(f"--merge {str(folder)!r} has no results.json")
        data = json.loads(path.read_text())
        if data.get("method") != method:
            raise ConfigError(f"--merge {str(folder)!r} holds {data.get('method')!r} results, not {method!r}")
        rows += data["per_seed"]
        wall += float(data.get("wall_s", 0.0))
    rows.sort(key=lambda r: r["seed"])
    if len({r["seed"] for r in rows}) != len(rows):
        raise ConfigError("--merge folders repeat a seed")
    result = module.summarise(rows)
    result.wall_s = wall
    return result


@main_guard
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="sim_benchmarks.studies.aux", description="Run one policies/aux method's experiment.")
    p.add_argument("method", nargs="?", help="method name (see --list)")
    p.add_argument("--seeds", default="0-4", help="seeds, e.g. 0-4 or 1,42,999 (default 0-4)")
    p.add_argument("--out", writes="folder", type=Path, default=None, help="results folder (default runs/aux/<method>)")
    p.add_argument("--quick", action="store_true", help="a seconds-long smoke run (tests); not for reported figures")
    p.add_argument("--list", action="store_true", help="list methods and their claims")
    p.add_argument("--merge", type=Path, nargs="+", default=None, metavar="DIR",
                   help="merge the per-seed rows of earlier runs' results.json (seeds run as separate processes) "
                        "into one result; only for methods whose module has summarise()")
    args = p.parse_args(argv)
    registry = methods()
    if args.list:
        for name, module in registry.items():
            print(f"{name}: {module.CLAIM}")
        return 0
    if not args.method:
        raise ConfigError(f"name an aux method (--list shows their claims); valid: {', '.join(sorted(registry))}")
    method = canonical_name(args.method, registry)
    if method is None:
        raise choice_error("aux method", args.method, sorted(registry))
    args.method = method
    seeds = parse_seeds(args.seeds)
    out = check_out_dir(args.out or Path("runs/aux") / args.method)  # before the work, not after it
    module = registry[args.method]
    if args.merge:
        result = merge(module, args.method, args.merge)
    else:
        start = time.perf_counter()
        result = module.run(seeds, args.quick)
        result.wall_s = time.perf_counter() - start
    path = result.write(out)
    lo, hi = result.ci95
    print(f"{result.method}: {result.metric} = {result.value:.4g} [95% CI {lo:.4g}, {hi:.4g}] -> {result.verdict}: "
          f"{result.summary} ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
