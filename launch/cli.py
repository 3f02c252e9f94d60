"""The CLI plumbing of the launch modules (one-line errors, exit 2; it lives in ``sim_benchmarks.cli`` so the
studies under ``sim_benchmarks/studies`` share it without importing upwards) and the list of subcommands."""

import pkgutil

import launch
from sim_benchmarks.cli import ArgumentParser, main_guard, parse_options, require_positive

__all__ = ["ArgumentParser", "commands", "main_guard", "parse_options", "require_positive"]

_NOT_COMMANDS = {"cli", "__main__", "files", "launch_file", "ros2_grammar"}


def commands() -> list[str]:
    """Subcommands (of ``embodia`` and launch files' ``<node exec>``): every launch module with a ``main``."""
    return sorted(m.name for m in pkgutil.iter_modules(launch.__path__) if m.name not in _NOT_COMMANDS
                  and not m.name.startswith("_"))
