"""Accuracy vs visual-token budget on the test split: vimrag vs linear_rag vs uniform_budget (vs oracle_evidence).

``python -m sim_benchmarks.studies.vimrag.budget --budgets 16,32,64,128 --seeds 0,1,2 --out DIR`` runs every test
question once per (memory mode, budget) and per seed, through the agent's node functions (the same functions the
LangGraph graph calls), and writes ``DIR/results.json``, ``DIR/table.md`` and ``DIR/budget.png``. Seed s is the
trained pair that every policy shares: reader seed s and the GGPO planner of seed s trained with that reader (seed 0
is the default stack). Accuracies carry Wilson 95 % intervals per seed; vimrag minus each baseline is a paired
bootstrap interval over questions, per seed and for the mean over seeds.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from envs.errors import ConfigError
from sim_benchmarks.cli import ArgumentParser, main_guard, parse_seeds

MODES = {"vimrag": "graph", "linear_rag": "linear", "uniform_budget": "uniform", "oracle_evidence": "oracle"}


def parse_ints(text: str, what: str) -> list[int]:
    """``"16,32,64"`` → [16, 32, 64]; every value must be a positive integer."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{what} must be comma-separated positive integers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise ConfigError(f"{what} must be comma-separated positive integers, got {text!r}")
    return values


def run_budget_study(budgets: list[int], split: str = "test", limit: int | None = None, corpus_seed: int = 0,
                     seed: int = 0, credit: str = "ggpo") -> dict:
    """Per (policy, budget), with reader and planner of ``seed``: per-question correctness, mean visual/text
    tokens, steps, latency."""
    from agents.vimrag.agent import VimragAgent
    from agents.vimrag.stack import load_stack, trained_planner

    stack = load_stack(corpus_seed, reader_seed=seed)
    planner = trained_planner(stack, credit, seed)
    questions = stack.kb.corpus.split(split)[:limit]
    gold = {q.qid: q for q in questions}
    out: dict = {"questions": len(questions), "split": split, "budgets": budgets, "rows": {}}
    for name, mode in MODES.items():
        for budget in budgets:
            agent = VimragAgent(stack.tools, stack.reader, planner, mode=mode, budget=budget, gold=gold)
            correct, vis, txt, steps, lat = [], [], [], [], []
            by_type: dict[str, list[int]] = {}
            for q in questions:
                t0 = time.perf_counter()
                s = agent.rollout(q.qid, q.text)
                lat.append(time.perf_counter() - t0)
                ok = int(s["answer"] == q.answer)
                correct.append(ok)
                by_type.setdefault(q.qtype, []).append(ok)
                vis.append(s["visual_tokens"])
                txt.append(s["text_tokens"])
                steps.append(s["step"] + 1)
            out["rows"][f"{name}@{budget}"] = {
                "policy": name, "budget": budget, "correct": correct,
                "per_type": {t: float(np.mean(v)) for t, v in sorted(by_type.items())},
                "visual_tokens": float(np.mean(vis)), "text_tokens": float(np.mean(txt)),
                "steps": float(np.mean(steps)), "latency_median_s": float(np.median(lat))}
            print(f"seed {seed} {name:16s} budget {budget:4d}: accuracy {np.mean(correct):.3f}  visual tokens "
                  f"{np.mean(vis):.1f}  median {np.median(lat) * 1000:.1f} ms", flush=True)
    return out


def run_seeds(budgets: list[int], seeds: list[int], split: str = "test", limit: int | None = None) -> dict:
    """:func:`run_budget_study` for every seed: ``{"questions", "split", "budgets", "seeds", "runs": {seed: rows}}``."""
    runs = {str(s): run_budget_study(budgets, split, limit, seed=s) for s in seeds}
    first = runs[str(seeds[0])]
    return {"questions": first["questions"], "split": split, "budgets": budgets, "seeds": seeds,
            "runs": {k: r["rows"] for k, r in runs.items()}}


def _accuracies(result: dict, name: str, budget: int) -> np.ndarray:
    """Per seed, the 0/1 correctness of every question (seeds x questions)."""
    return np.array([result["runs"][str(s)][f"{name}@{budget}"]["correct"] for s in result["seeds"]], float)


