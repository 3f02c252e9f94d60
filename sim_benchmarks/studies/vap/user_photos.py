"""VAP on users' own objects printed with real photographs, among look-alikes made from the same photo.

    python -m launch.study vap.user_photos --episodes 2 --retrieval-episodes 6 --seed 70000 --out runs/vap_user_photos

A *user object* is one photograph that ships inside an installed package (``envs.manipulation.lookalikes.
stock_photo_paths``) given as ``personal_texture`` on one category's body (``--categories``). Its distractors are
the env's user look-alikes (``user_distractors=lookalikes``: the photo recoloured, recropped, mirrored or turned, and
another photo, all on the same body; ``--user-distractors library`` gives the old library objects instead).

Two parts, each on the same scenes for every matcher variant (paired):

* **retrieval** — candidate-set top-1 as in ``vap.instance_retrieval``: VAP's detector candidates on the first frame,
  labelled by instance (segmentation majority, privileged), ranked by the matcher against the reference renders;
  ``--retrieval-episodes`` episodes per task per user object.
* **episodes** — full ``vap`` episodes on the frozen generic base through ``run_evaluation`` (``--episodes`` per
  task per user object and variant): first-step grounding, correct object and success.

Variants: ``default`` (the MobileNetV2 embedding cue, ``vap_matcher_embedder=mobilenet_v2``), ``instance``
(``vap_matcher_embedder=instance``) and ``blend`` (``vap_matcher_embedder=blend``, VAP's default). Writes
``user_photos.json`` + ``README.md`` (and the evaluation folders under ``episodes/``).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from envs.manipulation.env import USER_DISTRACTORS
from envs.manipulation.lookalikes import stock_photo_paths
from envs.manipulation.objects import CATEGORIES
from envs.statistics import wilson_ci
from sim_benchmarks import registry
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.studies.aux.results import paired_diff_ci
from sim_benchmarks.studies.vap.instance_retrieval import candidate_sets, score_sets, summarise
from sim_benchmarks.studies.vap.vap_benchmark import SUITE

# matcher variant -> (retrieval matcher name, vap policy options)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "default": ("default", {"vap_matcher_embedder": "mobilenet_v2"}),
    "instance": ("instance", {"vap_matcher_embedder": "instance"}),
    "blend": ("blend", {"vap_matcher_embedder": "blend"}),
}
# Bodies whose side shows a print well; a bowl's low wall shows little of it.
DEFAULT_CATEGORIES = ("mug", "can", "bottle", "box")
METRICS = ("grounding_correct", "correct_object", "success")


def user_objects(categories: Sequence[str]) -> list[dict[str, str]]:
    """Every (stock photograph, category) pair as env options plus a short name."""
    photos = stock_photo_paths()
    if not photos:
        raise ConfigError("no stock photographs found (matplotlib's sample_data is missing)")
    return [{"name": f"{p.stem.split('_')[0].lower()}_{c}", "personal_texture": str(p), "personal_category": c}
            for p in photos for c in categories]


def retrieval_part(objects: list[dict[str, str]], episodes: int, seed: int, tasks: Sequence[str],
                   user_distractors: str) -> dict[str, Any]:
    """Candidate-set top-1 of each variant's matcher over every user object's scenes."""

    def sets():
        for obj in objects:
            env_options = {"personal_texture": obj["personal_texture"], "personal_category": obj["personal_category"],
                           "user_distractors": user_distractors}
            yield from candidate_sets(SUITE, tasks, episodes, seed, env_options)

    hits, rows = score_sets(sets(), [m for m, _ in VARIANTS.values()])
    if not rows:
        raise ConfigError("no candidate set had the user object among two or more candidates")
    return {"sets": len(rows), "skipped": episodes * len(tasks) * len(objects) - len(rows),
            **summarise(hits, rows, tasks), "rows": rows}


def episodes_part(objects: list[dict[str, str]], episodes: int, seed: int, tasks: Sequence[str],
                  user_distractors: str, out: Path) -> dict[str, Any]:
    """Full VAP episodes (generic base) per user object and variant; pooled rates with Wilson CIs, paired diffs."""
    from sim_benchmarks.evaluation import EvalConfig, run_evaluation

    records: dict[str, dict[tuple[str, str, int], dict[str, Any]]] = {v: {} for v in VARIANTS}
    every = list(registry.suites()[SUITE].tasks)
    # One evaluation per object and variant over all tasks, or one per task when only some were asked for.
    runs = {"all": SUITE} if sorted(tasks) == sorted(every) else {t: f"{SUITE}/{t}" for t in tasks}
    for obj in objects:
        env_options = {"personal_texture": obj["personal_texture"], "personal_category": obj["personal_category"],
                       "user_distractors": user_distractors}
        for variant, (_, policy_options) in VARIANTS.items():
            folder = out / "episodes" / obj["name"] / variant
            for part, env in runs.items():
                cfg = EvalConfig(env=env, policies=["vap"], episodes=episodes, seed=seed, workers=1,
                                 out=folder / part, resume=(folder / part / "episodes.jsonl").exists(),
                                 env_options=env_options, policy_options=policy_options)
                _, where = run_evaluation(cfg)
                for line in (where / "episodes.jsonl").read_text().splitlines():
                    r = json.loads(line)
                    records[variant][(obj["name"], r["task"], int(r["episode"]))] = r
        row = {v: sum(r["correct_object"] for k, r in records[v].items() if k[0] == obj["name"]) for v in VARIANTS}
        print(f"  {obj['name']}: correct-object {row}", file=sys.stderr, flush=True)
    keys = sorted(set.intersection(*(set(r) for r in records.values())))
    result: dict[str, Any] = {"episodes": len(keys), "variants": {}, "paired": {}, "per_object": {}}
    for variant, recs in records.items():
        result["variants"][variant] = {}
        for metric in METRICS:
            k = sum(bool(recs[key].get(metric)) for key in keys)
            result["variants"][variant][metric] = {"k": k, "n": len(keys), "rate": k / max(len(keys), 1),
                                                   "ci95": list(wilson_ci(k, len(keys)))}
    first = next(iter(VARIANTS))
    for variant in list(VARIANTS)[1:]:
        for metric in METRICS:
            m, lo, hi = paired_diff_ci([int(bool(records[variant][k].get(metric))) for k in keys],
                                       [int(bool(records[first][k].get(metric))) for k in keys])
            result["paired"][f"{variant} - {first} {metric}"] = {"diff": m, "ci95": [lo, hi]}
    for obj in objects:
        mine = [k for k in keys if k[0] == obj["name"]]
        result["per_object"][obj["name"]] = {
            v: {metric: sum(bool(records[v][k].get(metric)) for k in mine) for metric in METRICS} | {"n": len(mine)}
            for v in VARIANTS}
    return result


def miss_kinds(rows: list[dict[str, Any]], matcher: str) -> dict[str, int]:
    """How often each kind of look-alike (``recoloured``, ``other_photo``, …; ``library`` for a library object,
    ``no single object`` for a candidate without a majority instance) was chosen instead of the user's object."""
    counts: dict[str, int] = {}
    for r in rows:
        if r[matcher]:
            continue
        chosen = r.get(f"{matcher}_chosen")
        if chosen is None:
            kind = "no single object"
        elif chosen.startswith(r["target"] + "-"):
            kind = chosen[len(r["target"]) + 1:].rstrip("0123456789")
        else:
            kind = "library"
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _pct(k: int, n: int) -> str:
    lo, hi = wilson_ci(k, n)
    return f"{100 * k / max(n, 1):.1f} % ({k}/{n}; CI {100 * lo:.1f}–{100 * hi:.1f})"


