"""Train the prior-fitted tabular transformer (the TabPFN stand-in) on synthetic SCM tasks and write its checkpoint.

    python -m launch.train_prior_fitted --steps 2500 --batch 16 --seed 0 --out checkpoints/prior_fitted_tab

``--init FOLDER`` continues the training of an earlier checkpoint (its architecture is kept; its manifest's
command and sha256 are recorded, so the chain of commands reproduces the weights); give it a ``--seed`` the earlier
run did not use, so no training task repeats. ``--n-test`` sets how many labelled test rows each training task
carries (more supervised rows per task, same task prior).
Every step draws ``--batch`` fresh structural-causal classification tasks from the prior (never reused), trains on
their test rows' labels, and logs the loss to stderr. Afterwards the frozen model is measured on ``--eval-tasks``
fresh prior tasks from a seed no training task uses (100 test rows each), beside L2 logistic regression and 5-NN
fitted per task on the same standardised features — a sanity figure for in-context learning, on synthetic data.
Writes ``OUT/model.pt``, ``OUT/model.pt.sha256`` and ``OUT/manifest.json`` (config, command, seed, training and
evaluation facts). Same flags, seed and thread count → the same weights.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier

from envs.errors import ConfigError
from launch.cli import ArgumentParser, main_guard
from policies.aux.structured.prior_fitted import (
    ModelConfig,
    PriorConfig,
    PriorFittedTransformer,
    TrainConfig,
    predict_proba,
    prepare_features,
    sample_batch,
    train_prior_fitted,
)
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.studies.aux.prior_fitted_checkpoint import load_checkpoint, read_manifest, save_checkpoint
from sim_benchmarks.studies.aux.results import mean_ci, paired_diff_ci

EVAL_SEED_OFFSET = 1_000_003  # evaluation tasks come from a stream no training seed reaches


def evaluate_on_prior(model: PriorFittedTransformer, n_tasks: int, seed: int,
                      prior: PriorConfig = PriorConfig(), per_task: bool = False) -> dict[str, Any]:
    """Test accuracy (%) of the frozen model, logistic regression and 5-NN on ``n_tasks`` fresh prior tasks with
    100 test rows each: mean [95 % CI] over tasks and the paired differences. ``per_task`` adds every task's
    accuracies, so that two models evaluated with the same ``seed`` (the same tasks) can be compared task by task."""
    rng = np.random.default_rng(seed + EVAL_SEED_OFFSET)
    prior = replace(prior, n_test=100)
    acc: dict[str, list[float]] = {"pfn": [], "logistic": [], "knn": []}
    for _ in range(n_tasks):
        x, y, n_train, _, k = sample_batch(rng, 1, prior)
        xtr, xte, ytr, yte = x[0, :n_train], x[0, n_train:], y[0, :n_train], y[0, n_train:]
        proba = predict_proba(model, xtr, ytr, xte, n_classes=k)
        acc["pfn"].append(100.0 * float((proba.argmax(1) == yte).mean()))
        ztr, zte = prepare_features(xtr.astype(np.float64), xte.astype(np.float64), x.shape[-1])
        for name, head in (("logistic", LogisticRegression(C=1.0, max_iter=2000)),
                           ("knn", KNeighborsClassifier(n_neighbors=min(5, n_train)))):
            if len(np.unique(ytr)) < 2:  # a one-class training set: both heads can only say that class
                pred = np.full(len(yte), ytr[0])
            else:
                pred = head.fit(ztr, ytr).predict(zte)
            acc[name].append(100.0 * float((pred == yte).mean()))
    out: dict[str, Any] = {"tasks": n_tasks, "seed": seed + EVAL_SEED_OFFSET, "synthetic": True,
                           "accuracy": {k: mean_ci(v) for k, v in acc.items()}}
    out["pfn_minus_logistic"] = paired_diff_ci(acc["pfn"], acc["logistic"])
    out["pfn_minus_knn"] = paired_diff_ci(acc["pfn"], acc["knn"])
    if per_task:
        out["per_task"] = acc
    return out


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="launch.train_prior_fitted",
                       description="Train the prior-fitted tabular transformer on synthetic SCM tasks.")
    p.add_argument("--out", writes="folder", required=True,
                   help="checkpoint folder to write (e.g. checkpoints/prior_fitted_tab)")
    p.add_argument("--steps", type=int, default=2500, min=1, max=10_000_000, help="optimiser steps (default 2500)")
    p.add_argument("--batch", type=int, default=16, min=1, max=4096, help="prior tasks per step (default 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the task stream and the initial weights")
    # Sizes are capped where the model still fits a workstation's memory (4096 wide: ~1 GB for 4 layers).
    p.add_argument("--d-model", type=int, default=64, min=4, max=4096, help="token width (default 64)")
    p.add_argument("--layers", type=int, default=4, min=1, max=64, help="transformer blocks (default 4)")
    p.add_argument("--lr", type=float, default=1e-3, min=1e-12, max=10,
                   help="peak AdamW learning rate (default 1e-3)")
    p.add_argument("--n-test", type=int, default=PriorConfig().n_test, min=1, max=ModelConfig().max_test,
                   help=f"labelled test rows per training task (default {PriorConfig().n_test})")
    p.add_argument("--init", type=Path, default=None,
                   help="continue training this checkpoint folder (its sha256 is verified; --d-model/--layers "
                        "are then taken from it)")
    p.add_argument("--eval-tasks", type=int, default=300, min=1, max=1_000_000,
                   help="fresh prior tasks for the sanity figure")
    return p


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Train, evaluate and save; returns the manifest."""
    args = build_parser().parse_args(argv)
    out = check_out_dir(args.out)
    if args.d_model % 4:
        raise ConfigError(f"--d-model must be a multiple of 4 (the head count), got {args.d_model}")
    model_cfg = ModelConfig(d_model=args.d_model, n_layers=args.layers, d_ff=2 * args.d_model)
    init_state, init_info = None, None
    if args.init is not None:
        init_manifest = read_manifest(args.init)
        init_state = load_checkpoint(args.init).state_dict()
        model_cfg = ModelConfig(**init_manifest["config"])
        init_info = {"folder": str(args.init), "sha256": init_manifest["sha256"],
                     "command": init_manifest.get("training", {}).get("command"),
                     "init": init_manifest.get("training", {}).get("init")}
    train_cfg = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, seed=args.seed,
                            warmup=min(100, max(1, args.steps // 10)))
    prior_cfg = PriorConfig(n_test=args.n_test)
    command = "python -m launch.train_prior_fitted " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    history: list[dict] = []

    def log(record: dict) -> None:
        history.append(record)
        print(f"step {record['step']}/{args.steps} loss {record['loss']:.4f} lr {record['lr']:.2e}",
              file=sys.stderr, flush=True)

    start = time.perf_counter()
    model, losses = train_prior_fitted(model_cfg, train_cfg, prior_cfg, on_log=log, init_state=init_state)
    for param in model.parameters():  # a continued model leaves training frozen like a fresh one
        param.requires_grad_(False)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    evaluation = evaluate_on_prior(model, args.eval_tasks, args.seed, prior_cfg)
    training = {"command": command, "seed": args.seed, "init": init_info, "tasks": args.steps * args.batch,
                "train_config": asdict(train_cfg), "prior_config": asdict(prior_cfg),
                "parameters": int(sum(p.numel() for p in model.parameters())),
                "torch_threads": torch.get_num_threads(), "train_s": round(train_s, 1),
                "loss_first_100": float(np.mean(losses[:100])), "loss_last_100": float(np.mean(losses[-100:])),
                "history": history, "eval_on_fresh_prior_tasks": evaluation,
                "eval_s": round(time.perf_counter() - start, 1)}
    return save_checkpoint(model, out, asdict(model_cfg), training)


@main_guard
def main(argv: list[str] | None = None) -> int:
    manifest = run(argv)
    ev = manifest["training"]["eval_on_fresh_prior_tasks"]["accuracy"]
    print(f"saved {manifest['file']} sha256 {manifest['sha256'][:12]}…; accuracy on fresh prior tasks: "
          + ", ".join(f"{k} {v[0]:.1f} [{v[1]:.1f}, {v[2]:.1f}]" for k, v in ev.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
