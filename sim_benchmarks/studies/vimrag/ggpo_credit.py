"""GGPO vs trajectory credit where credit assignment matters: many paired seeds, runs scored over their whole curve.

``python -m sim_benchmarks.studies.vimrag.ggpo_credit --seeds 0-29 --out DIR`` trains one planner per (credit,
seed) on the step-cost task (reward = exact match - ``--step-cost`` per step taken before the answer, so redundant
steps cost something and the best plan depends on the question), with a lower learning rate and many small updates.
Seed s gives both credits the same initial weights and the same first batch. Every run is appended to
``DIR/runs.jsonl`` (a split or interrupted study resumes) with its dev curve and, per update, diagnostics of the
batch it sampled: the share of decisions whose advantage differs between the two credits, the share of groups with
mixed rewards, the cosine between the two credits' gradients on that batch, and the cosine between the gradient of
this batch and of the previous one (own credit). ``--report`` (also run after training) scores each run by the area
under its dev-reward curve, the mean of its last evaluations, whether it escaped the plateau and the episodes it
took to reach a fixed dev reward, pairs the runs by seed (bootstrap CIs over seeds), adds a power analysis, and
writes ``DIR/table.md``, ``DIR/summary.json`` and ``DIR/curves.png``. ``--step-cost 0 --std-floor 0`` runs the
original task with the same schedule. The cached default planner (``agents.vimrag.stack.trained_planner``) is not
touched.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from envs.errors import ConfigError
from sim_benchmarks.cli import ArgumentParser, main_guard, parse_seeds

CREDIT_PAIR = ("ggpo", "trajectory")
BOOT_REPS = 4000


def _flat_grad(net, loss) -> np.ndarray:
    import torch

    grads = torch.autograd.grad(loss, [p for p in net.parameters()])
    return torch.cat([g.reshape(-1) for g in grads]).detach().numpy().astype(np.float64)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


class BatchDiagnostics:
    """``train_planner``'s ``on_batch`` hook: how different the two credits are on each sampled batch."""

    def __init__(self, credit: str, entropy: float) -> None:
        self.credit, self.entropy = credit, entropy
        self.rows: list[dict] = []
        self._previous: np.ndarray | None = None

    def __call__(self, net, groups) -> None:
        """Record one batch (gradients by autograd.grad: the network's .grad and the generator are untouched)."""
        from agents.vimrag.ggpo import policy_loss

        grads = {c: _flat_grad(net, policy_loss(net, groups, c, self.entropy)) for c in CREDIT_PAIR}
        adv = {c: np.concatenate([a for g in groups for a in g.advantages(c)]) for c in CREDIT_PAIR}
        row = {"decisions": int(adv["ggpo"].size),
               "differ": float(np.mean(np.abs(adv["ggpo"] - adv["trajectory"]) > 1e-9)),
               "mixed": float(np.mean([len(set(g.rewards)) > 1 for g in groups])),
               "cos_credits": _cos(grads["ggpo"], grads["trajectory"])}
        own = grads[self.credit]
        if self._previous is not None:
            row["cos_successive"] = _cos(own, self._previous)
        self._previous = own
        self.rows.append(row)

    def summary(self) -> dict:
        """Means over the run's updates."""
        out = {k: float(np.mean([r[k] for r in self.rows if k in r])) for k in
               ("differ", "mixed", "cos_credits", "cos_successive", "decisions")}
        out["updates"] = len(self.rows)
        return out


