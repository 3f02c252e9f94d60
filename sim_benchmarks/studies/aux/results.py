"""What every aux experiment writes: ``results.json`` with per-seed numbers, the pass metric, its 95 % CI, a verdict."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import write_json_atomic
from envs.statistics import bootstrap_ci, mean_ci, paired_diff_ci  # noqa: F401  (the studies' CIs)

SCHEMA = "embodia.aux/2"  # /2: ``verdict`` is a word of VERDICTS; the line moved to ``summary``


VERDICTS = ("yes", "partly", "no", "inconclusive")


@dataclass
class Headroom:
    """How far the baseline is from the best score the task allows (an oracle, an upper bound, no compression).

    A verdict is only informative when ``gap`` (in the pass metric's units) is larger than the margin: a method
    cannot beat a baseline that already sits at the task's ceiling.
    """

    best: float  # best achievable score on the task
    baseline: float  # the baseline's score on the same scale
    what: str  # what ``best`` is, e.g. "no eviction" or "oracle forecast (the unpredictable part alone)"
    higher_is_better: bool = True

    @property
    def gap(self) -> float:
        """The baseline's distance to the best score (>= 0 when the best really is best)."""
        return self.best - self.baseline if self.higher_is_better else self.baseline - self.best


@dataclass
class StudyResult:
    """One method's experiment outcome, with a verdict in the shared vocabulary.

    ``verdict`` is one of :data:`VERDICTS`: ``yes`` (every part of the claim shown beyond its margin), ``partly``
    (``parts`` says which parts are ``yes``), ``no`` (the CI lies below the margin) or ``inconclusive`` (a CI spans
    the margin, or the task has less headroom than the margin). ``summary`` is one line with the figures.
    ``passed`` mirrors ``verdict == "yes"`` (None when inconclusive). A module that sets only ``passed`` gets
    ``yes``/``no``/``inconclusive`` from it.
    """

    method: str
    claim: str
    metric: str  # what ``value`` and ``ci95`` measure, e.g. "3-key accuracy, ManifoldKV - KeyDiff (points)"
    value: float
    ci95: tuple[float, float]
    passed: bool | None
    summary: str  # one line with the figures behind the verdict
    synthetic: bool  # True when any data in the experiment is generated rather than real
    data: str  # what the data is and what stands in for what
    seeds: list[int]
    per_seed: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)  # every other pass criterion, by name
    wall_s: float = 0.0
    verdict: str = ""  # one of VERDICTS; derived from ``passed`` when left empty
    parts: dict[str, str] = field(default_factory=dict)  # part of the claim -> its own verdict
    margin: float | None = None  # smallest difference that counts, in the pass metric's units
    margin_why: str = ""  # where the margin comes from (the paper, or 2 standard errors of the baseline)
    headroom: Headroom | None = None

    def __post_init__(self) -> None:
        if not self.verdict:
            self.verdict = {True: "yes", False: "no", None: "inconclusive"}[self.passed]
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        if self.verdict == "partly" and not any(v == "yes" for v in self.parts.values()):
            raise ValueError("a 'partly' verdict must name the parts that are 'yes' in parts")
        self.passed = {"yes": True, "no": False}.get(self.verdict) if self.verdict != "partly" else False

    def to_json(self) -> dict[str, Any]:
        """The ``results.json`` payload."""
        out = asdict(self)
        out["ci95"] = [float(self.ci95[0]), float(self.ci95[1])]
        if self.headroom is not None:
            out["headroom"]["gap"] = self.headroom.gap
        return {"schema": SCHEMA, **out}

    def write(self, out_dir: Path) -> Path:
        """Write ``out_dir/results.json`` atomically and return its path."""
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "results.json"
        write_json_atomic(path, self.to_json())
        return path


def judge(lo: float, hi: float, margin: float, kind: str = "superiority") -> str:
    """One part's verdict from its 95 % CI [lo, hi] and a margin.

    ``superiority`` (the method beats the baseline by more than ``margin``): ``yes`` if lo > margin, ``no`` if
    hi < margin, else ``inconclusive``. ``non_inferiority`` (not worse by more than ``margin``): ``yes`` if
    lo > -margin, ``no`` if hi < -margin. ``equivalence`` (within +-margin): ``yes`` if the CI lies inside
    (-margin, margin), ``no`` if it lies wholly outside, else ``inconclusive``.
    """
    if kind == "superiority":
        return "yes" if lo > margin else "no" if hi < margin else "inconclusive"
    if kind == "non_inferiority":
        return "yes" if lo > -margin else "no" if hi < -margin else "inconclusive"
    if kind == "equivalence":
        if -margin < lo and hi < margin:
            return "yes"
        return "no" if lo >= margin or hi <= -margin else "inconclusive"
    raise ValueError(f"kind {kind!r} is not one of superiority, non_inferiority, equivalence")


def combine(parts: dict[str, str]) -> str:
    """The claim's verdict from its parts: all ``yes`` -> yes; some ``yes`` -> partly; else inconclusive or no."""
    words = list(parts.values())
    if words and all(w == "yes" for w in words):
        return "yes"
    if any(w == "yes" for w in words):
        return "partly"
    return "inconclusive" if any(w == "inconclusive" for w in words) else "no"


def noise_margin(baseline_per_seed: Any) -> float:
    """Two standard errors of the baseline's score over seeds: the smallest difference this experiment can see."""
    x = np.asarray(baseline_per_seed, dtype=float).ravel()
    return float(2 * x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else 0.0


def ceiling_guard(verdict: str, headroom: Headroom, margin: float) -> str:
    """``inconclusive`` when the baseline is closer to the task's best score than the margin (a ceiling is not a
    verdict), else ``verdict`` unchanged."""
    return "inconclusive" if headroom.gap < margin else verdict
