"""Episode jobs and the seeds derived from them.

The environment seed depends on (base seed, suite, task, episode) only, so every policy meets the same episode
(paired comparison); the policy seed also mixes in the policy name. Both come from a hash, so they do not depend
on run order, worker count or executor.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from any sequence of printable parts."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: which suite/task/policy, its index, and the seeds derived from them."""

    suite: str
    task: str
    policy: str
    episode: int
    base_seed: int
    record_video: bool = False
    env_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    policy_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

    @property
    def key(self) -> tuple[str, str, int]:
        """Identity in the results store: (task, policy, episode)."""
        return (self.task, self.policy, self.episode)

    @property
    def env_seed(self) -> int:
        return derive_seed(self.base_seed, self.suite, self.task, self.episode)

    @property
    def policy_seed(self) -> int:
        return derive_seed(self.base_seed, self.suite, self.task, self.policy, self.episode)

    @property
    def worker_key(self) -> tuple[Any, ...]:
        """Jobs with the same worker key can reuse one env and one policy."""
        return (self.suite, self.task, self.policy, self.base_seed, self.env_options, self.policy_options)


def make_jobs(
    suite: str,
    tasks: list[str],
    policies: list[str],
    episodes: int,
    base_seed: int,
    video: int = 0,
    env_options: dict[str, Any] | None = None,
    policy_options: dict[str, Any] | None = None,
) -> list[EpisodeJob]:
    """All (task, policy, episode) jobs, task-major; the first ``video`` episodes of each cell are recorded."""
    env_opts = tuple(sorted((env_options or {}).items()))
    pol_opts = tuple(sorted((policy_options or {}).items()))
    return [
        EpisodeJob(suite, task, policy, ep, base_seed, ep < video, env_opts, pol_opts)
        for task in tasks
        for policy in policies
        for ep in range(episodes)
    ]
