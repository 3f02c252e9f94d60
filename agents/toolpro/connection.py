"""Connections to ToolPro sites, pooled per deployment, with restart-and-resend after a lost server.

A site is the service process with the program runtime beside it (``python -m envs.services.site``); stepwise
agents use only its service tools. This module is the agents' supervisor: one :class:`Site` per deployment is shared
by every agent in this process, and when its server dies (SIGKILL, lost pipe, timeout) the next call starts a new
server process on the same database. The site's cost profile and traffic meter outlive the restart; each restart is
a new *incarnation* of the server (it draws fresh injected faults). All are closed at exit, and a site also exits
when its stdin closes.
"""

from __future__ import annotations

import atexit
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from envs.services.client import ServiceClient
from envs.services.link import LinkProfile, TrafficMeter
from envs.services.programs.program import pack_program
from envs.services.server import server_flags
from envs.services.tools import ServiceError
from policies.toolpro.profile import ServiceProfile

SITE_MODULE = "envs.services.site"
RECONNECTS = 3  # consecutive restarts without progress before a call is given up


@dataclass
class Site:
    """One deployment: its live connection (None while down) and what outlives a restart."""

    command: list[str]
    link: LinkProfile
    timeout_s: float
    profile: ServiceProfile = field(default_factory=ServiceProfile)
    meter: TrafficMeter = field(default_factory=TrafficMeter)
    profiled: bool = False
    starts: int = 0
    conn: ServiceClient | None = None

    @property
    def client(self) -> ServiceClient:
        """The live connection, starting the server (a new incarnation after a crash) when there is none."""
        if self.conn is None:
            incarnation = ["--incarnation", str(self.starts)] if self.starts else []
            self.conn = ServiceClient([*self.command, *incarnation], self.link, self.timeout_s, meter=self.meter)
            self.starts += 1
        return self.conn

    def drop(self) -> None:
        """Close the connection (its server died or hangs); the next :attr:`client` starts a new one."""
        if self.conn is not None:
            conn, self.conn = self.conn, None
            conn.close()


_POOL: dict[tuple[Any, ...], Site] = {}


def _key(deployment: dict[str, Any]) -> tuple[Any, ...]:
    return (tuple(server_flags(deployment)), float(deployment["rtt_ms"]), float(deployment["jitter_ms"]))


def site(deployment: dict[str, Any], timeout_s: float = 20.0) -> Site:
    """The pooled site for ``deployment`` (its server starts on first use of :attr:`Site.client`)."""
    key = _key(deployment)
    if key not in _POOL:
        link = LinkProfile(float(deployment["rtt_ms"]), float(deployment["jitter_ms"]), seed=0)
        _POOL[key] = Site([sys.executable, "-m", SITE_MODULE, *key[0]], link, timeout_s)
    return _POOL[key]


def drop(deployment: dict[str, Any]) -> None:
    """Close a deployment's connection (its server died); the next call starts a new one."""
    found = _POOL.get(_key(deployment))
    if found is not None:
        found.drop()


def close_all() -> None:
    """Close every pooled connection and stop its server."""
    while _POOL:
        _, s = _POOL.popitem()
        s.drop()


atexit.register(close_all)


def lost(exc: ServiceError) -> bool:
    """Whether a call failed because the server went away or stopped answering (not a tool error)."""
    return exc.kind == "unavailable" and "connection" in exc.message or exc.kind == "timeout"


def call(deployment: dict[str, Any], tool: str, args: dict[str, Any], key: str | None = None
         ) -> tuple[Any, int, bool]:
    """Call a tool; when the server is lost or times out, restart it and resend the same call (same key).

    Returns (result, reconnects, replayed): ``replayed`` when the service answered a resent write from its
    idempotency journal. Tool errors other than a lost server propagate as ServiceError.
    """
    s = site(deployment)
    for attempt in range(RECONNECTS + 1):
        try:
            result, replayed = s.client.call(tool, args, key)
            return result, attempt, replayed
        except ServiceError as exc:
            if not lost(exc) or attempt == RECONNECTS:
                raise
            s.drop()
            time.sleep(0.05)
    raise AssertionError("unreachable")


def run_program(deployment: dict[str, Any], program: dict[str, Any], run_id: str) -> tuple[dict[str, Any], int]:
    """Run a program at the site until it finishes; returns (the site's brief report, reconnects).

    The program travels packed (deflated against the grammar's dictionary) and the site answers a brief report,
    so the client's traffic is the program's size plus its answer, not a copy of every timing.

    One ``run_program`` covers the whole workflow, so a crash loses one MCP call but many tool calls. After a lost
    server the program is resent with the same run id to a restarted server: calls the run log holds are answered
    from it and writes that committed without a log row replay from the idempotency journal, so each write happens
    once and the run continues from where it died. The resend repeats while the run log grows between attempts
    (``run_progress``); after :data:`RECONNECTS` restarts in a row without progress the ServiceError propagates.
    """
    s = site(deployment)
    packed = pack_program(program)
    reconnects = stalled = 0
    logged = -1
    while True:
        try:
            return s.client.call("run_program", {"packed": packed, "run_id": run_id, "report": "brief"})[0], reconnects
        except ServiceError as exc:
            if not lost(exc):
                raise
            s.drop()
            reconnects += 1
            progress, restarts, _ = call(deployment, "run_progress", {"run_id": run_id})
            reconnects += restarts
            stalled = 0 if progress["logged"] > logged else stalled + 1
            logged = max(logged, progress["logged"])
            if stalled >= RECONNECTS:
                raise
