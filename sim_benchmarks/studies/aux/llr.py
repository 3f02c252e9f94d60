"""LLR on a char-level tiny GPT trained on the standard library's English help text (``pydoc_data.topics``).

Protocol: AdamW with warm-up + cosine decay. The uniform base rate η is the best of a five-point grid (lowest final
validation loss on the first seed; a best η at the grid's edge makes the comparison inconclusive, since a better
uniform rate may lie outside it); then every seed trains the same initialisation on the same batches twice, once
with the uniform η and once with LLR around that η. We report (a) the final validation-loss gap and (b) the fraction
of steps LLR saves to reach the uniform run's final validation loss.

Headroom: the loss the uniform run reaches when trained 1.5× as long (the paper's headline is ~1.5× fewer tokens):
if that is no lower than the uniform run's own final loss by more than the margin, no faster optimiser could show.
Margins: 2 standard errors over seeds of the uniform run's final loss (the experiment's noise) for the loss part,
one evaluation interval (the curve's resolution) for the steps part.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from policies.aux.training.llr import LayerwiseLR, LLRConfig
from policies.next_token.transformer import CausalTransformer, TransformerConfig
from sim_benchmarks.studies.aux.results import (
    Headroom,
    StudyResult,
    ceiling_guard,
    combine,
    judge,
    mean_ci,
    noise_margin,
    paired_diff_ci,
)

METHOD = "llr"
CLAIM = ("Layer-wise learning rates set from each layer's heavy-tailed spectrum (Hill α: lighter tail, larger rate) "
         "train a language model to a lower loss, or to the same loss in fewer tokens, than the best uniform rate.")

LR_GRID = (1e-3, 3e-3, 1e-2, 2e-2, 4e-2)
VAL_SEQUENCES = 256
LONGER = 1.5  # headroom run: the uniform rate trained this many times as long
LLR = LLRConfig(r_min=0.5, r_max=1.5, interval=100, ramp=50)
CONTEXT, BATCH, D_MODEL, LAYERS, HEADS = 64, 16, 64, 2, 4
WARMUP, WEIGHT_DECAY = 50, 0.1


def load_text() -> str:
    """Every topic of Python's bundled pydoc help, concatenated in sorted-key order (~465k characters)."""
    from pydoc_data import topics

    return "".join(topics.topics[key] for key in sorted(topics.topics))


def encode(text: str) -> tuple[np.ndarray, int]:
    """Characters → ids over the sorted set of characters in the text."""
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    return np.fromiter((lookup[c] for c in text), dtype=np.int64, count=len(text)), len(chars)


def _batch(ids: np.ndarray, rng: np.random.Generator, batch: int) -> torch.Tensor:
    starts = rng.integers(0, ids.size - CONTEXT - 1, batch)
    return torch.from_numpy(np.stack([ids[s : s + CONTEXT + 1] for s in starts]))


def _loss(model: CausalTransformer, chunk: torch.Tensor, vocab: int) -> torch.Tensor:
    return F.cross_entropy(model(chunk[:, :-1]).reshape(-1, vocab), chunk[:, 1:].reshape(-1))


def _schedule(step: int, steps: int, lr: float) -> float:
    if step < WARMUP:
        return lr * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, steps - WARMUP)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(seed: int, lr: float, use_llr: bool, steps: int, eval_every: int, data: tuple) -> dict:
    """One run; returns the validation-loss curve (every ``eval_every`` steps and at the end) and the final α."""
    train_ids, val_ids, vocab = data
    torch.manual_seed(seed)
    model = CausalTransformer(TransformerConfig(n_actions=vocab, context=CONTEXT, d_model=D_MODEL,
                                                n_layers=LAYERS, n_heads=HEADS))
    llr = LayerwiseLR(model, LLR)
    # Same groups either way, so the two arms differ only in the per-group rates.
    opt = torch.optim.AdamW(llr.param_groups(WEIGHT_DECAY), lr=lr, betas=(0.9, 0.95))
    rng = np.random.default_rng(seed)
    # One validation set for every seed and arm, so the seeds' spread of final losses is training noise alone
    # (the loss margin is 2 standard errors of it).
    val = _batch(val_ids, np.random.default_rng(10_000), VAL_SEQUENCES)
    curve: list[tuple[int, float]] = []
    for step in range(steps + 1):
        if step % eval_every == 0 or step == steps:
            with torch.no_grad():
                curve.append((step, float(_loss(model, val, vocab))))
        if step == steps:
            break
        base = _schedule(step, steps, lr)
        if use_llr:
            llr.apply(opt, step, base)
        else:
            for group in opt.param_groups:
                group["lr"] = base
        loss = _loss(model, _batch(train_ids, rng, BATCH), vocab)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"curve": curve, "final": curve[-1][1],
            "alphas": [float(a) for a in llr.alphas] if use_llr else None}


def steps_to(curve: list[tuple[int, float]], target: float) -> int | None:
    """First evaluated step whose validation loss is ≤ target (None if never)."""
    return next((s for s, v in curve if v <= target), None)


