"""``key=value`` option lists from the command line, shared by launch modules and benchmark scripts."""

from __future__ import annotations

from envs.errors import ConfigError


def parse_options(pairs: list[str] | None, flag: str) -> dict[str, object]:
    """``key=value`` pairs → dict, values parsed as int/float/bool when they look like one."""
    out: dict[str, object] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} expects key=value, got {pair!r}")
        out[key] = _parse_value(raw)
    return out


def _parse_value(raw: str) -> object:
    low = raw.lower()
    if low in {"true", "false"}:
        return low == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw
