"""Zero-shot classifier expansion on Embodia's object designs: granularity-aware maps vs one shared map.

Classes are 48 designs (4 categories × 4 colours × 3 patterns) rendered on library bodies (10 images each) and
embedded by MobileNetV2; descriptions are MiniLM embeddings of 4 wordings × 5 nuisance contexts. Per split seed,
16 designs are unseen: one per (category, colour) cell, so each unseen design's two nearest classes -- the same
category and colour in the other patterns -- are seen classes that differ from it in pattern alone (the
similar-class case the method is built for). Each class is known by *one* description -- a random wording in a
random nuisance context ("... seen in warm evening light") -- the same vector for both maps; the granularity-aware
map also sees that wording in every nuisance context (the interventions) for its invariance penalty and clusters
classes on their mean. (With the mean of all 20 descriptions as every class's semantics and 12 unseen designs
drawn at random, the shared map sat at 97.9 % harmonic mean, the task's ceiling.) Every class's images are split
60/40; the maps train on the seen classes' 60 % and every method is tested on all classes' 40 %. Generalised
zero-shot evaluation scores every test image against all 48 classes with calibrated stacking (a constant γ
subtracted from seen-class scores); the reported harmonic mean is the best over a shared γ grid for each model (so
neither model's number depends on a tuning split), with γ = 0 beside it.

Headroom: a supervised linear probe (one free weight vector per class) trained on the 60 % of *every* class,
unseen ones included, on the same features: the best a semantics→weight map could do on this test set.
"""

from __future__ import annotations

import numpy as np
import torch

from policies.aux.structured.zeroshot_expansion import (
    GranularityMap,
    SharedMap,
    class_scores,
    harmonic_mean,
    kmeans,
    train_map,
)
from sim_benchmarks.studies.aux.object_designs import NUISANCES, DesignData, design_classes, load_designs
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

METHOD = "zeroshot_expansion"
CLAIM = ("Granularity-aware semantics->weight maps (a map of the class cluster's centroid plus a map of the "
         "within-cluster residual) trained with nuisance interventions recognise unseen classes better than one "
         "shared semantics->weight map in generalised zero-shot learning, above all by telling similar classes "
         "apart.")
MODELS = ("shared", "granular", "granular_unit")  # granular_unit: per-class unit-norm residuals (ablation)
GAMMAS = np.linspace(0.0, 6.0, 61)


