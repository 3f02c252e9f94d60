"""Writes the training results contract: ``metrics.jsonl`` (append + flush) and ``summary.json``."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

TRAIN_SCHEMA = "embodia.train/1"


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON through a temporary file and rename, so readers never see half a file."""
    path = Path(path)
    # A unique temporary name: two writers never share (and clobber) one temporary file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class TrainLog:
    """Append-only metrics log for one training run; ``resume=True`` keeps what an earlier run wrote."""

    def __init__(self, out_dir: str | Path, resume: bool = False) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / "metrics.jsonl"
        if not resume and self.path.exists():
            self.path.unlink()
        self._fh = open(self.path, "a", encoding="utf-8")

    def records(self) -> list[dict[str, Any]]:
        """Every record written so far (including an earlier run's, when resuming)."""
        self._fh.flush()
        with open(self.path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def truncate_after(self, step: int) -> None:
        """Drop records past ``step`` (a resumed run restarts from its last checkpoint at ``step``)."""
        kept = [r for r in self.records() if r.get("step", 0) <= step]
        self._fh.close()
        with open(self.path, "w", encoding="utf-8") as fh:
            for r in kept:
                fh.write(json.dumps(r, sort_keys=True) + "\n")
        self._fh = open(self.path, "a", encoding="utf-8")

    def append(self, record: dict[str, Any]) -> None:
        """Append one record (e.g. ``{"step": 1234, "episode": 7, "return": 3.0}``) and flush it."""
        self._fh.write(json.dumps(record, sort_keys=True) + "\n")
        self._fh.flush()

    def write_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Write ``summary.json`` with the schema tag added; returns what was written."""
        summary = {"schema": TRAIN_SCHEMA, **summary}
        write_json_atomic(self.out_dir / "summary.json", summary)
        return summary

    def close(self) -> None:
        self._fh.close()