def train_one(credit: str, seed: int, cfg_kw: dict) -> dict:
    """Train one planner on the planner's half of the train runs; returns its dev curve and batch diagnostics."""
    from agents.vimrag.agent import VimragAgent
    from agents.vimrag.ggpo import TrainConfig, train_planner
    from agents.vimrag.stack import load_stack
    from envs.rag.corpus import fitting_half

    stack = load_stack(0)
    corpus = stack.kb.corpus
    agent = VimragAgent(stack.tools, stack.reader, None, mode="graph", read_floor=0)  # as trained_planner trains
    cfg = TrainConfig(credit=credit, seed=seed, **cfg_kw)
    diag = BatchDiagnostics(credit, cfg.entropy)
    t0 = time.perf_counter()
    _, curve = train_planner(agent, fitting_half(corpus.split("train"), "planner"), corpus.split("dev"), cfg,
                             on_batch=diag)
    return {"credit": credit, "seed": seed, "config": {k: v for k, v in asdict(cfg).items() if k != "credit"},
            "curve": curve, "diagnostics": diag.summary(), "train_s": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------------------------- scoring
def run_scores(run: dict, level: float, plateau: float, last: int) -> dict:
    """One run's scores: AUC (mean dev reward over its evaluations after the start), mean of the last ``last``
    evaluations, plateau escape (the last evaluations' mean dev accuracy above ``plateau``: single runs of the
    original task stop at 49-56 % or climb to 68-72 %) and episodes to a dev reward of ``level`` (the first
    evaluation at or above it; None when never reached)."""
    pts = run["curve"][1:]
    r = np.array([p.get("dev_reward", p["dev_accuracy"]) for p in pts])
    acc = np.array([p["dev_accuracy"] for p in pts])
    tail = float(r[-last:].mean())
    reach = next((p["episodes"] for p, v in zip(pts, r, strict=True) if v >= level), None)
    return {"auc": float(r.mean()), "last": tail, "escaped": bool(acc[-last:].mean() > plateau),
            "episodes_to_level": reach,
            "auc_accuracy": float(acc.mean()), "last_accuracy": float(acc[-last:].mean()),
            "last_steps": float(np.mean([p.get("dev_steps", np.nan) for p in pts[-last:]]))}


def paired_bootstrap(diffs: np.ndarray, reps: int = BOOT_REPS, seed: int = 0) -> tuple[float, float, float]:
    """Mean of per-seed differences with a percentile bootstrap CI over seeds."""
    d = np.asarray(diffs, float)
    boots = d[np.random.default_rng(seed).integers(0, d.size, (reps, d.size))].mean(axis=1)
    return float(d.mean()), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def detectable_effect(sd: float, n: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """Smallest true mean paired difference a two-sided paired t test at ``alpha`` detects with ``power``
    (noncentral t, exact for normal differences)."""
    from scipy import optimize, stats

    if n < 2 or sd <= 0:
        return float("nan")
    crit = stats.t.ppf(1 - alpha / 2, n - 1)

    def gap(nc: float) -> float:  # power at noncentrality nc = delta / (sd / sqrt n), minus the target
        # scipy's nct.cdf far in the lower tail can be nan; that tail is negligible there.
        return stats.nct.sf(crit, n - 1, nc) + np.nan_to_num(stats.nct.cdf(-crit, n - 1, nc)) - power

    hi = 4.0
    while gap(hi) < 0 and hi < 1e4:  # few seeds: the critical value is large
        hi *= 2
    return float(optimize.brentq(gap, 0.0, hi)) * sd / math.sqrt(n)


def seeds_needed(sd: float, effect: float, power: float = 0.8, alpha: float = 0.05) -> int:
    """Paired seeds a two-sided t test needs to detect ``effect`` with ``power``."""
    n = 3
    while n < 10_000 and detectable_effect(sd, n, power, alpha) > effect:
        n += 1
    return n


def report(runs: list[dict], out: Path, level: float, plateau: float, last: int, margin: float) -> str:
    """Paired comparison over seeds (see the module docstring); writes table.md, summary.json and curves.png."""
    pick = {c: {r["seed"]: r for r in runs if r["credit"] == c} for c in CREDIT_PAIR}
    seeds = sorted(set(pick["ggpo"]) & set(pick["trajectory"]))
    if not seeds:
        raise ConfigError(f"no seed has runs of both credits in {out / 'runs.jsonl'}")
    scores = {c: [run_scores(pick[c][s], level, plateau, last) for s in seeds] for c in CREDIT_PAIR}
    cfg = pick["ggpo"][seeds[0]]["config"]
    n = len(seeds)
    budget = cfg["episodes"]
    lines = [f"Step cost {cfg['step_cost']}, reward-spread floor {cfg.get('std_floor', 0.0)}, "
             f"{cfg['episodes']} episodes per run "
             f"({cfg['questions_per_batch']} questions x {cfg['group']} rollouts per update), lr {cfg['lr']}, "
             f"dev evaluated every {cfg['eval_every']} episodes; {n} paired seeds ({seeds[0]}-{seeds[-1]}). "
             f"Score = dev reward (exact match - step cost x steps).", "",
             "| credit | AUC (mean dev reward) [95 % CI] | mean of last evals [95 % CI] | plateau escape [Wilson 95 %] "
             f"| reached {level:.2f} | median episodes to {level:.2f} | last dev accuracy | last dev steps |",
             "|---|---|---|---|---|---|---|---|"]
    from envs.statistics import wilson_ci
    from sim_benchmarks.studies.aux.results import bootstrap_ci

    summary: dict = {"seeds": seeds, "config": cfg, "level": level, "plateau": plateau, "last": last,
                     "margin": margin, "credits": {}}
    for c in CREDIT_PAIR:
        sc = scores[c]
        auc = bootstrap_ci([s["auc"] for s in sc], BOOT_REPS)
        tail = bootstrap_ci([s["last"] for s in sc], BOOT_REPS)
        esc = sum(s["escaped"] for s in sc)
        lo, hi = wilson_ci(esc, n)
        reached = [s["episodes_to_level"] for s in sc if s["episodes_to_level"] is not None]
        censored = [s["episodes_to_level"] if s["episodes_to_level"] is not None else math.inf for s in sc]
        med = float(np.median(censored))
        acc = np.mean([s["last_accuracy"] for s in sc])
        steps = np.nanmean([s["last_steps"] for s in sc])
        summary["credits"][c] = {"auc": auc, "last": tail, "escaped": esc, "escape_ci": [lo, hi],
                                 "reached": len(reached), "median_episodes_to_level": med,
                                 "last_accuracy": float(acc), "last_steps": float(steps),
                                 "diagnostics": {k: float(np.mean([pick[c][s]["diagnostics"][k] for s in seeds]))
                                                 for k in ("differ", "mixed", "cos_credits", "cos_successive")}}
        lines.append(f"| {c} | {auc[0]:.3f} [{auc[1]:.3f}, {auc[2]:.3f}] | {tail[0]:.3f} [{tail[1]:.3f}, "
                     f"{tail[2]:.3f}] | {esc}/{n} [{lo:.2f}, {hi:.2f}] | {len(reached)}/{n} | "
                     f"{'never' if math.isinf(med) else f'{med:.0f}'} | {100 * acc:.1f} % | {steps:.2f} |")
    lines += ["", "Paired by seed, GGPO - trajectory (percentile bootstrap over seeds, "
              f"{BOOT_REPS} resamples; power: paired t test, 80 %, two-sided 5 %):", "",
              "| score | mean difference [95 % CI] | SD of differences | smallest detectable (80 %) | verdict |",
              "|---|---|---|---|---|"]
    diffs = {k: np.array([g[k] - t[k] for g, t in zip(scores["ggpo"], scores["trajectory"], strict=True)])
             for k in ("auc", "last", "auc_accuracy", "last_accuracy")}
    # Episodes to the level: a run that never reaches it counts as reaching it one evaluation after the budget.
    cens = {c: np.array([s["episodes_to_level"] if s["episodes_to_level"] is not None else budget + cfg["eval_every"]
                         for s in scores[c]], float) for c in CREDIT_PAIR}
    diffs["episodes_to_level"] = cens["ggpo"] - cens["trajectory"]
    diffs["escaped"] = np.array([float(g["escaped"]) - float(t["escaped"])
                                 for g, t in zip(scores["ggpo"], scores["trajectory"], strict=True)])
    summary["paired"] = {}
    for k, d in diffs.items():
        mean, lo, hi = paired_bootstrap(d)
        sd = float(d.std(ddof=1)) if n > 1 else float("nan")
        mde = detectable_effect(sd, n) if sd > 0 else float("nan")
        tol = margin if k in ("auc", "last") else None
        if lo > 0 or hi < 0:
            verdict = "GGPO better" if (lo > 0) == (k != "episodes_to_level") else "trajectory better"
        elif tol is not None and -tol < lo and hi < tol:
            verdict = f"no difference beyond ±{tol:g} (CI inside the margin)"
        else:
            verdict = "inconclusive"
        summary["paired"][k] = {"mean": mean, "ci": [lo, hi], "sd": sd, "detectable_80": mde, "verdict": verdict}
        lines.append(f"| {k} | {mean:+.4f} [{lo:+.4f}, {hi:+.4f}] | {sd:.4f} | {mde:.4f} | {verdict} |")
    sd_auc = summary["paired"]["auc"]["sd"]
    summary["seeds_needed"] = {str(e): seeds_needed(sd_auc, e) for e in (0.01, 0.02, 0.03, 0.05)} if sd_auc > 0 else {}
    diag = {c: summary["credits"][c]["diagnostics"] for c in CREDIT_PAIR}
    lines += ["", "Seeds a paired t test needs (80 %) for an AUC difference of "
              + ", ".join(f"{e}: {k}" for e, k in summary["seeds_needed"].items()) + ".", "",
              "Per-update batch diagnostics, mean over updates and seeds (both credits' gradients on the same batch):",
              "", "| runs trained with | decisions whose advantage differs | groups with mixed rewards "
              "| cos(GGPO grad, trajectory grad), same batch | cos(grad, previous batch's grad) |",
              "|---|---|---|---|---|"]
    for c in CREDIT_PAIR:
        d = diag[c]
        lines.append(f"| {c} | {100 * d['differ']:.1f} % | {100 * d['mixed']:.1f} % | {d['cos_credits']:.3f} "
                     f"| {d['cos_successive']:.3f} |")
    _plot(pick, seeds, out)
    md = "\n".join(lines)
    (out / "table.md").write_text(md + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return md


def _plot(pick: dict, seeds: list[int], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for c in CREDIT_PAIR:
        xs = [p["episodes"] for p in pick[c][seeds[0]]["curve"]]
        for ax, key in zip(axes, ("dev_reward", "dev_accuracy"), strict=True):
            mat = np.array([[p.get(key, p["dev_accuracy"]) for p in pick[c][s]["curve"]] for s in seeds])
            rng = np.random.default_rng(0)
            boots = mat[rng.integers(0, len(seeds), (2000, len(seeds)))].mean(axis=1)
            ax.plot(xs, mat.mean(0), marker="o", ms=3, label=f"{c} (mean of {len(seeds)} seeds)")
            ax.fill_between(xs, np.quantile(boots, 0.025, axis=0), np.quantile(boots, 0.975, axis=0), alpha=0.2)
            ax.set_xlabel("training episodes")
            ax.set_ylabel(key.replace("_", " "))
            ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=110)
    plt.close(fig)


@main_guard
def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = ArgumentParser(prog="python -m sim_benchmarks.studies.vimrag.ggpo_credit",
                        description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-29")
    ap.add_argument("--credits", default="ggpo,trajectory")
    ap.add_argument("--step-cost", type=float, default=0.02)
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--questions-per-batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--std-floor", type=float, default=0.25, help="floor of the group's reward spread in the "
                    "advantage (0: plain normalisation; with a step cost that collapses training to answering at once)")
    ap.add_argument("--eval-every-updates", type=int, default=40)
    ap.add_argument("--level", type=float, default=0.5, help="dev reward for 'episodes to a fixed reward'")
    ap.add_argument("--plateau", type=float, default=0.6, help="a run escaped the plateau when its last "
                    "evaluations' mean dev accuracy is above this")
    ap.add_argument("--last", type=int, default=3, help="evaluations averaged for the final score")
    ap.add_argument("--margin", type=float, default=0.03, help="AUC difference below which the credits count as "
                    "equivalent (when the CI lies inside +-margin)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--report", action="store_true", help="only (re)write the report from runs.jsonl")
    args = ap.parse_args(argv)
    credits = [c.strip() for c in args.credits.split(",") if c.strip()]
    for c in credits:
        if c not in CREDIT_PAIR:
            raise ConfigError(f"unknown credit {c!r}; valid: {', '.join(CREDIT_PAIR)}")
    for name in ("updates", "group", "questions_per_batch", "eval_every_updates", "last"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not (args.lr > 0 and args.step_cost >= 0 and args.margin > 0 and args.std_floor >= 0):
        raise ConfigError(f"--lr and --margin must be > 0, --step-cost and --std-floor >= 0, got {args.lr}, "
                          f"{args.margin}, {args.step_cost}, {args.std_floor}")
    seeds = [] if args.report else parse_seeds(args.seeds)
    per_update = args.group * args.questions_per_batch
    cfg_kw = {"episodes": args.updates * per_update, "group": args.group,
              "questions_per_batch": args.questions_per_batch, "lr": args.lr,
              "eval_every": args.eval_every_updates * per_update, "step_cost": args.step_cost,
              "std_floor": args.std_floor}
    path = args.out / "runs.jsonl"
    if args.report and not path.exists():
        raise ConfigError(f"--report needs {str(path)!r} (written by a study run); it does not exist")
    args.out.mkdir(parents=True, exist_ok=True)
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if seeds:
        import torch

        torch.set_num_threads(1)
    for seed in seeds:
        for credit in credits:
            if any(r["credit"] == credit and r["seed"] == seed and
                   all(r["config"].get(k) == v for k, v in cfg_kw.items()) for r in runs):
                continue
            run = train_one(credit, seed, cfg_kw)
            runs.append(run)
            with path.open("a") as f:
                f.write(json.dumps(run) + "\n")
            print(credit, seed, "dev reward", [round(p.get("dev_reward", p["dev_accuracy"]), 3)
                                               for p in run["curve"]], f"{run['train_s']:.0f} s", flush=True)
    if runs:
        print(report(runs, args.out, args.level, args.plateau, args.last, args.margin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
