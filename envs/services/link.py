"""The client↔server network link: injected round-trip latency and jitter, and a meter of the traffic.

:class:`MeteredTransport` wraps any MCP client transport (here stdio). Each JSON-RPC message is delayed by half the
round-trip time (plus seeded jitter) in its direction with a real ``sleep`` — the latency is wall-clock time, not a
virtual clock — and its bytes are counted exactly as the stdio transport serialises them (one JSON line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import numpy as np

from envs.errors import ConfigError


@dataclass(frozen=True)
class LinkProfile:
    """Round-trip time and jitter (ms) of the simulated network between agent and services."""

    rtt_ms: float = 0.0
    jitter_ms: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rtt_ms < 0 or self.jitter_ms < 0 or self.jitter_ms > self.rtt_ms / 2 + 1e-9:
            raise ConfigError(f"link needs rtt_ms >= 0 and 0 <= jitter_ms <= rtt_ms/2, got rtt_ms={self.rtt_ms}, "
                              f"jitter_ms={self.jitter_ms}")


@dataclass
class TrafficMeter:
    """Client-side traffic: bytes each way, requests (round trips) and their summed injected delay."""

    bytes_sent: int = 0
    bytes_received: int = 0
    round_trips: int = 0
    delay_s: float = 0.0
    by_method: dict[str, int] = field(default_factory=dict)

    @property
    def bytes_total(self) -> int:
        return self.bytes_sent + self.bytes_received

    def snapshot(self) -> dict[str, float]:
        return {"bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received,
                "bytes_total": self.bytes_total, "round_trips": self.round_trips, "link_delay_s": self.delay_s}


def wire_bytes(message: Any) -> int:
    """Bytes of one message on the stdio wire: its JSON line plus the newline."""
    inner = getattr(message, "message", message)
    return len(inner.model_dump_json(by_alias=True, exclude_unset=True).encode()) + 1


class _Delayed:
    """One direction of the link: sleeps one-way latency per message and meters it."""

    def __init__(self, stream: Any, link: LinkProfile, meter: TrafficMeter, rng: np.random.Generator,
                 sending: bool) -> None:
        self._stream, self._link, self._meter, self._rng, self._sending = stream, link, meter, rng, sending

    def _one_way_s(self) -> float:
        if self._link.rtt_ms <= 0:
            return 0.0
        jitter = self._rng.uniform(-self._link.jitter_ms, self._link.jitter_ms) / 2 if self._link.jitter_ms else 0.0
        return max(0.0, self._link.rtt_ms / 2 + jitter) / 1000.0

    async def _pass(self, item: Any) -> None:
        if isinstance(item, Exception):
            return
        size = wire_bytes(item)
        if self._sending:
            self._meter.bytes_sent += size
            method = getattr(getattr(item.message, "root", item.message), "method", None)
            if method is not None and getattr(getattr(item.message, "root", item.message), "id", None) is not None:
                self._meter.round_trips += 1
                self._meter.by_method[method] = self._meter.by_method.get(method, 0) + 1
        else:
            self._meter.bytes_received += size
        delay = self._one_way_s()
        if delay:
            self._meter.delay_s += delay
            await anyio.sleep(delay)

    async def send(self, item: Any, /) -> None:
        await self._pass(item)
        await self._stream.send(item)

    async def receive(self) -> Any:
        item = await self._stream.receive()
        await self._pass(item)
        return item

    def __aiter__(self) -> _Delayed:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _Delayed:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        await self.aclose()
        return None


class MeteredTransport:
    """An MCP ``Transport`` that routes another transport's streams through the simulated link."""

    def __init__(self, inner: Any, link: LinkProfile, meter: TrafficMeter) -> None:
        self._inner, self._link, self._meter = inner, link, meter
        self._rng = np.random.default_rng(link.seed)

    async def __aenter__(self) -> tuple[_Delayed, _Delayed]:
        read, write = await self._inner.__aenter__()
        return (_Delayed(read, self._link, self._meter, self._rng, sending=False),
                _Delayed(write, self._link, self._meter, self._rng, sending=True))

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        return await self._inner.__aexit__(et, e, tb)
