"""The CLI plumbing of the launch modules (one-line errors, exit 2); it lives in ``sim_benchmarks.cli`` so the
studies under ``sim_benchmarks/studies`` share it without importing upwards."""

from sim_benchmarks.cli import ArgumentParser, main_guard, parse_options, require_positive

__all__ = ["ArgumentParser", "main_guard", "parse_options", "require_positive"]