def table(result: dict) -> str:
    """Markdown: accuracy per policy and budget (one seed: [Wilson 95 % CI]; several: mean (min–max over seeds)),
    then vimrag minus each baseline, paired bootstrap over questions, per seed and for the mean over seeds."""
    from envs.statistics import wilson_ci
    from sim_benchmarks.studies.aux.results import bootstrap_ci

    budgets, seeds = result["budgets"], result["seeds"]
    lines = ["| policy | " + " | ".join(f"budget {b}" for b in budgets) + " |",
             "|---|" + "---|" * len(budgets)]
    for name in MODES:
        cells = []
        for b in budgets:
            acc = _accuracies(result, name, b)
            if len(seeds) == 1:
                lo, hi = wilson_ci(int(acc.sum()), acc.size)
                cells.append(f"{100 * acc.mean():.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
            else:
                per = 100 * acc.mean(1)
                cells.append(f"{per.mean():.1f} ({per.min():.1f}–{per.max():.1f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for base in ("linear_rag", "uniform_budget"):
        groups = [(f"seed {s}", [i]) for i, s in enumerate(seeds)] if len(seeds) > 1 else []
        groups.append((f"mean of {len(seeds)} seeds" if len(seeds) > 1 else "", list(range(len(seeds)))))
        for label, idx in groups:
            cells = []
            for b in budgets:
                d = (_accuracies(result, "vimrag", b) - _accuracies(result, base, b))[idx].mean(0)
                m, lo, hi = bootstrap_ci(d)
                cells.append(f"{100 * m:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
            lines.append(f"| vimrag − {base}{', ' + label if label else ''} (points) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """Accuracy vs budget, one line per policy; error bars: Wilson intervals (one seed) or the range over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from envs.statistics import wilson_ci

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name in MODES:
        acc, err = [], [[], []]
        for b in result["budgets"]:
            a = _accuracies(result, name, b)
            mean = a.mean()
            lo, hi = wilson_ci(int(a.sum()), a.size) if len(a) == 1 else (a.mean(1).min(), a.mean(1).max())
            acc.append(mean)
            err[0].append(mean - lo)
            err[1].append(hi - mean)
        ax.errorbar(result["budgets"], acc, yerr=err, marker="o", capsize=3, label=name,
                    linestyle="--" if name == "oracle_evidence" else "-")
    ax.set_xscale("log", base=2)
    ax.set_xticks(result["budgets"], [str(b) for b in result["budgets"]])
    ax.set_xlabel("visual-token budget per question")
    seeds = result["seeds"]
    ax.set_ylabel(f"exact match ({result['split']}, n={result['questions']})")
    if len(seeds) > 1:
        ax.set_title(f"mean of reader/planner seeds {','.join(map(str, seeds))}; bars: range", fontsize=8)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = ArgumentParser(prog="python -m sim_benchmarks.studies.vimrag.budget", description=__doc__.split("\n")[0])
    ap.add_argument("--budgets", default="16,32,64,128")
    ap.add_argument("--split", default="test", choices=["dev", "test"])
    ap.add_argument("--limit", type=int, default=None, help="first N questions only")
    ap.add_argument("--seeds", default="0", help="reader/planner seeds, e.g. 0,1,2 (0 = the default stack)")
    ap.add_argument("--out", writes="folder", type=Path, required=True)
    args = ap.parse_args(argv)
    budgets = parse_ints(args.budgets, "--budgets")
    seeds = parse_seeds(args.seeds)
    if args.limit is not None and args.limit <= 0:
        raise ConfigError(f"--limit must be a positive integer, got {args.limit}")
    import torch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    result = run_seeds(budgets, seeds, args.split, args.limit)
    result["wall_s"] = time.perf_counter() - t0
    result["command"] = "python -m sim_benchmarks.studies.vimrag.budget " + " ".join(argv or sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result))
    md = table(result)
    (args.out / "table.md").write_text(md + "\n")
    plot(result, args.out / "budget.png")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