def markdown(r: dict[str, Any]) -> str:
    """Both parts as markdown tables."""
    lines = [f"User objects: {len(r['objects'])} ({len(r['photos'])} photographs × categories "
             f"{', '.join(r['categories'])}), distractors `{r['user_distractors']}`, seed {r['seed']}", ""]
    if r.get("retrieval"):
        ret = r["retrieval"]
        lines += [f"Candidate-set retrieval: {ret['sets']} sets ({r['retrieval_episodes']} episodes per task per "
                  f"object; {ret['skipped']} skipped: < 2 candidates or the object not proposed)", "",
                  "| matcher | top-1 (Wilson 95 % CI) |", "| --- | --- |"]
        for name, m in ret["matchers"].items():
            lines.append(f"| {name} | {_pct(m['hits'], ret['sets'])} |")
        for name, d in ret["paired"].items():
            lines += ["", f"Paired {name}: {100 * d['diff']:+.1f} points (95 % CI {100 * d['ci95'][0]:+.1f} to "
                      f"{100 * d['ci95'][1]:+.1f})"]
        for name in ret["matchers"]:
            misses = miss_kinds(ret["rows"], name)
            lines += ["", f"{name} misses by the candidate it chose: "
                      + (", ".join(f"{k} {n}" for k, n in misses.items()) or "none")]
        lines.append("")
    if r.get("episodes"):
        ep = r["episodes"]
        lines += [f"VAP episodes (generic base): {ep['episodes']} per variant ({r['eval_episodes']} per task per "
                  "object)", "", "| VAP matcher | first-step grounding | correct object | success |",
                  "| --- | --- | --- | --- |"]
        for name, v in ep["variants"].items():
            lines.append(f"| {name} | " + " | ".join(_pct(v[m]["k"], v[m]["n"]) for m in METRICS) + " |")
        lines.append("")
        for name, d in ep["paired"].items():
            lines.append(f"- paired {name}: {100 * d['diff']:+.1f} points (95 % CI {100 * d['ci95'][0]:+.1f} to "
                         f"{100 * d['ci95'][1]:+.1f})")
    return "\n".join(lines)


