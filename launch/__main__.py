"""``embodia SUBCOMMAND ...``: the console script; each subcommand is a ``launch.<name>`` module."""

from __future__ import annotations

import importlib
import sys

from launch.cli import commands
from sim_benchmarks.cli import main_guard


@main_guard
def main(argv: list[str] | None = None) -> int:
    """Dispatch to ``launch.<command>.main``; no arguments is a usage error (usage on stderr, exit 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    names = commands()
    usage = f"usage: embodia {{{','.join(names)}}} [args...]  (same as python -m launch.<command>)"
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    if argv[0] in {"-h", "--help"}:
        print(usage)
        return 0
    name = argv[0].replace("-", "_")
    if name not in names:
        print(f"error: unknown command {argv[0]!r}; valid: {', '.join(names)}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"launch.{name}")
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
