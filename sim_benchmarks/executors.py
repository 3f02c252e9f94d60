"""Executors run episode jobs and yield records: serial, a local process pool, or Ray — same records each way.

Workers keep one env and one policy per (suite, task, policy) and reuse them across that cell's episodes; each
episode is fully determined by its job's seeds, so grouping and order do not change any record.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from envs.errors import choice_error
from sim_benchmarks.jobs import EpisodeJob
from sim_benchmarks.thread_pools import limit_threads

EXECUTORS = ("serial", "process", "ray")


class Executor(Protocol):
    """Runs jobs, yielding one record per finished episode (in completion order)."""

    def map(self, jobs: Iterable[EpisodeJob]) -> Iterator[dict[str, Any]]: ...


class EpisodeWorker:
    """Builds and caches envs/policies for jobs and turns each job into an episode record."""

    def __init__(self, video_dir: str | None = None) -> None:
        self.video_dir = video_dir
        self._key: tuple[Any, ...] | None = None
        self._env: Any = None
        self._policy: Any = None

    def _prepare(self, job: EpisodeJob) -> None:
        if self._key == job.worker_key:
            return
        from sim_benchmarks import registry

        self.close()
        suite = registry.suite(job.suite)
        env = suite.make_env(job.task, dict(job.env_options))
        ctx = registry.PolicyContext(suite=job.suite, task=job.task, policy=job.policy,
                                     seed=job.policy_seed, env=env, options=dict(job.policy_options))
        self._policy = registry.policy(job.policy, job.suite).factory(ctx)
        self._env, self._key = env, job.worker_key

    def run(self, job: EpisodeJob) -> dict[str, Any]:
        """Run one job; returns the flat record stored in episodes.jsonl."""
        from agents.episodic import run_episode
        from sim_benchmarks import registry

        self._prepare(job)
        suite = registry.suite(job.suite)
        out = run_episode(self._env, self._policy, job.env_seed, job.policy_seed, max_steps=suite.max_steps,
                          record=job.record_video, episode_metrics=suite.episode_metrics, episode=job.episode)
        record: dict[str, Any] = {
            "benchmark": job.suite, "task": job.task, "policy": job.policy, "episode": job.episode,
            "seed": job.env_seed, "policy_seed": job.policy_seed, "steps": out.steps, "wall_s": out.wall_s,
            **out.metrics,
        }
        if job.record_video and out.frames and self.video_dir:
            from sim_benchmarks.video import write_video

            name = f"{job.task}__{job.policy}__ep{job.episode:03d}.mp4".replace("/", "_")
            record["video"] = str(write_video(Path(self.video_dir) / name, out.frames))
        return record

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
        self._env = self._policy = self._key = None


def _grouped(jobs: Iterable[EpisodeJob]) -> list[list[EpisodeJob]]:
    # Chunks of consecutive jobs sharing a worker key, so a worker builds each env/policy once per chunk.
    groups: dict[tuple[Any, ...], list[EpisodeJob]] = {}
    for job in jobs:
        groups.setdefault(job.worker_key, []).append(job)
    return list(groups.values())


def _split(groups: list[list[EpisodeJob]], pieces: int) -> list[list[EpisodeJob]]:
    # Break each cell into ~pieces chunks so workers stay busy when there are fewer cells than workers.
    out = []
    for g in groups:
        size = max(1, -(-len(g) // pieces))
        out.extend(g[i : i + size] for i in range(0, len(g), size))
    return out


@dataclass
class SerialExecutor:
    """Runs every job in this process, in order."""

    video_dir: str | None = None

    def map(self, jobs: Iterable[EpisodeJob]) -> Iterator[dict[str, Any]]:
        worker = EpisodeWorker(self.video_dir)
        try:
            for job in jobs:
                yield worker.run(job)
        finally:
            worker.close()


_PROCESS_WORKER: EpisodeWorker | None = None  # one per pool process (set by the initializer)


def _init_process(video_dir: str | None) -> None:
    global _PROCESS_WORKER
    limit_threads()
    _PROCESS_WORKER = EpisodeWorker(video_dir)


def _run_chunk(chunk: list[EpisodeJob]) -> list[dict[str, Any]]:
    assert _PROCESS_WORKER is not None
    return [_PROCESS_WORKER.run(job) for job in chunk]


@dataclass
class ProcessExecutor:
    """A local pool of spawned processes; each keeps its env and policy across the jobs of a chunk."""

    workers: int = 2
    video_dir: str | None = None

    def map(self, jobs: Iterable[EpisodeJob]) -> Iterator[dict[str, Any]]:
        import multiprocessing as mp

        chunks = _split(_grouped(jobs), self.workers * 2)
        if not chunks:
            return
        # spawn, not fork: pybullet clients, jax and torch thread pools do not survive a fork safely.
        ctx = mp.get_context("spawn")
        with ctx.Pool(self.workers, initializer=_init_process, initargs=(self.video_dir,)) as pool:
            for records in pool.imap_unordered(_run_chunk, chunks):
                yield from records


@dataclass
class RayExecutor:
    """Ray actors (one CPU each, as many as ``workers``) over chunks of jobs; Ray is always shut down after.

    Only actors hold CPUs and no task waits on another task, so nothing can starve (the actor/task deadlock).
    """

    workers: int = 2
    video_dir: str | None = None
    object_store_memory: int = 200 * 1024 * 1024

    def map(self, jobs: Iterable[EpisodeJob]) -> Iterator[dict[str, Any]]:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import ray

        chunks = _split(_grouped(jobs), self.workers * 2)
        if not chunks:
            return
        ray.init(num_cpus=self.workers, object_store_memory=self.object_store_memory, include_dashboard=False,
                 log_to_driver=False, configure_logging=False, ignore_reinit_error=True)
        try:
            actor_cls = ray.remote(num_cpus=1)(_RayWorker)
            actors = [actor_cls.remote(self.video_dir) for _ in range(min(self.workers, len(chunks)))]
            pending: dict[Any, Any] = {}
            queue = list(chunks)
            for actor in actors:
                if queue:
                    pending[actor.run_chunk.remote(queue.pop(0))] = actor
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                actor = pending.pop(done[0])
                if queue:
                    pending[actor.run_chunk.remote(queue.pop(0))] = actor
                yield from ray.get(done[0])
        finally:
            ray.shutdown()


class _RayWorker:
    def __init__(self, video_dir: str | None) -> None:
        limit_threads()
        self.worker = EpisodeWorker(video_dir)

    def run_chunk(self, chunk: list[EpisodeJob]) -> list[dict[str, Any]]:
        return [self.worker.run(job) for job in chunk]


def make_executor(name: str, workers: int, video_dir: str | None = None) -> Executor:
    """The executor called ``name``; ``workers`` is ignored by the serial one."""
    if name == "serial":
        return SerialExecutor(video_dir)
    if name == "process":
        return ProcessExecutor(workers, video_dir)
    if name == "ray":
        return RayExecutor(workers, video_dir)
    raise choice_error("executor", name, EXECUTORS)
