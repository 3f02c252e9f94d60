"""Candidate-set retrieval: does the matcher rank the personal object first among its same-category candidates?

    python -m launch.study vap.instance_retrieval --episodes 110 --seed 50000 --out runs/instance_retrieval
    python -m launch.study vap.instance_retrieval --matchers default,instance --out runs/instance_retrieval

For each seeded ``personalized_simpler`` episode (held-out **test-split** designs) the first frame goes through VAP's
own proposal detector (the candidates VAP would score, at its default candidate count) and the episode's reference
images are set on the matcher. A *candidate set* is kept when it has two or more candidates and one of them is the
personal object (majority body id of the mask in the simulator segmentation: privileged, used only to label).
Top-1 = the matcher's probability is highest on that candidate. Every matcher variant sees the very same sets, so
their difference is paired (per set, hit minus hit; t interval over sets). Writes ``retrieval.json`` + ``README.md``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from envs.statistics import wilson_ci
from sim_benchmarks import registry
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.studies.aux.results import paired_diff_ci
from sim_benchmarks.studies.vap.vap_benchmark import SUITE, make_vap

# ``default``: the matcher with the MobileNetV2 embedding cue (VAP's default until the blend replaced it); the same
# with the trained instance embedder as embedding cue; and the embedding cue alone of each
# ``*_refit``: the logistic weights refitted on generic_simpler train-split scenes (never the test sets) for that
# embedding cue; ``*_refit_personal``: refitted on personalized_simpler scenes of train-split designs instead.
# ``blend``: the embedding cue is the mean of the trained head's and MobileNetV2's cosines (VAP's default).
MATCHERS = ("default", "instance", "blend", "mobilenet_cue_only", "instance_cue_only", "default_refit",
            "instance_refit", "default_refit_personal", "instance_refit_personal")
REFIT_TASKS = ("fractal_pick", "fractal_move_near", "bridge_pick", "bridge_put_on")
REFIT_SEED = 60000  # train-split scenes the embedder's training (seeds 0-79 on train_extended) did not render


@dataclass
class CandidateSet:
    """One episode's first frame, VAP's candidates on it, each candidate's instance id (None: no single object)."""

    seed: int
    task: str
    image: np.ndarray
    masks: list[np.ndarray]
    instance_ids: list[str | None]
    target: str
    references: list[np.ndarray]

    @property
    def label(self) -> np.ndarray:
        """1.0 where the candidate is the personal object."""
        return np.array([i == self.target for i in self.instance_ids], float)


def candidate_sets(suite: str, tasks: Sequence[str], episodes: int, seed: int,
                   env_options: dict[str, Any] | None = None, keep_all: bool = False) -> Iterator[CandidateSet]:
    """VAP's detector candidates on the first frame of ``episodes`` seeded episodes per task, labelled by instance.

    ``keep_all`` also yields sets with one candidate or without the personal object (training data wants every
    labelled crop; the benchmark does not). Instance ids come from the segmentation's majority body id.
    """
    from policies.vap.modeling import _majority_id

    for task in tasks:
        env = registry.suites()[suite].make_env(task, {"privileged": True, "references": True,
                                                       **(env_options or {})})
        policy = make_vap(env, task, {"vap_base": "scripted_expert"})
        try:
            for i in range(episodes):
                obs, info = env.reset(seed=seed + i)
                policy.matcher.set_references(info["reference_images"])  # the detector's colour pre-filter uses them
                cands = policy.detector.detect(obs["image"], info["category"], depth=obs["depth"],
                                               segmentation=obs["segmentation"])
                cands = cands[: policy.config.max_candidates]
                state = env.unwrapped.privileged_state()
                by_body = {o["body"]: o["instance_id"] for o in state["objects"]}
                target = by_body[env.unwrapped.personal_body_id]
                ids = [by_body.get(_majority_id(obs["segmentation"], c.mask)) for c in cands]
                if keep_all or (len(cands) >= 2 and target in ids):
                    yield CandidateSet(seed + i, task, np.asarray(obs["image"]), [c.mask for c in cands], ids,
                                       target, [np.asarray(r) for r in info["reference_images"]])
        finally:
            env.close()


