"""Builds ``summary.json`` (schema ``embodia.summary/1``, see docs/architecture.md) from the episode records."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from envs.statistics import wilson_ci
from sim_benchmarks.store import RECORD_KEYS

SUMMARY_SCHEMA = "embodia.summary/1"
_NOT_METRICS = set(RECORD_KEYS) | {"video", "policy_seed", "env_seed"}


def _rates(records: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(records)
    wins = sum(bool(r["success"]) for r in records)
    lo, hi = wilson_ci(wins, n)
    return {
        "episodes": n,
        "success_rate": wins / n if n else 0.0,
        "success_ci95": [lo, hi],
        "correct_object_rate": sum(bool(r["correct_object"]) for r in records) / n if n else 0.0,
        "wrong_object_rate": sum(bool(r["wrong_object"]) for r in records) / n if n else 0.0,
    }


def _extra_means(records: list[dict[str, Any]]) -> dict[str, float]:
    # Means of every other numeric (or boolean) metric the suite or policy reported, e.g. regret, grounding.
    values: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for k, v in r.items():
            if k in _NOT_METRICS or v is None or isinstance(v, str):
                continue
            if isinstance(v, (bool, int, float, np.floating, np.integer)):
                values[k].append(float(v))
    return {k: float(np.mean(v)) for k, v in sorted(values.items())}


def build_summary(benchmark: str, records: list[dict[str, Any]], config: dict[str, Any], wall_s: float
                  ) -> dict[str, Any]:
    """Aggregate records per policy and per task; identical records give an identical summary."""
    by_policy: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_policy[r["policy"]].append(r)
    policies: dict[str, Any] = {}
    for name in config.get("policies", sorted(by_policy)):
        recs = by_policy.get(name, [])
        entry = _rates(recs)
        per_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in recs:
            per_task[r["task"]].append(r)
        entry["per_task"] = {t: {**_rates(v), "metrics": _extra_means(v)} for t, v in sorted(per_task.items())}
        entry["metrics"] = _extra_means(recs)
        policies[name] = entry
    return {"schema": SUMMARY_SCHEMA, "benchmark": benchmark, "policies": policies, "config": config,
            "wall_s": float(wall_s)}
