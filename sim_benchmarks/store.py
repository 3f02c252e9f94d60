"""The results store: ``episodes.jsonl`` appended and flushed per finished episode, plus the run's config.

A run killed at any moment loses at most the episodes still in flight; ``resume`` reads what is there (dropping
a torn last line) and reports which (task, policy, episode) keys are done, so nothing is lost or repeated. One
writer at a time: the folder is locked (:class:`FolderLock`) from opening to :meth:`ResultsStore.close`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from sim_benchmarks.results_folder import FolderLock, check_out_dir
from sim_benchmarks.train_log import cut_torn_tail, read_jsonl

RECORD_KEYS = ("benchmark", "task", "policy", "seed", "episode", "success", "correct_object", "wrong_object",
               "steps", "wall_s")
_KEY_FIELDS = ("task", "policy", "episode")


def record_key(record: dict[str, Any]) -> tuple[str, str, int]:
    """(task, policy, episode): the identity of an episode in a results folder."""
    return (str(record["task"]), str(record["policy"]), int(record["episode"]))


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete record in an episodes.jsonl; a torn final line (killed mid-write) is ignored, a corrupt line
    elsewhere is a ConfigError naming ``file:line``."""
    return read_jsonl(path, required=_KEY_FIELDS)


def read_config(path: Path) -> dict[str, Any]:
    """A results folder's config.json; ConfigError when it is missing its braces, not JSON or not an object."""
    try:
        saved = json.loads(path.read_bytes())
    except ValueError:
        saved = None
    if not isinstance(saved, dict):
        raise ConfigError(f"{str(path)!r} is corrupt (expected the JSON object a run wrote); "
                          f"start again in another --out")
    return saved


class ResultsStore:
    """One results folder. Opening validates (resume settings, earlier records) before it writes anything."""

    def __init__(self, out_dir: Path, config: dict[str, Any], resume: bool) -> None:
        self.out_dir = check_out_dir(out_dir)
        self.config = config
        self.resume = resume
        self.episodes_path = self.out_dir / "episodes.jsonl"
        self.config_path = self.out_dir / "config.json"
        self._fh = None
        # The lock comes first, so a second writer is told the folder is in use (not what it half sees of the
        # first writer's files); a rejected run undoes the lock's traces and leaves the folder as it found it.
        self._lock = FolderLock(self.out_dir).acquire()
        try:
            self._check()
            self.fresh = not resume  # this run writes config.json and starts episodes.jsonl
            cut_torn_tail(self.episodes_path)
            if self.fresh:
                write_json_atomic(self.config_path, config)
            self._fh = open(self.episodes_path, "a", encoding="utf-8")
        except ConfigError:
            self._lock.release_and_undo()
            raise
        except BaseException:
            self._lock.release()
            raise

    def _check(self) -> None:
        if self.resume:
            if not self.config_path.exists():
                raise ConfigError(f"--resume: no earlier run in {str(self.out_dir)!r} (config.json missing)")
            saved = read_config(self.config_path)
            if saved != self.config:
                diff = sorted(k for k in set(saved) | set(self.config) if saved.get(k) != self.config.get(k))
                raise ConfigError(
                    f"--resume: {str(self.out_dir)!r} was run with different settings ({', '.join(diff)})")
            read_records(self.episodes_path)  # a corrupt line stops the resume before anything is appended
        elif self.episodes_path.exists():
            raise ConfigError(f"--out {str(self.out_dir)!r} already holds results; pass --resume or another --out")

    def discard_if_empty(self) -> None:
        """Remove what a fresh run wrote when it recorded no episode (a run that failed before its first one)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self.fresh and not (self.episodes_path.exists() and self.episodes_path.stat().st_size):
            for path in (self.episodes_path, self.config_path):
                path.unlink(missing_ok=True)
            self._lock.release_and_undo()
        self.close()

    def done_keys(self) -> set[tuple[str, str, int]]:
        """Keys of the episodes already recorded."""
        return {record_key(r) for r in read_records(self.episodes_path)}

    def append(self, record: dict[str, Any]) -> None:
        """Append one finished episode and force it to disk."""
        assert self._fh is not None, "the store is closed"
        self._fh.write(json.dumps(record, sort_keys=True) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def records(self) -> list[dict[str, Any]]:
        """All recorded episodes, sorted by key (so summaries do not depend on completion order)."""
        if self._fh is not None:
            self._fh.flush()
        return sorted(read_records(self.episodes_path), key=record_key)

    def close(self) -> None:
        """Close the log and release the folder (idempotent)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._lock.release()