def make_matcher(name: str, instance_checkpoint: Path | None = None) -> Any:
    """A fresh matcher variant (``MATCHERS``): ``default`` (MobileNetV2 embedding cue), ``instance`` (the trained
    embedder as embedding cue, from ``instance_checkpoint`` or the shipped ``checkpoints/instance_embedder``),
    ``blend`` (both cosines averaged), and the cue-only / refitted variants."""
    from perception.embedders import InstanceEmbedder, make_embedder
    from perception.matching import InstanceMatcher, MatcherConfig

    if name not in MATCHERS:
        raise choice_error("matcher", name, MATCHERS)
    config = MatcherConfig(components=("embedding",)) if name.endswith("_cue_only") else MatcherConfig()
    trained = name.startswith("instance") or name == "blend"
    embedder = InstanceEmbedder(instance_checkpoint, blend=name == "blend") if trained else make_embedder(None)
    matcher = InstanceMatcher(config, embedder=embedder)
    if name.endswith("_refit"):
        return refit(matcher)
    if name.endswith("_refit_personal"):
        return refit(matcher, suite=SUITE, tasks=tuple(registry.suites()[SUITE].tasks))
    return matcher


def refit(matcher: Any, episodes: int = 30, seed: int = REFIT_SEED, suite: str = "generic_simpler",
          tasks: tuple[str, ...] = REFIT_TASKS) -> Any:
    """``matcher`` with its logistic weights fitted on **train-split** scenes of ``suite`` (VAP's candidates,
    labelled by instance), as ``vap_benchmark calibrate`` does for the default cues. The train-split instances were
    also in the embedder's training data, so its cue looks stronger there than on new designs: a caveat, not a leak."""
    from perception.matching import InstanceMatcher, overlap_matrix

    cue_rows, labels, overlaps = [], [], []
    for cs in candidate_sets(suite, tasks, episodes, seed, {"split": "train"}):
        matcher.set_references(cs.references)
        cue_rows.append(matcher.cues(matcher.views(cs.image, cs.masks)))
        labels.append(cs.label)
        overlaps.append(overlap_matrix(cs.masks))
    fitted = matcher.fit_calibration(cue_rows, labels, steps=3000, lr=0.5, overlaps=overlaps)
    print(f"  refitted on {len(labels)} train-split sets: abs {fitted.weights_abs} rel {fitted.weights_rel} "
          f"bias {fitted.bias:.2f}", file=sys.stderr, flush=True)
    return InstanceMatcher(fitted, embedder=matcher.embedder)


