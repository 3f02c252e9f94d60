"""Where the project's own files live: the one place that locates ``checkpoints/`` (independent of the working
directory, so every command finds the shipped weights from anywhere)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "checkpoints"