def run(seeds: list[int], quick: bool) -> StudyResult:
    """LR sweep on the first seed, a longer uniform run for the headroom, then paired uniform vs LLR on every seed."""
    torch.set_num_threads(1)
    ids, vocab = encode(load_text())
    cut = int(0.9 * ids.size)
    data = (ids[:cut], ids[cut:], vocab)
    steps, eval_every = (20, 10) if quick else (600, 25)
    start = time.process_time()
    sweep = {lr: train(seeds[0], lr, False, steps, eval_every, data) for lr in LR_GRID}
    best_lr = min(LR_GRID, key=lambda lr: sweep[lr]["final"])
    longer = train(seeds[0], best_lr, False, int(LONGER * steps), eval_every, data)
    per_seed = []
    for seed in seeds:
        uniform = sweep[best_lr] if seed == seeds[0] else train(seed, best_lr, False, steps, eval_every, data)
        llr = train(seed, best_lr, True, steps, eval_every, data)
        reach = steps_to(llr["curve"], uniform["final"])
        saved = 1.0 - (reach if reach is not None else steps) / steps
        per_seed.append({"seed": int(seed), "uniform_final": uniform["final"], "llr_final": llr["final"],
                         "llr_steps_to_uniform_final": reach, "steps_saved_fraction": saved,
                         "llr_final_alphas": llr["alphas"], "uniform_curve": uniform["curve"],
                         "llr_curve": llr["curve"]})
    sweep_info = {"lr_sweep_final_loss": {f"{lr:g}": sweep[lr]["final"] for lr in LR_GRID}, "best_lr": best_lr,
                  "longer_uniform_final": longer["final"], "longer_steps": int(LONGER * steps), "steps": steps,
                  "eval_every": eval_every, "cpu_s": time.process_time() - start}
    return judge_runs(per_seed, sweep_info)


def judge_runs(per_seed: list[dict], sweep: dict) -> StudyResult:
    """The verdict from per-seed rows and the first seed's sweep (``run`` documents the parts and margins)."""
    seeds = [int(r["seed"]) for r in per_seed]
    uniform = np.array([r["uniform_final"] for r in per_seed])
    gap, lo, hi = paired_diff_ci(uniform, [r["llr_final"] for r in per_seed])
    saved_m, saved_lo, saved_hi = mean_ci([r["steps_saved_fraction"] for r in per_seed])
    margin = noise_margin(uniform)
    steps_margin = sweep["eval_every"] / sweep["steps"]
    headroom = Headroom(best=float(sweep["longer_uniform_final"]), baseline=float(per_seed[0]["uniform_final"]),
                        what=f"uniform rate trained {LONGER:g}x as long, final validation loss (nats; first seed)",
                        higher_is_better=False)
    grid = [float(k) for k in sweep["lr_sweep_final_loss"]]
    at_edge = sweep["best_lr"] in (min(grid), max(grid))

    def guarded(word: str) -> str:
        # Both parts need loss left to gain by training longer (the headroom, in nats, against the loss margin)
        # and a uniform rate that is the grid's best inside it, not at its edge.
        return "inconclusive" if at_edge else ceiling_guard(word, headroom, margin)

    parts = {
        "final validation loss below the best uniform rate's": guarded(judge(lo, hi, margin)),
        "uniform run's final loss reached in fewer steps": guarded(judge(saved_lo, saved_hi, steps_margin)),
    }
    verdict = combine(parts)
    summary = (f"final val loss uniform − LLR {gap:+.4f} nats [{lo:+.4f}, {hi:+.4f}] (margin {margin:.4f}); steps "
               f"saved {100 * saved_m:.1f} % [{100 * saved_lo:.1f}, {100 * saved_hi:.1f}] (margin "
               f"{100 * steps_margin:.1f} %); best uniform η {sweep['best_lr']:g}"
               f"{' (grid edge)' if at_edge else ''}; {LONGER:g}x longer uniform run {headroom.best:.3f} vs "
               f"{headroom.baseline:.3f}")
    return StudyResult(
        method=METHOD, claim=CLAIM, metric="final validation loss, uniform − LLR (nats)",
        value=gap, ci95=(lo, hi), passed=None, summary=summary, synthetic=False, verdict=verdict, parts=parts,
        margin=margin, margin_why="2 standard errors over seeds of the uniform run's final validation loss (the "
                                  "experiment's noise); steps part: one evaluation interval", headroom=headroom,
        data=(f"pydoc_data.topics (Python's bundled help text); 90/10 split by position; {LAYERS}-layer d={D_MODEL} "
              f"char transformer, context {CONTEXT}, batch {BATCH}, {sweep['steps']} steps"),
        seeds=seeds, per_seed=per_seed,
        checks={**sweep, "best_lr_at_grid_edge": at_edge, "margins": {"loss_nats": margin, "steps": steps_margin},
                "steps_saved_fraction": {"mean": saved_m, "ci95": [saved_lo, saved_hi]}})
