"""What every aux experiment writes: ``results.json`` with per-seed numbers, the pass metric, its 95 % CI, a verdict."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from sim_benchmarks.train_log import write_json_atomic

SCHEMA = "embodia.aux/1"


@dataclass
class StudyResult:
    """One method's experiment outcome. ``passed`` is None when the experiment cannot decide (say why in verdict)."""

    method: str
    claim: str
    metric: str  # what ``value`` and ``ci95`` measure, e.g. "3-key accuracy, ManifoldKV - KeyDiff (points)"
    value: float
    ci95: tuple[float, float]
    passed: bool | None
    verdict: str  # one line: "reproduced: ..." / "not reproduced: ..."
    synthetic: bool  # True when any data in the experiment is generated rather than real
    data: str  # what the data is and what stands in for what
    seeds: list[int]
    per_seed: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)  # every other pass criterion, by name
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The ``results.json`` payload."""
        out = asdict(self)
        out["ci95"] = [float(self.ci95[0]), float(self.ci95[1])]
        return {"schema": SCHEMA, **out}

    def write(self, out_dir: Path) -> Path:
        """Write ``out_dir/results.json`` atomically and return its path."""
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "results.json"
        write_json_atomic(path, self.to_json())
        return path


def mean_ci(values: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval over independent runs (seeds); (m, m, m) for a single value."""
    x = np.asarray(values, dtype=float).ravel()
    m = float(x.mean()) if x.size else float("nan")
    if x.size < 2:
        return m, m, m
    half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return m, m - half, m + half


def paired_diff_ci(a: Any, b: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired runs with its t interval (a CI excluding 0 means a consistent difference)."""
    return mean_ci(np.asarray(a, dtype=float) - np.asarray(b, dtype=float), confidence)


def bootstrap_ci(values: Any, reps: int = 2000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap CI over items (questions, sequences) rather than seeds."""
    x = np.asarray(values, dtype=float).ravel()
    rng = np.random.default_rng(seed)
    boots = x[rng.integers(0, x.size, (reps, x.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(x.mean()), float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha))
