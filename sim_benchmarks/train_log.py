"""Writes the training results contract: ``metrics.jsonl`` (append + flush) and ``summary.json``; reads back
append-only JSON-lines logs (this one and ``episodes.jsonl``) the same careful way."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from envs.atomic_io import write_json_atomic, write_text_atomic
from envs.errors import ConfigError

TRAIN_SCHEMA = "embodia.train/1"


def read_jsonl(path: str | Path, required: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The records of an append-only JSON-lines log (none when it does not exist).

    A last line without its newline is a write torn by a killed run and is dropped (the record it held was never
    complete); any other line that is not a JSON object with the ``required`` keys is corruption: ConfigError
    naming ``file:line``.
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    lines.pop()  # b"" after a final newline, else the torn last line
    records = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:  # bad JSON or bad UTF-8
            record = None
        if not isinstance(record, dict) or any(k not in record for k in required):
            raise ConfigError(f"{path}:{number}: corrupt record (expected a JSON object"
                              f"{' with ' + ', '.join(required) if required else ''}) in an append-only log; restore "
                              f"the file or start again in another folder")
        records.append(record)
    return records


def cut_torn_tail(path: str | Path) -> None:
    """Cut a torn last line (no newline: the writer was killed mid-write) so the next append starts a fresh line."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if not size:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        # Scan back for the last newline in blocks; a record is short, so this reads little.
        pos, cut = size, 0
        while pos > 0:
            start = max(0, pos - 65536)
            fh.seek(start)
            block = fh.read(pos - start)
            found = block.rfind(b"\n")
            if found >= 0:
                cut = start + found + 1
                break
            pos = start
        fh.truncate(cut)


class TrainLog:
    """Append-only metrics log for one training run; ``resume=True`` keeps what an earlier run wrote.

    On resume the earlier log is read first (a corrupt line is a ConfigError naming ``file:line``) and a torn last
    line is cut, so a run killed mid-write resumes cleanly.
    """

    def __init__(self, out_dir: str | Path, resume: bool = False) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / "metrics.jsonl"
        if resume:
            read_jsonl(self.path)  # refuse a corrupt log before changing it
            cut_torn_tail(self.path)
        elif self.path.exists():
            self.path.unlink()
        self._fh = open(self.path, "a", encoding="utf-8")

    def records(self) -> list[dict[str, Any]]:
        """Every record written so far (including an earlier run's, when resuming)."""
        self._fh.flush()
        return read_jsonl(self.path)

    def truncate_after(self, step: int) -> None:
        """Drop records past ``step`` (a resumed run restarts from its last checkpoint at ``step``).

        The kept records replace the log atomically, so a kill during the rewrite loses none of them.
        """
        kept = [r for r in self.records() if r.get("step", 0) <= step]
        self._fh.close()
        write_text_atomic(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
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
