"""The results store: ``episodes.jsonl`` appended and flushed per finished episode, plus the run's config.

A run killed at any moment loses at most the episodes still in flight; ``resume`` reads what is there (dropping
a torn last line) and reports which (task, policy, episode) keys are done, so nothing is lost or repeated.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from envs.errors import ConfigError
from sim_benchmarks.train_log import write_json_atomic

RECORD_KEYS = ("benchmark", "task", "policy", "seed", "episode", "success", "correct_object", "wrong_object",
               "steps", "wall_s")


def record_key(record: dict[str, Any]) -> tuple[str, str, int]:
    """(task, policy, episode): the identity of an episode in a results folder."""
    return (str(record["task"]), str(record["policy"]), int(record["episode"]))


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete record in an episodes.jsonl; a torn final line (killed mid-write) is ignored."""
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                break  # torn write from a killed run
            line = line.strip()
            if line:
                records.append(json.loads(line))
    return records


class ResultsStore:
    """One results folder. ``open`` validates resume against the saved config before touching anything."""

    def __init__(self, out_dir: Path, config: dict[str, Any], resume: bool) -> None:
        self.out_dir = Path(out_dir)
        self.config = config
        self.episodes_path = self.out_dir / "episodes.jsonl"
        config_path = self.out_dir / "config.json"
        if resume:
            if not config_path.exists():
                raise ConfigError(f"--resume: no earlier run in {str(self.out_dir)!r} (config.json missing)")
            saved = json.loads(config_path.read_text())
            if saved != config:
                diff = sorted(k for k in set(saved) | set(config) if saved.get(k) != config.get(k))
                raise ConfigError(
                    f"--resume: {str(self.out_dir)!r} was run with different settings ({', '.join(diff)})")
        elif self.episodes_path.exists():
            raise ConfigError(f"--out {str(self.out_dir)!r} already holds results; pass --resume or another --out")
        self.fresh = not resume  # this run writes config.json and starts episodes.jsonl
        self.created_dir = not self.out_dir.exists()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        if not resume:
            write_json_atomic(config_path, config)
        self._fh = open(self.episodes_path, "a", encoding="utf-8")

    def discard_if_empty(self) -> None:
        """Remove what a fresh run wrote when it recorded no episode (a run that failed before its first one)."""
        self.close()
        if not self.fresh or (self.episodes_path.exists() and self.episodes_path.stat().st_size):
            return
        for path in (self.episodes_path, self.out_dir / "config.json"):
            path.unlink(missing_ok=True)
        if self.created_dir and not any(self.out_dir.iterdir()):
            self.out_dir.rmdir()

    def _repair_torn_tail(self) -> None:
        # A killed writer can leave a partial last line; cut it so the next append starts on a fresh line.
        if not self.episodes_path.exists():
            return
        data = self.episodes_path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with open(self.episodes_path, "r+b") as fh:
                fh.truncate(cut)

    def done_keys(self) -> set[tuple[str, str, int]]:
        """Keys of the episodes already recorded."""
        return {record_key(r) for r in read_records(self.episodes_path)}

    def append(self, record: dict[str, Any]) -> None:
        """Append one finished episode and force it to disk."""
        self._fh.write(json.dumps(record, sort_keys=True) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def records(self) -> list[dict[str, Any]]:
        """All recorded episodes, sorted by key (so summaries do not depend on completion order)."""
        self._fh.flush()
        return sorted(read_records(self.episodes_path), key=record_key)

    def close(self) -> None:
        self._fh.close()
