"""gymnasium ids of Embodia's env families, ``Embodia/<Family>-<Task>-v0``, registered when a family's package is
imported (``import envs.games`` → ``gym.make("Embodia/Games-RpsAntiModel-v0")``).

Keyword arguments of ``gym.make`` are the family's typed options, the same fields as the suite's ``--env-option``
keys (``gym.make(id, rounds=200)``); ``options={...}`` is accepted too. A wrong key or value raises the same
:class:`~envs.errors.ConfigError` as on the command line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym

from envs.errors import ConfigError

# family -> {gym id: task}, filled as packages register (for docs and tests).
FAMILIES: dict[str, dict[str, str]] = {}


def camel(task: str) -> str:
    """``cheapest_flight_AMS_BER`` → ``CheapestFlightAMSBER`` (each word's first letter upper-cased, the rest kept)."""
    return "".join(w[:1].upper() + w[1:] for w in task.split("_"))


def family_id(family: str, task: str) -> str:
    """The gymnasium id of one task of a family."""
    return f"Embodia/{family}-{camel(task)}-v0"


def register_family(family: str, tasks: Iterable[str], entry_point: str, *,
                    id_of=None, max_episode_steps: int | None = None) -> dict[str, str]:
    """Register one id per task (idempotent); ``entry_point(task=..., **options)`` builds the env."""
    ids = FAMILIES.setdefault(family, {})
    for task in tasks:
        env_id = id_of(task) if id_of is not None else family_id(family, task)
        ids[env_id] = task
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point, kwargs={"task": task}, max_episode_steps=max_episode_steps)
    return ids


def merged_options(options: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``options={...}`` and keyword options of ``gym.make`` as one mapping (a key given both ways is an error)."""
    both = sorted(set(options or {}) & set(kwargs))
    if both:
        raise ConfigError(f"option {both[0]} given both as a keyword and in options=; give it once")
    return {**(options or {}), **kwargs}
