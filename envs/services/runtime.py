"""A service's tool runtime: argument validation, injected faults, transactions and the idempotency journal.

The MCP server (:mod:`envs.services.server`) and the server-side program executor both call tools through
:meth:`ServiceRuntime.call`, so a tool behaves identically whether it is called over the network or from a program.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import numpy as np

import envs.services.journal as journal
from envs.errors import choice_error
from envs.services.tools import ServiceError, ToolSpec

KEY_FIELD = "idempotency_key"


def service_module(service: str) -> ModuleType:
    """The module defining a service's SCHEMA, seed() and TOOLS."""
    import envs.services.orders as orders
    import envs.services.tickets as tickets
    import envs.services.travel as travel

    modules = {"travel": travel, "orders": orders, "tickets": tickets}
    if service not in modules:
        raise choice_error("service", service, list(modules))
    return modules[service]


def tool_specs(service: str) -> dict[str, ToolSpec]:
    """A service's tools by name."""
    return {t.name: t for t in service_module(service).TOOLS}


def seed_connection(conn: sqlite3.Connection, service: str, seed: int) -> None:
    """Create ``service``'s tables (and the journal) on an empty connection and fill them from ``seed``."""
    module = service_module(service)
    conn.executescript(module.SCHEMA + journal.SCHEMA)
    module.seed(conn, np.random.default_rng(seed))
    conn.commit()


def create_database(path: str | Path, service: str, seed: int) -> Path:
    """Write a fresh seeded database for ``service`` at ``path`` (replacing any file there)."""
    path = Path(path)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    try:
        seed_connection(conn, service, seed)
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
    return path


def reset_database(path: str | Path, service: str, seed: int) -> None:
    """Reseed an existing database in place (a server may hold it open): every row, journal included, replaced."""
    module = service_module(service)
    conn = sqlite3.connect(str(path), timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for t in tables:
            conn.execute(f"DELETE FROM {t}")  # includes sqlite_sequence, so AUTOINCREMENT ids restart
        module.seed(conn, np.random.default_rng(seed))
        conn.commit()
    finally:
        conn.close()


@dataclass(frozen=True)
class FaultPlan:
    """Injected server-side faults, each drawn per tool call from a seeded generator.

    error_rate: the call fails with ``unavailable`` before touching the database.
    timeout_rate: the server stalls ``timeout_s`` first (a client with a shorter deadline sees a timeout while the
      call still completes afterwards; only idempotency keys make the client's retry safe).
    crash_rate: the server process is killed (SIGKILL) during a state-modifying call, before it touches the
      database or right after its commit (half each), so a client resending the call meets both a lost and a
      journalled write.
    incarnation: which start of the server this is (0 first, then one more per restart after a crash). Faults are
      drawn from ``(seed, incarnation)``: a restarted server must not replay its predecessor's fault schedule, or
      a crash rate of 3 % becomes "crash again at the same call count" after every restart.
    """

    error_rate: float = 0.0
    timeout_rate: float = 0.0
    timeout_s: float = 0.5
    crash_rate: float = 0.0
    seed: int = 0
    incarnation: int = 0

    def active(self) -> bool:
        return self.error_rate > 0 or self.timeout_rate > 0 or self.crash_rate > 0


def kill_self() -> None:
    """Die like ``kill -9``: no cleanup, no commit, no flush."""
    os.kill(os.getpid(), signal.SIGKILL)


class ServiceRuntime:
    """Runs one service's tools against its SQLite database.

    ``crash_hook(point)`` is called at the points ``before_call``, ``before_commit`` and ``after_commit`` of every
    state-modifying call; crash-injection trials use it to kill the process there.
    """

    def __init__(self, service: str, db_path: str | Path, faults: FaultPlan | None = None,
                 crash_hook: Callable[[str], None] | None = None) -> None:
        self.service = service
        self.tools = tool_specs(service)
        self.faults = faults or FaultPlan()
        self.crash_hook = crash_hook
        self._rng = np.random.default_rng([self.faults.seed, self.faults.incarnation])
        self.conn = sqlite3.connect(str(db_path), isolation_level=None, check_same_thread=False, timeout=30)
        self.conn.execute("PRAGMA busy_timeout=30000")
        # WAL + NORMAL survives a killed process (the crash model here); only a power loss could drop a commit.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.calls = 0

    def close(self) -> None:
        self.conn.close()

    def spec(self, tool: str) -> ToolSpec:
        """The declaration of ``tool``; ServiceError(not_found) listing the valid tools otherwise."""
        if tool not in self.tools:
            raise ServiceError("not_found", f"unknown tool {tool!r} of service {self.service}; valid: "
                               + ", ".join(self.tools))
        return self.tools[tool]

    def validate(self, tool: str, args: dict[str, Any]) -> ToolSpec:
        """Check ``args`` against the tool's input schema; ServiceError(invalid_argument) naming the field."""
        spec = self.spec(tool)
        if not isinstance(args, dict):
            raise ServiceError("invalid_argument", f"{tool} arguments must be an object, got {type(args).__name__}")
        try:
            jsonschema.validate(args, spec.input_schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
            raise ServiceError("invalid_argument", f"{tool}.{where}: {exc.message}") from None
        return spec

    def _fault(self, spec: ToolSpec) -> bool:
        """Draw this call's injected faults; True when the process must die right after the call's commit."""
        if not self.faults.active():
            return False
        u = self._rng.random(4)
        if u[0] < self.faults.error_rate:
            raise ServiceError("unavailable", f"{self.service} returned 503 for {spec.name}")
        if u[1] < self.faults.timeout_rate:
            time.sleep(self.faults.timeout_s)
        if u[2] < self.faults.crash_rate and spec.effect in ("write", "idempotent_write"):
            if u[3] < 0.5:
                kill_self()
            return True
        return False

    def _hook(self, point: str) -> None:
        if self.crash_hook is not None:
            self.crash_hook(point)

    def call(self, tool: str, args: dict[str, Any], key: str | None = None) -> tuple[Any, bool]:
        """Run a tool; returns (result, replayed). ``key`` makes a state-modifying call exactly-once.

        Everything a call changes, and its journal row, commit in one transaction: an error leaves no trace.
        """
        spec = self.validate(tool, args)
        self.calls += 1
        die_after_commit = self._fault(spec)
        if spec.effect == "read" or spec.effect == "pure":
            return spec.handler(self.conn, args), False
        self._hook("before_call")
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if key is not None:
                stored = journal.lookup(self.conn, key, tool, args)
                if stored is not None:
                    self.conn.execute("ROLLBACK")
                    return stored, True
            result = spec.handler(self.conn, args)
            if key is not None:
                journal.record(self.conn, key, tool, args, result)
            self._hook("before_commit")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        self._hook("after_commit")
        if die_after_commit:  # the write is durable (and journalled) but its caller never hears back
            kill_self()
        return result, False