@main_guard
def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="vap.user_photos", description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=2,
                        help="VAP episodes per task per user object and variant (0: retrieval only)")
    parser.add_argument("--retrieval-episodes", type=int, default=6,
                        help="retrieval scenes per task per user object (0: episodes only)")
    parser.add_argument("--seed", type=int, default=70000)
    parser.add_argument("--categories", default=",".join(DEFAULT_CATEGORIES),
                        help=f"comma-separated bodies for the photos: {', '.join(CATEGORIES)}")
    parser.add_argument("--user-distractors", default="lookalikes", help=f"one of {', '.join(USER_DISTRACTORS)}")
    parser.add_argument("--tasks", default="", help="comma-separated personalized_simpler tasks (default: all)")
    parser.add_argument("--out", writes="folder", type=Path, default=Path("runs/vap_user_photos"))
    args = parser.parse_args(argv)
    for flag, value in (("--episodes", args.episodes), ("--retrieval-episodes", args.retrieval_episodes)):
        if value < 0:
            raise ConfigError(f"{flag} must be a non-negative integer, got {value}")
    if args.episodes == 0 and args.retrieval_episodes == 0:
        raise ConfigError("--episodes and --retrieval-episodes are both 0: nothing to run")
    categories = [c for c in args.categories.split(",") if c]
    for c in categories or [""]:
        if c not in CATEGORIES:
            raise choice_error("category", c, CATEGORIES)
    if args.user_distractors not in USER_DISTRACTORS:
        raise choice_error("user_distractors", args.user_distractors, USER_DISTRACTORS)
    registry.load_all()
    tasks = [t for t in args.tasks.split(",") if t] or list(registry.suites()[SUITE].tasks)
    for t in tasks:
        if t not in registry.suites()[SUITE].tasks:
            raise choice_error(f"task of {SUITE}", t, list(registry.suites()[SUITE].tasks))
    out = check_out_dir(args.out)
    objects = user_objects(categories)
    start = time.perf_counter()
    result: dict[str, Any] = {
        "schema": "embodia.vap_user_photos/1",
        "command": "python -m launch.study vap.user_photos " + shlex.join(sys.argv[1:] if argv is None else argv),
        "seed": args.seed, "categories": categories, "photos": [str(p) for p in stock_photo_paths()],
        "objects": [o["name"] for o in objects], "user_distractors": args.user_distractors, "tasks": tasks,
        "retrieval_episodes": args.retrieval_episodes, "eval_episodes": args.episodes,
        "variants": {k: v[1] for k, v in VARIANTS.items()}}
    if args.retrieval_episodes:
        result["retrieval"] = retrieval_part(objects, args.retrieval_episodes, args.seed, tasks,
                                             args.user_distractors)
    if args.episodes:
        result["episodes"] = episodes_part(objects, args.episodes, args.seed, tasks, args.user_distractors, out)
    result["wall_s"] = round(time.perf_counter() - start, 1)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "user_photos.json", result)
    table = markdown(result)
    (out / "README.md").write_text(f"`{result['command']}`\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