def score_sets(sets: Iterator[CandidateSet], matchers: Sequence[str], instance_checkpoint: Path | None = None,
               ) -> tuple[dict[str, list[int]], list[dict]]:
    """Top-1 hit (1/0) of each matcher variant on every set; the same sets for all variants (paired)."""
    from perception.candidate import Candidate, box_of_mask

    variants = {m: make_matcher(m, instance_checkpoint) for m in matchers}
    hits: dict[str, list[int]] = {m: [] for m in matchers}
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for cs in sets:
        y = cs.label
        row: dict[str, Any] = {"seed": cs.seed, "task": cs.task, "candidates": len(cs.masks), "target": cs.target}
        cands = [Candidate(box=box_of_mask(m), mask=m, score=1.0) for m in cs.masks]
        for name, matcher in variants.items():
            matcher.set_references(cs.references)
            probs = matcher.score(cs.image, cands)
            best = int(np.argmax(probs))
            hit = int(y[best] > 0)
            hits[name].append(hit)
            row[name] = hit
            row[f"{name}_chosen"] = cs.instance_ids[best]  # which look-alike won when it missed
        rows.append(row)
        if len(rows) % 50 == 0:
            print(f"  {len(rows)} sets, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return hits, rows


def summarise(hits: dict[str, list[int]], rows: list[dict[str, Any]], tasks: Sequence[str]) -> dict[str, Any]:
    """Per-matcher top-1 with Wilson CIs (overall and per task) and paired differences against the first matcher."""
    names = list(hits)
    n = len(rows)
    out: dict[str, Any] = {"matchers": {}, "paired": {}}
    for name in names:
        k = sum(hits[name])
        out["matchers"][name] = {"top1": k / n, "hits": k, "ci95": list(wilson_ci(k, n)),
                                 "per_task": {t: [sum(r[name] for r in rows if r["task"] == t),
                                                  sum(r["task"] == t for r in rows)] for t in tasks}}
    for name in names[1:]:
        m, lo, hi = paired_diff_ci(hits[name], hits[names[0]])
        out["paired"][f"{name} - {names[0]}"] = {"diff": m, "ci95": [lo, hi]}
    return out


def retrieval(episodes: int, seed: int, matchers: Sequence[str], tasks: Sequence[str] | None = None,
              instance_checkpoint: Path | None = None) -> dict[str, Any]:
    """Top-1 of each matcher over the same candidate sets, with Wilson CIs and paired differences."""
    tasks = list(tasks or registry.suites()[SUITE].tasks)
    t0 = time.perf_counter()
    hits, rows = score_sets(candidate_sets(SUITE, tasks, episodes, seed), matchers, instance_checkpoint)
    n = len(rows)
    if n == 0:
        raise ConfigError("no candidate set had the personal object among two or more candidates")
    out: dict[str, Any] = {"suite": SUITE, "split": "test", "tasks": tasks, "episodes_per_task": episodes,
                           "seed": seed, "sets": n, "instance_checkpoint": str(instance_checkpoint or "shipped"),
                           # episodes whose first frame gave < 2 candidates or missed the personal object
                           "skipped": episodes * len(tasks) - n, **summarise(hits, rows, tasks), "rows": rows}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def markdown(r: dict[str, Any]) -> str:
    """The result as a markdown table."""
    lines = [f"Candidate-set retrieval on `{r['suite']}` (test-split designs), {r['sets']} sets from "
             f"{r['episodes_per_task']} episodes × {len(r['tasks'])} tasks (seeds {r['seed']}…; "
             f"{r['skipped']} episodes had < 2 candidates or missed the personal object)", "",
             "| matcher | top-1 (Wilson 95 % CI) | " + " | ".join(r["tasks"]) + " |",
             "| --- " * (len(r["tasks"]) + 2) + "|"]
    for name, m in r["matchers"].items():
        cells = [f"{k}/{n}" for k, n in m["per_task"].values()]
        lines.append(f"| {name} | {100 * m['top1']:.1f} % ({m['hits']}/{r['sets']}; CI {100 * m['ci95'][0]:.1f}–"
                     f"{100 * m['ci95'][1]:.1f}) | " + " | ".join(cells) + " |")
    for name, d in r["paired"].items():
        lines += ["", f"Paired difference {name}: {100 * d['diff']:+.1f} points (95 % CI {100 * d['ci95'][0]:+.1f} "
                  f"to {100 * d['ci95'][1]:+.1f})"]
    return "\n".join(lines)


@main_guard
def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="vap.instance_retrieval", description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=110, help="episodes per task")
    parser.add_argument("--seed", type=int, default=50000)
    parser.add_argument("--matchers", default="default", help=f"comma-separated, first is the baseline: {MATCHERS}")
    parser.add_argument("--tasks", default="", help="comma-separated personalized_simpler tasks (default: all)")
    parser.add_argument("--instance-checkpoint", type=Path, default=None,
                        help="instance embedder folder for the instance* matchers (default: the shipped one)")
    parser.add_argument("--out", writes="folder", type=Path, default=Path("runs/instance_retrieval"))
    args = parser.parse_args(argv)
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be a positive integer, got {args.episodes}")
    matchers = [m for m in args.matchers.split(",") if m]
    for m in matchers or [""]:
        if m not in MATCHERS:
            raise choice_error("matcher", m, MATCHERS)
    registry.load_all()
    tasks = [t for t in args.tasks.split(",") if t] or None
    for t in tasks or []:
        if t not in registry.suites()[SUITE].tasks:
            raise choice_error(f"task of {SUITE}", t, list(registry.suites()[SUITE].tasks))
    check_out_dir(args.out)
    if args.instance_checkpoint is not None and any(m.startswith("instance") or m == "blend" for m in matchers):
        from perception.instance_embedder import load_head

        load_head(args.instance_checkpoint)  # a bad folder is one line and exit 2 before any scene is rendered
    result = retrieval(args.episodes, args.seed, matchers, tasks, args.instance_checkpoint)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "retrieval.json", result)
    table = markdown(result)
    (args.out / "README.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
