"""``python -m launch.study NAME [args...]``: run one study (``sim_benchmarks/studies/<line>/<module>.py``).

    python -m launch.study --list
    python -m launch.study streaming.streaming_learning --suite minatar --seeds 1,42,999 --steps 20000
    python -m launch.study aux manifoldkv --seeds 0-4          # a policies/aux experiment

The study may also be named with ``--study NAME`` (what a launch file's ``<param name="study">`` produces). Every
other argument goes to the study's own command line.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

from envs.errors import choice_error
from sim_benchmarks import studies
from sim_benchmarks.cli import main_guard


def study_names() -> list[str]:
    """``line.module`` for every study with a ``main``, plus ``aux`` (the policies/aux experiments)."""
    names = []
    for line in pkgutil.iter_modules(studies.__path__):
        if not line.ispkg:
            continue
        if line.name == "aux":
            names.append("aux")
            continue
        folder = Path(studies.__path__[0]) / line.name
        names += [f"{line.name}.{m.name}" for m in pkgutil.iter_modules([str(folder)])
                  if not m.name.startswith("_") and "\ndef main(" in (folder / f"{m.name}.py").read_text()]
    return sorted(names)


@main_guard
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--study" in argv:
        i = argv.index("--study")
        name = argv[i + 1] if i + 1 < len(argv) else ""
        argv = argv[:i] + argv[i + 2:]
    elif argv and not argv[0].startswith("-"):
        name, argv = argv[0], argv[1:]
    else:
        name = ""
    names = study_names()
    if name == "" and argv[:1] == ["--list"]:
        print("\n".join(names))
        return 0
    if name not in names:
        raise choice_error("study", name, names)
    module = importlib.import_module(f"{studies.__name__}.{name if name != 'aux' else 'aux.__main__'}")
    return int(module.main(argv) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
