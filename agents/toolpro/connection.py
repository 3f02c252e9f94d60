"""Connections to ToolPro sites, pooled per deployment, with reconnect-and-retry after a lost server.

A site is the service process with the program runtime beside it (``python -m policies.toolpro.site``); stepwise
agents use only its service tools. One connection (and one cost profile) per deployment is shared by every agent
in this process; all are closed at exit, and a site also exits when its stdin closes.
"""

from __future__ import annotations

import atexit
import sys
import time
from dataclasses import dataclass
from typing import Any

from envs.services.client import ServiceClient
from envs.services.link import LinkProfile
from envs.services.tools import ServiceError
from policies.toolpro.profile import ServiceProfile

SITE_MODULE = "policies.toolpro.site"
RECONNECTS = 3


@dataclass
class Site:
    """A live connection and what is known about its costs."""

    client: ServiceClient
    profile: ServiceProfile
    profiled: bool = False


_POOL: dict[tuple[Any, ...], Site] = {}


def _key(deployment: dict[str, Any]) -> tuple[Any, ...]:
    return (tuple(deployment["server_flags"]), float(deployment["rtt_ms"]), float(deployment["jitter_ms"]))


def site(deployment: dict[str, Any], timeout_s: float = 20.0) -> Site:
    """The pooled site for ``deployment`` (started on first use)."""
    key = _key(deployment)
    if key not in _POOL:
        link = LinkProfile(float(deployment["rtt_ms"]), float(deployment["jitter_ms"]), seed=0)
        client = ServiceClient([sys.executable, "-m", SITE_MODULE, *deployment["server_flags"]], link, timeout_s)
        _POOL[key] = Site(client, ServiceProfile())
    return _POOL[key]


def drop(deployment: dict[str, Any]) -> None:
    """Close a deployment's connection (its server died); the next :func:`site` starts a new one."""
    found = _POOL.pop(_key(deployment), None)
    if found is not None:
        found.client.close()


def close_all() -> None:
    """Close every pooled connection and stop its server."""
    while _POOL:
        _, s = _POOL.popitem()
        s.client.close()


atexit.register(close_all)


def call(deployment: dict[str, Any], tool: str, args: dict[str, Any], key: str | None = None) -> tuple[Any, int]:
    """Call a tool; when the server is lost or times out, reconnect and resend the same call (same key).

    Returns (result, reconnects). Tool errors other than a lost server propagate as ServiceError.
    """
    for attempt in range(RECONNECTS + 1):
        try:
            return site(deployment).client.call(tool, args, key)[0], attempt
        except ServiceError as exc:
            lost = exc.kind == "unavailable" and "connection" in exc.message or exc.kind == "timeout"
            if not lost or attempt == RECONNECTS:
                raise
            drop(deployment)
            time.sleep(0.05)
    raise AssertionError("unreachable")
