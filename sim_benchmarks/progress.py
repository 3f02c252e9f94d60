"""Rich progress bars that stay quiet when stderr is not a terminal or ``CI=true``.

Lower layers (agents, policies) never import this: they take an ``on_progress(n)`` callback, and the launch or
benchmark code passes the handle yielded here (it is callable: ``advance(n)``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def progress_enabled() -> bool:
    """Bars are shown only on an interactive terminal outside CI."""
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        return False
    return sys.stderr.isatty()


class ProgressHandle:
    """Callable advance(n); ``set_total`` fixes the total once it is known (e.g. after resume filtering)."""

    def __init__(self, bar: Any = None, task: Any = None) -> None:
        self._bar, self._task = bar, task

    def __call__(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def set_total(self, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, total=total)


@contextmanager
def progress_bar(total: int | None, description: str) -> Iterator[ProgressHandle]:
    """Yield a :class:`ProgressHandle`; renders a rich bar on stderr when enabled, a no-op otherwise."""
    if not progress_enabled():
        yield ProgressHandle()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        yield ProgressHandle(bar, bar.add_task(description, total=total))
