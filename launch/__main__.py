"""``embodia SUBCOMMAND ...``: the console script; each subcommand is a ``launch.<name>`` module."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import launch

_NOT_COMMANDS = {"cli", "__main__", "files", "launch_file", "ros2_grammar"}


def commands() -> list[str]:
    """Subcommands: every launch module with a ``main``."""
    return sorted(m.name for m in pkgutil.iter_modules(launch.__path__) if m.name not in _NOT_COMMANDS
                  and not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = commands()
    if not argv or argv[0] in {"-h", "--help"}:
        print(f"usage: embodia {{{','.join(names)}}} [args...]  (same as python -m launch.<command>)")
        return 0 if argv else 2
    name = argv[0].replace("-", "_")
    if name not in names:
        print(f"error: unknown command {argv[0]!r}; valid: {', '.join(names)}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"launch.{name}")
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
