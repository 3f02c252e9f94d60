"""ManifoldKV vs KeyDiff, recency and random KV eviction.

Part A (synthetic): a tiny transformer trained on multi-query associative recall, the multi-key needle-in-a-haystack
analogue. A context of ``CTX`` positions holds filler tokens and ``PAIRS`` bound key–value tokens (one position
carries a key and its value, so retrieval is one attention hop a 2-layer model learns in seconds); three query
positions each ask for one key's value. After prefill, every layer's cache is cut per head by each scorer (query
rows may no longer attend to evicted context columns), and the model answers: q-key accuracy = all first q queries
answered. At 50 % eviction every scorer is near the no-eviction score (no headroom), so the verdict is taken at 85 %.
Two cache conditions: the model's own keys, and *planted directional collisions*: every pair position's key gets
``PLANT × ‖k‖`` added along its head's key centroid, so needles point almost along the centroid (cosine near 1:
KeyDiff's least-kept) while lying far from it in L2 (ManifoldKV's most-kept) -- the case the method is built for.
The planted condition has its own model, trained with the plant in place: a model trained on its own keys cannot
read planted keys at all (no-eviction 3-key accuracy 0.1 % on seed 0), which left that condition without headroom.
The no-eviction accuracy of each condition is its headroom.
Part B (real): SmolLM2-135M keys on ~1 k-token prompts of Python reference prose with three passkey sentences;
retention = share of passkey-digit cache entries kept, over all 30 layers × 3 KV heads, at 25, 50 and 85 %
compression.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch.nn import functional as F

from policies.aux.lm_geometry.manifold_kv import (
    keep_mask,
    keydiff_scores,
    manifold_scores,
    random_scores,
    recency_scores,
)
from policies.aux.lm_geometry.tiny_gpt import TinyGPT, TinyGPTConfig
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

METHOD = "manifold_kv"
CLAIM = ("Scoring cached keys by their Euclidean distance to the key centroid (ManifoldKV) keeps the keys that "
         "matter under heavy KV-cache compression better than cosine-based KeyDiff, above all for multi-key "
         "retrieval where keys share a direction but differ in norm.")

N_FILL, N_KEYS, N_VALS = 64, 32, 32
CTX, PAIRS, QUERIES = 128, 8, 3
WINDOW = 32  # windowed-centroid variant
EVICT = 0.85  # the judged compression (50 % leaves no headroom on this task)
PLANT = 4.0  # planted needles: k + PLANT * |k| * unit(centroid)
SCORERS = ("manifold", "manifold_win", "keydiff", "recency", "random")


class RecallData:
    """Embedding tables for the recall task; sequences are built as input embeddings."""

    def __init__(self, model: TinyGPT) -> None:
        self.model = model  # tok table: [filler | keys | values | query-marker]; pair = key + value embedding

    def embed(self, fill: torch.Tensor, pair_pos: torch.Tensor, keys: torch.Tensor, vals: torch.Tensor,
              q_keys: torch.Tensor) -> torch.Tensor:
        tok = self.model.tok
        x = tok(fill)  # (B, CTX, d)
        b = torch.arange(fill.shape[0])[:, None]
        x[b, pair_pos] = tok(N_FILL + keys) + tok(N_FILL + N_KEYS + vals)
        q = tok(N_FILL + q_keys) + tok.weight[N_FILL + N_KEYS + N_VALS]
        return torch.cat([x, q], dim=1)


def sample(n: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """``n`` recall sequences: filler ids, pair positions/keys/values, queried pair indices."""
    fill = rng.integers(0, N_FILL, (n, CTX))
    pos = np.sort(np.argsort(rng.random((n, CTX)), axis=1)[:, :PAIRS], axis=1)
    keys = np.argsort(rng.random((n, N_KEYS)), axis=1)[:, :PAIRS]
    vals = rng.integers(0, N_VALS, (n, PAIRS))
    which = np.argsort(rng.random((n, PAIRS)), axis=1)[:, :QUERIES]
    t = {k: torch.as_tensor(v) for k, v in dict(fill=fill, pos=pos, keys=keys, vals=vals, which=which).items()}
    t["q_keys"] = torch.gather(t["keys"], 1, t["which"])
    t["answer"] = torch.gather(t["vals"], 1, t["which"])
    return t


def query_isolation(cfg: TinyGPTConfig) -> torch.Tensor:
    """(1, L, 1, T, T) mask: query rows see the context and themselves, not the other queries."""
    t = CTX + QUERIES
    m = torch.ones(t, t, dtype=torch.bool)
    m[CTX:, CTX:] = torch.eye(QUERIES, dtype=torch.bool)
    return m.expand(1, cfg.n_layers, 1, t, t)


def logits_for(model: TinyGPT, data: RecallData, s: dict[str, torch.Tensor], mask: torch.Tensor,
               shift: torch.Tensor | None = None) -> torch.Tensor:
    x = data.embed(s["fill"], s["pos"], s["keys"], s["vals"], s["q_keys"])
    return model(embeds=x, head_mask=mask, key_shift=shift).logits[:, CTX:, N_FILL + N_KEYS:N_FILL + N_KEYS + N_VALS]


def train_recall(seed: int, steps: int, plant: float = 0.0) -> tuple[TinyGPT, RecallData]:
    """Train a 2-layer d=64 model on the recall task (full attention) and return it.

    ``plant`` > 0 trains with planted directional collisions (:func:`collinear_plant`, recomputed from the current
    weights for every batch and held constant in the backward pass), so the model learns to read needle keys that
    lie along its key centroid.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    cfg = TinyGPTConfig(vocab=N_FILL + N_KEYS + N_VALS + 1, d_model=64, n_layers=2, n_heads=4, max_len=CTX + QUERIES)
    model = TinyGPT(cfg)
    data = RecallData(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    mask = query_isolation(cfg)
    for _ in range(steps):
        s = sample(64, rng)
        shift = collinear_plant(model, data, s, plant) if plant > 0 else None
        loss = F.cross_entropy(logits_for(model, data, s, mask, shift).reshape(-1, N_VALS), s["answer"].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return model, data


@torch.no_grad()
def collinear_plant(model: TinyGPT, data: RecallData, s: dict[str, torch.Tensor], strength: float) -> torch.Tensor:
    """Key shift (B, L, H, T, dh) moving every pair position's key ``strength × ‖k‖`` along its head's key centroid.

    The shift is computed layer by layer from the keys the model produces with the earlier layers' shifts in place.
    """
    cfg = model.cfg
    x = data.embed(s["fill"], s["pos"], s["keys"], s["vals"], s["q_keys"])
    b, t = x.shape[0], x.shape[1]
    shift = torch.zeros(b, cfg.n_layers, cfg.n_heads, t, cfg.d_model // cfg.n_heads)
    needle = torch.zeros(b, CTX, dtype=torch.bool)
    needle[torch.arange(b)[:, None], s["pos"]] = True
    for layer in range(cfg.n_layers):
        k = model(embeds=x[:, :CTX], return_keys=True, key_shift=shift[:, :, :, :CTX]).keys[layer]
        mu = k.mean(dim=-2, keepdim=True)
        unit = mu / mu.norm(dim=-1, keepdim=True).clamp_min(1e-8)
        shift[:, layer, :, :CTX] = needle[:, None, :, None] * strength * k.norm(dim=-1, keepdim=True) * unit
    return shift


@torch.no_grad()
def evict_and_answer(model: TinyGPT, data: RecallData, s: dict[str, torch.Tensor], scorer: str, evict: float,
                     rng: np.random.Generator, shift: torch.Tensor | None = None) -> torch.Tensor:
    """Per-query correctness (B, QUERIES) after evicting ``evict`` of each head's context cache after prefill.

    ``shift``: a key shift (see :func:`collinear_plant`) applied both to the keys the scorer sees and to attention.
    """
    cfg = model.cfg
    x = data.embed(s["fill"], s["pos"], s["keys"], s["vals"], s["q_keys"])
    ctx_shift = None if shift is None else shift[:, :, :, :CTX]
    keys = model(embeds=x[:, :CTX], return_keys=True, key_shift=ctx_shift).keys  # prefill: L × (B, H, CTX, dh)
    n_keep = CTX - round(evict * CTX)
    mask = query_isolation(cfg).repeat(x.shape[0], 1, cfg.n_heads, 1, 1).clone()
    for layer, k in enumerate(keys):
        score = {"manifold": lambda k=k: manifold_scores(k), "manifold_win": lambda k=k: manifold_scores(k, WINDOW),
                 "keydiff": lambda k=k: keydiff_scores(k), "recency": lambda k=k: recency_scores(k),
                 "random": lambda k=k: random_scores(k, rng)}[scorer]()
        kept = keep_mask(score, n_keep)  # (B, H, CTX)
        mask[:, layer, :, CTX:, :CTX] &= kept[:, :, None, :]
    logits = model(embeds=x, head_mask=mask, key_shift=shift).logits
    pred = logits[:, CTX:, N_FILL + N_KEYS:N_FILL + N_KEYS + N_VALS].argmax(-1)
    return pred == s["answer"]


NEEDLE = " The pass key number {i} is {code}. Remember it."


@torch.no_grad()
def passkey_retention(seed: int, n_tokens: int) -> dict[str, float]:
    """SmolLM2 cache retention of passkey-digit entries at 25 % and 50 % compression, per scorer."""
    from perception.smollm2 import load_smollm2
    from sim_benchmarks.studies.aux.pydoc_topics_text import pydoc_topics_text

    model, tok = load_smollm2()
    rng = np.random.default_rng(1000 + seed)
    text = pydoc_topics_text()
    start = int(rng.integers(0, len(text) - 8 * n_tokens))
    hay = text[start:start + 5 * n_tokens]
    cuts = np.sort(rng.choice(np.arange(n_tokens // 2, 3 * n_tokens), 3, replace=False))
    pieces, last = [], 0
    codes = [str(c) for c in rng.integers(10000, 99999, 3)]
    for i, (cut, code) in enumerate(zip(cuts, codes, strict=True)):
        pieces += [hay[last:cut], NEEDLE.format(i=i + 1, code=code)]
        last = cut
    pieces.append(hay[last:])
    enc = tok("".join(pieces), return_offsets_mapping=True)
    ids = torch.tensor(enc["input_ids"][:n_tokens])[None]
    # Needle tokens: those whose characters fall inside a passkey code.
    full = "".join(pieces)
    spans = []
    for code in codes:
        at = full.index(code)
        spans.append((at, at + len(code)))
    offsets = enc["offset_mapping"][:n_tokens]
    needle = torch.tensor([any(a < e and b > s for s, e in spans) for a, b in offsets])
    cache = model(ids, use_cache=True).past_key_values
    out: dict[str, float] = {"needle_tokens": float(needle.sum())}
    for evict in (0.25, 0.5, EVICT):
        n_keep = n_tokens - round(evict * n_tokens)
        for scorer in SCORERS:
            kept = []
            for layer in cache.layers:
                k = layer.keys[0]  # (KV heads, T, dh), after RoPE, as cached
                score = {"manifold": lambda k=k: manifold_scores(k),
                         "manifold_win": lambda k=k: manifold_scores(k, 4 * WINDOW),
                         "keydiff": lambda k=k: keydiff_scores(k), "recency": lambda k=k: recency_scores(k),
                         "random": lambda k=k: random_scores(k, rng)}[scorer]()
                kept.append(keep_mask(score, n_keep)[:, needle].float().mean().item())
            out[f"retention_{int(evict * 100)}_{scorer}"] = float(np.mean(kept))
    return out


def run(seeds: list[int], quick: bool) -> StudyResult:
    """Train/evaluate per seed; pass metric = paired 3-key accuracy difference ManifoldKV − KeyDiff at 85 % eviction
    on the model's own keys; planted directional collisions and the 1-key case are further parts."""
    torch.set_num_threads(1)
    steps, n_eval, n_tokens = (10, 100, 96) if quick else (300, 1000, 1024)
    per_seed = []
    for seed in seeds:
        t0 = time.perf_counter()
        own = train_recall(seed, steps)
        planted_model, planted_data = train_recall(seed, steps, PLANT)
        rng = np.random.default_rng(10_000 + seed)
        s = sample(n_eval, rng)
        planted = collinear_plant(planted_model, planted_data, s, PLANT)
        row: dict[str, float] = {"seed": seed, "train_steps": steps, "eval_sequences": n_eval}
        conditions = (("", own, None), ("planted_", (planted_model, planted_data), planted))
        for cond, (model, data), shift in conditions:
            cells = [("full", 0.0)] + [(sc, e) for e in (0.5, EVICT) for sc in SCORERS]
            for scorer, evict in cells:
                ok = evict_and_answer(model, data, s, "manifold" if scorer == "full" else scorer, evict, rng, shift)
                tag = "full" if scorer == "full" else f"{int(round(100 * evict))}_{scorer}"
                for q in (1, 2, 3):
                    row[f"{cond}acc{q}_{tag}"] = 100.0 * ok[:, :q].all(dim=1).float().mean().item()
        row.update(passkey_retention(seed, n_tokens))
        row["seconds"] = time.perf_counter() - t0
        per_seed.append(row)
    return summarise(per_seed, n_eval, n_tokens)


def summarise(per_seed: list[dict], n_eval: int | None = None, n_tokens: int = 1024) -> StudyResult:
    """The verdict from per-seed rows (also used to merge seeds run as separate processes)."""
    seeds = [int(r["seed"]) for r in per_seed]
    n_eval = int(per_seed[0]["eval_sequences"]) if n_eval is None else n_eval
    col = {k: np.array([r[k] for r in per_seed]) for k in per_seed[0]}
    e = int(round(100 * EVICT))

    def diff(key: str) -> tuple[float, float, float]:
        return paired_diff_ci(col[key.format(scorer="manifold")], col[key.format(scorer="keydiff")])

    d_plant = diff(f"planted_acc3_{e}_{{scorer}}")
    d_own = diff(f"acc3_{e}_{{scorer}}")
    d_one = diff(f"acc1_{e}_{{scorer}}")
    # Margins: 2 standard errors over seeds of KeyDiff's own accuracy in the same cell (the experiment's noise; the
    # paper's +15 points on 3-key NIAH are on a different model and task). With planted collisions KeyDiff can sit
    # at 0 % on every seed (no spread), so that cell's margin is at least the seed noise of its no-eviction score.
    m_plant = max(noise_margin(col[f"planted_acc3_{e}_keydiff"]), noise_margin(col["planted_acc3_full"]))
    m_own = noise_margin(col[f"acc3_{e}_keydiff"])
    m_one = noise_margin(col[f"acc1_{e}_keydiff"])
    headroom = Headroom(best=float(col["planted_acc3_full"].mean()),
                        baseline=float(col[f"planted_acc3_{e}_keydiff"].mean()),
                        what="no eviction, planted collisions, 3-key accuracy (%)")
    own_headroom = Headroom(best=float(col["acc3_full"].mean()), baseline=float(col[f"acc3_{e}_keydiff"].mean()),
                            what="no eviction, the model's own keys, 3-key accuracy (%)")
    parts = {
        f"3-key accuracy above KeyDiff at {e} % eviction, planted directional collisions":
            ceiling_guard(judge(d_plant[1], d_plant[2], m_plant), headroom, m_plant),
        f"3-key accuracy above KeyDiff at {e} % eviction, the model's own keys":
            ceiling_guard(judge(d_own[1], d_own[2], m_own), own_headroom, m_own),
        f"1-key accuracy not below KeyDiff at {e} % eviction, the model's own keys":
            judge(d_one[1], d_one[2], m_one, "non_inferiority"),
    }
    verdict = combine(parts)
    checks: dict = {"planted_acc3_diff_points": d_plant, "acc3_diff_points": d_own, "acc1_diff_points": d_one,
                    "margins_points": {"planted_acc3": m_plant, "acc3": m_own, "acc1": m_one},
                    "headroom_planted": {"best": headroom.best, "baseline": headroom.baseline, "gap": headroom.gap}}
    for key in col:
        if key.startswith(("acc", "planted_acc", "retention_")):
            checks[key] = mean_ci(col[key])
    summary = (f"3-key acc at {e} % eviction ManifoldKV - KeyDiff: planted collisions {d_plant[0]:+.1f} "
               f"[{d_plant[1]:+.1f}, {d_plant[2]:+.1f}] (margin {m_plant:.1f}; no eviction {headroom.best:.1f}, "
               f"KeyDiff {headroom.baseline:.1f}), own keys {d_own[0]:+.1f} [{d_own[1]:+.1f}, {d_own[2]:+.1f}] "
               f"(no eviction {own_headroom.best:.1f}, KeyDiff {own_headroom.baseline:.1f}); 1-key {d_one[0]:+.1f}")
    # The headline is the model's own keys: the planted condition is built to separate the scorers, so it shows
    # the mechanism rather than how often it matters.
    metric = f"3-key accuracy at {e}% eviction, the model's own keys, ManifoldKV − KeyDiff (points)"
    return StudyResult(method=METHOD, claim=CLAIM, metric=metric, value=d_own[0], ci95=(d_own[1], d_own[2]),
                       passed=None, summary=summary, synthetic=True, verdict=verdict, parts=parts, margin=m_own,
                       margin_why="2 standard errors over seeds of KeyDiff's accuracy in the same cell (the "
                                  "experiment's noise); planted cell: or of its no-eviction accuracy where larger",
                       headroom=own_headroom,
                       data=("synthetic multi-query associative recall (bound key-value tokens in filler), "
                             f"{n_eval} held-out sequences per seed, the model's own keys and planted collinear "
                             f"needle keys (+{PLANT} x |k| along the head's key centroid); real SmolLM2-135M keys on "
                             f"{n_tokens}-token prompts of Python reference prose with three passkey sentences"),
                       seeds=list(seeds), per_seed=per_seed, checks=checks)
