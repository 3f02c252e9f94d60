"""Accuracy vs visual-token budget on the test split: vimrag vs linear_rag vs uniform_budget (vs oracle_evidence).

``python -m sim_benchmarks.studies.vimrag.budget --budgets 16,32,64,128 --out DIR`` runs every test question once
per (memory mode, budget) with the default GGPO-trained planner, through the agent's node functions (the same
functions the LangGraph graph calls), and writes ``DIR/results.json``, ``DIR/table.md`` and ``DIR/budget.png``.
Accuracies carry Wilson 95 % intervals; vimrag minus each baseline is a paired bootstrap interval over questions.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from envs.errors import ConfigError
from sim_benchmarks.cli import ArgumentParser, main_guard

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
                     planner_seed: int = 0, credit: str = "ggpo") -> dict:
    """Per (policy, budget): per-question correctness, mean visual/text tokens, steps, latency."""
    from agents.vimrag.agent import VimragAgent
    from agents.vimrag.stack import load_stack, trained_planner

    stack = load_stack(corpus_seed)
    planner = trained_planner(stack, credit, planner_seed)
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
            print(f"{name:16s} budget {budget:4d}: accuracy {np.mean(correct):.3f}  visual tokens "
                  f"{np.mean(vis):.1f}  median {np.median(lat) * 1000:.1f} ms", flush=True)
    return out


def table(result: dict) -> str:
    """Markdown: accuracy [Wilson 95 % CI] per policy and budget, and vimrag minus baselines (paired bootstrap)."""
    from sim_benchmarks.metrics import wilson_ci
    from sim_benchmarks.studies.aux.results import bootstrap_ci

    budgets = result["budgets"]
    lines = ["| policy | " + " | ".join(f"budget {b}" for b in budgets) + " |",
             "|---|" + "---|" * len(budgets)]
    rows = result["rows"]
    for name in MODES:
        cells = []
        for b in budgets:
            c = rows[f"{name}@{b}"]["correct"]
            lo, hi = wilson_ci(sum(c), len(c))
            cells.append(f"{100 * np.mean(c):.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for base in ("linear_rag", "uniform_budget"):
        cells = []
        for b in budgets:
            d = np.subtract(rows[f"vimrag@{b}"]["correct"], rows[f"{base}@{b}"]["correct"])
            m, lo, hi = bootstrap_ci(d)
            cells.append(f"{100 * m:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        lines.append(f"| vimrag − {base} (points) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """Accuracy vs budget, one line per policy, Wilson intervals as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim_benchmarks.metrics import wilson_ci

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name in MODES:
        acc, err = [], [[], []]
        for b in result["budgets"]:
            c = result["rows"][f"{name}@{b}"]["correct"]
            lo, hi = wilson_ci(sum(c), len(c))
            acc.append(np.mean(c))
            err[0].append(np.mean(c) - lo)
            err[1].append(hi - np.mean(c))
        ax.errorbar(result["budgets"], acc, yerr=err, marker="o", capsize=3, label=name,
                    linestyle="--" if name == "oracle_evidence" else "-")
    ax.set_xscale("log", base=2)
    ax.set_xticks(result["budgets"], [str(b) for b in result["budgets"]])
    ax.set_xlabel("visual-token budget per question")
    ax.set_ylabel(f"exact match ({result['split']}, n={result['questions']})")
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
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    budgets = parse_ints(args.budgets, "--budgets")
    if args.limit is not None and args.limit <= 0:
        raise ConfigError(f"--limit must be a positive integer, got {args.limit}")
    import torch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    result = run_budget_study(budgets, args.split, args.limit)
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