class SupervisedProbe(torch.nn.Module):
    """Headroom model: one free weight vector per class, fitted on labelled images of every class."""

    def __init__(self, n_classes: int, feat_dim: int, seed: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(0.01 * torch.randn(n_classes, feat_dim, generator=gen))

    def fit(self, feats: torch.Tensor, labels: torch.Tensor, steps: int, scale: float = 10.0) -> None:
        """Cosine-logit cross-entropy with the maps' optimiser and temperature."""
        opt = torch.optim.Adam(self.parameters(), lr=3e-3, weight_decay=1e-4)
        for _ in range(steps):
            logits = scale * feats @ torch.nn.functional.normalize(self.w, dim=-1).T
            loss = torch.nn.functional.cross_entropy(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()

    @torch.no_grad()
    def scores(self, feats: torch.Tensor, scale: float = 10.0) -> torch.Tensor:
        """Cosine logits [N, C]."""
        return scale * feats @ torch.nn.functional.normalize(self.w, dim=-1).T


def unseen_split(classes: list[tuple[str, str, str]], rng: np.random.Generator) -> np.ndarray:
    """One unseen design per (category, colour) cell, its pattern drawn at random.

    Redrawn until every unseen design's (category, pattern) and (colour, pattern) pairs also occur among the seen
    designs, so each of its attribute pairs has been seen and only the full combination is new; its two siblings
    (same category and colour, other patterns) are always seen.
    """
    cells: dict[tuple[str, str], list[int]] = {}
    for i, (category, colour, _) in enumerate(classes):
        cells.setdefault((category, colour), []).append(i)
    while True:
        unseen = np.sort([int(rng.choice(members)) for members in cells.values()])
        seen = [classes[i] for i in range(len(classes)) if i not in set(unseen.tolist())]
        if all(any(s[0] == classes[u][0] and s[2] == classes[u][2] for s in seen)
               and any(s[1] == classes[u][1] and s[2] == classes[u][2] for s in seen) for u in unseen):
            return unseen


def per_class_accuracy(pred: np.ndarray, labels: np.ndarray, classes: np.ndarray) -> float:
    """Mean over ``classes`` of the share of their test images predicted correctly (points)."""
    return 100.0 * float(np.mean([(pred[labels == c] == c).mean() for c in classes]))


def similar_pairs(classes: list[tuple[str, str, str]]) -> np.ndarray:
    """[C, C] True where two designs differ in exactly one of category, colour, pattern."""
    attrs = np.array(classes)
    return (attrs[:, None, :] != attrs[None, :, :]).sum(-1) == 1


def gzsl(scores: np.ndarray, labels: np.ndarray, seen: np.ndarray, unseen: np.ndarray) -> dict:
    """Seen/unseen accuracy, harmonic mean across the γ grid; best H, H at γ = 0, area under the S-U curve."""
    curve = []
    for gamma in GAMMAS:
        adjusted = scores.copy()
        adjusted[:, seen] -= gamma
        pred = adjusted.argmax(1)
        curve.append((per_class_accuracy(pred, labels, seen), per_class_accuracy(pred, labels, unseen)))
    s, u = np.array(curve).T
    h = np.array([harmonic_mean(a, b) for a, b in curve])
    order = np.argsort(u)
    best = int(np.argmax(h))
    return {"H": float(h[best]), "S": float(s[best]), "U": float(u[best]), "gamma": float(GAMMAS[best]),
            "H_gamma0": float(h[0]), "AUSUC": float(np.trapezoid(s[order], u[order]) / 100.0)}


def run(seeds: list[int], quick: bool) -> StudyResult:
    """Per split seed: train the maps on the seen designs and the headroom probe on all, evaluate GZSL on all."""
    torch.set_num_threads(1)
    classes = design_classes()
    if quick:
        classes = [c for c in classes if c[0] in ("mug", "bowl") and c[1] in ("red", "blue")]
    data: DesignData = load_designs(bodies=1 if quick else 2, views=3 if quick else 5, classes=classes)
    steps = 40 if quick else 300
    feats_all = torch.tensor(data.features)
    similar = similar_pairs(classes)
    n_ctx = len(NUISANCES)
    per_seed = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        # Each class is known by one description (a random wording in a random nuisance context), the same for both
        # maps; the interventions are that wording in every nuisance context (only the nuisance part changes).
        source = rng.integers(0, data.semantics.shape[0] // n_ctx, len(classes))
        context = rng.integers(0, n_ctx, len(classes))
        cls = np.arange(len(classes))
        semantics = torch.tensor(data.semantics[source * n_ctx + context, cls])
        interventions = torch.tensor(np.stack([data.semantics[source * n_ctx + k, cls] for k in range(n_ctx)]))
        pooled = interventions.mean(0).numpy()
        clusters = torch.tensor(kmeans(pooled, max(2, len(classes) // 4), rng))
        unseen = unseen_split(classes, rng)
        seen = np.setdiff1d(np.arange(len(classes)), unseen)
        train_idx, test_idx = [], []
        for c in range(len(classes)):
            idx = rng.permutation(np.flatnonzero(data.labels == c))
            cut = int(round(0.6 * len(idx)))
            train_idx.extend(idx[:cut])
            test_idx.extend(idx[cut:])
        train_idx, test_idx = np.array(train_idx), np.array(test_idx)
        seen_train = train_idx[np.isin(data.labels[train_idx], seen)]
        position = {c: i for i, c in enumerate(seen)}
        train_labels = torch.tensor([position[c] for c in data.labels[seen_train]])
        labels = data.labels[test_idx]
        row: dict = {"seed": seed, "unseen": [list(classes[u]) for u in unseen]}
        probe = SupervisedProbe(len(classes), feats_all.shape[1], seed)
        probe.fit(feats_all[train_idx], torch.tensor(data.labels[train_idx]), steps)
        for key, value in gzsl(probe.scores(feats_all[test_idx]).numpy(), labels, seen, unseen).items():
            row[f"oracle/{key}"] = value
        for name in MODELS:
            granular = name != "shared"
            model = (GranularityMap(semantics.shape[1], feats_all.shape[1],
                                    "unit" if name == "granular_unit" else "global") if granular
                     else SharedMap(semantics.shape[1], feats_all.shape[1]))
            train_map(model, feats_all[seen_train], train_labels, semantics, clusters, torch.tensor(seen),
                      interventions if granular else None, steps, seed, within_cluster=1.0 if granular else 0.0)
            scores = class_scores(model, feats_all[test_idx], semantics, clusters).numpy()
            result = gzsl(scores, labels, seen, unseen)
            adjusted = scores.copy()
            adjusted[:, seen] -= result["gamma"]
            pred = adjusted.argmax(1)
            wrong = pred != labels
            # Confusions of unseen-class images, split by whether the wrong class is a similar design.
            is_unseen = np.isin(labels, unseen)
            sim_wrong = wrong & similar[labels, pred] & is_unseen
            result["unseen_confusion_similar"] = 100.0 * float(sim_wrong.sum() / is_unseen.sum())
            result["unseen_confusion_distinct"] = 100.0 * float((wrong & ~similar[labels, pred] & is_unseen).sum()
                                                                / is_unseen.sum())
            for key, value in result.items():
                row[f"{name}/{key}"] = value
        per_seed.append(row)
    return summarise(per_seed)


def summarise(per_seed: list[dict]) -> StudyResult:
    """The verdict from per-seed rows (also used to merge seeds run as separate processes)."""
    seeds = [int(r["seed"]) for r in per_seed]

    def col(key: str) -> np.ndarray:
        return np.array([r[key] for r in per_seed], dtype=float)

    value, lo, hi = paired_diff_ci(col("granular/H"), col("shared/H"))
    sim_gain = paired_diff_ci(col("shared/unseen_confusion_similar"), col("granular/unseen_confusion_similar"))
    dist_gain = paired_diff_ci(col("shared/unseen_confusion_distinct"), col("granular/unseen_confusion_distinct"))
    # Margins: 2 standard errors over splits of the shared map's own score in the same cell (the experiment's
    # noise; the paper reports gains on CUB/SUN/AwA2 with other features, not a margin for this task).
    margin = noise_margin(col("shared/H"))
    sim_margin = noise_margin(col("shared/unseen_confusion_similar"))
    headroom = Headroom(best=float(col("oracle/H").mean()), baseline=float(col("shared/H").mean()),
                        what="supervised linear probe trained on every class's images (unseen ones included), "
                             "GZSL harmonic mean (%)")
    sim_headroom = Headroom(best=0.0, baseline=float(col("shared/unseen_confusion_similar").mean()),
                            what="no confusions (% of unseen test images)", higher_is_better=False)
    parts = {
        "GZSL harmonic mean above the shared map": ceiling_guard(judge(lo, hi, margin), headroom, margin),
        "fewer unseen images confused with a similar design than the shared map":
            ceiling_guard(judge(sim_gain[1], sim_gain[2], sim_margin), sim_headroom, sim_margin),
    }
    verdict = combine(parts)
    unit = paired_diff_ci(col("granular_unit/H"), col("shared/H"))
    checks = {
        "parts": parts, "margins_points": {"H": margin, "similar_confusions": sim_margin},
        "similar_confusion_reduction_points": sim_gain, "distinct_confusion_reduction_points": dist_gain,
        "H_gamma0_gain": paired_diff_ci(col("granular/H_gamma0"), col("shared/H_gamma0")),
        "unit_residual_H_gain": unit,
        "global_vs_unit_residual_H": paired_diff_ci(col("granular/H"), col("granular_unit/H")),
        "table": {f"{m}/{k}": mean_ci(col(f"{m}/{k}")) for m in ("oracle", *MODELS)
                  for k in ("H", "S", "U", "H_gamma0")
                  + (("unseen_confusion_similar", "unseen_confusion_distinct") if m != "oracle" else ())},
    }
    summary = (f"H granular - shared {value:+.1f} [{lo:+.1f}, {hi:+.1f}] points (margin {margin:.1f}; probe "
               f"{headroom.best:.1f}, shared {headroom.baseline:.1f}); similar-design confusions of unseen images "
               f"-{sim_gain[0]:.1f} [{sim_gain[1]:+.1f}, {sim_gain[2]:+.1f}] (margin {sim_margin:.1f}); "
               f"unit-norm residuals: H {unit[0]:+.1f} [{unit[1]:+.1f}, {unit[2]:+.1f}]")
    return StudyResult(
        method=METHOD, claim=CLAIM, metric="GZSL harmonic mean, granularity-aware - shared map (points)",
        value=value, ci95=(lo, hi), passed=None, summary=summary, synthetic=True, verdict=verdict, parts=parts,
        margin=margin, margin_why="2 standard errors over splits of the shared map's harmonic mean (the "
                                  "experiment's noise)", headroom=headroom,
        data=("Embodia's procedural object designs (category x colour x pattern) rendered by the PyBullet reference "
              "renderer (varied view, distance, yaw, light) -> offline MobileNetV2 features; class semantics = "
              "offline MiniLM embedding of one random wording in one random nuisance context per class (interventions: "
              "that wording in all 5 contexts). Rendered (synthetic) images stand in "
              "for photographs; attribute descriptions stand in for the paper's multi-source class semantics. "
              "Unseen: one design per (category, colour) cell."),
        seeds=seeds, per_seed=per_seed, checks=checks)
