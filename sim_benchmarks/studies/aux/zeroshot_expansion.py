"""Zero-shot classifier expansion on Embodia's object designs: granularity-aware maps vs one shared map.

Classes are 48 designs (4 categories × 4 colours × 3 patterns) rendered on library bodies (10 images each) and
embedded by MobileNetV2; class semantics are MiniLM embeddings of 4 wordings × 5 nuisance contexts. Per split
seed, 12 designs are unseen (each shares its category and colour with seen designs); seen designs give 60 % of
their images for training and 40 % for testing. Generalised zero-shot evaluation scores every test image against
all 48 classes with calibrated stacking (a constant γ subtracted from seen-class scores); the reported harmonic
mean is the best over a shared γ grid for each model (so neither model's number depends on a tuning split), with
γ = 0 and the area under the seen-unseen curve beside it.
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
from sim_benchmarks.studies.aux.object_designs import DesignData, design_classes, load_designs
from sim_benchmarks.studies.aux.results import StudyResult, mean_ci, paired_diff_ci

METHOD = "zeroshot_expansion"
CLAIM = ("Granularity-aware semantics->weight maps with nuisance interventions beat one shared map by >= 5 points "
         "of generalised zero-shot harmonic mean (CI over 5 splits), the gain concentrated on similar-class pairs.")
MODELS = ("shared", "granular")
GAMMAS = np.linspace(0.0, 6.0, 61)


def unseen_split(classes: list[tuple[str, str, str]], count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` unseen class indices, redrawn until every unseen category and colour also occurs among seen ones."""
    while True:
        unseen = np.sort(rng.choice(len(classes), count, replace=False))
        seen = [classes[i] for i in range(len(classes)) if i not in set(unseen)]
        if all(any(s[0] == classes[u][0] for s in seen) and any(s[1] == classes[u][1] for s in seen)
               for u in unseen):
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
    """Per split seed: train both maps on the seen designs, evaluate generalised zero-shot on all designs."""
    torch.set_num_threads(1)
    classes = design_classes()
    if quick:
        classes = [c for c in classes if c[0] in ("mug", "bowl") and c[1] in ("red", "blue")]
    data: DesignData = load_designs(bodies=1 if quick else 2, views=3 if quick else 5, classes=classes)
    n_unseen, steps = (3, 40) if quick else (12, 300)
    sem_all = data.semantics.mean(0)
    sem_all /= np.linalg.norm(sem_all, axis=1, keepdims=True)
    semantics = torch.tensor(sem_all)
    interventions = torch.tensor(data.semantics)
    feats_all = torch.tensor(data.features)
    similar = similar_pairs(classes)
    per_seed = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        clusters = torch.tensor(kmeans(sem_all, max(2, len(classes) // 4), rng))
        unseen = unseen_split(classes, n_unseen, rng)
        seen = np.setdiff1d(np.arange(len(classes)), unseen)
        train_idx, test_idx = [], []
        for c in range(len(classes)):
            idx = rng.permutation(np.flatnonzero(data.labels == c))
            if c in set(unseen):
                test_idx.extend(idx)
            else:
                cut = int(round(0.6 * len(idx)))
                train_idx.extend(idx[:cut])
                test_idx.extend(idx[cut:])
        train_idx, test_idx = np.array(train_idx), np.array(test_idx)
        position = {c: i for i, c in enumerate(seen)}
        train_labels = torch.tensor([position[c] for c in data.labels[train_idx]])
        row: dict = {"seed": seed, "unseen": [list(classes[u]) for u in unseen]}
        for name in MODELS:
            granular = name == "granular"
            model = (GranularityMap if granular else SharedMap)(semantics.shape[1], feats_all.shape[1])
            train_map(model, feats_all[train_idx], train_labels, semantics, clusters, torch.tensor(seen),
                      interventions if granular else None, steps, seed, within_cluster=1.0 if granular else 0.0)
            scores = class_scores(model, feats_all[test_idx], semantics, clusters).numpy()
            labels = data.labels[test_idx]
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

    def col(key: str) -> list[float]:
        return [r[key] for r in per_seed]

    value, lo, hi = paired_diff_ci(col("granular/H"), col("shared/H"))
    sim_gain = paired_diff_ci(col("shared/unseen_confusion_similar"), col("granular/unseen_confusion_similar"))
    dist_gain = paired_diff_ci(col("shared/unseen_confusion_distinct"), col("granular/unseen_confusion_distinct"))
    checks = {
        "H_gain_ge_5": bool((lo if len(seeds) > 1 else value) >= 5.0),
        "gain_concentrated_on_similar_pairs": bool(sim_gain[0] > max(dist_gain[0], 0.0)),
        "similar_confusion_reduction_points": sim_gain, "distinct_confusion_reduction_points": dist_gain,
        "H_gamma0_gain": paired_diff_ci(col("granular/H_gamma0"), col("shared/H_gamma0")),
        "AUSUC_gain": paired_diff_ci(col("granular/AUSUC"), col("shared/AUSUC")),
        "table": {f"{m}/{k}": mean_ci(col(f"{m}/{k}")) for m in MODELS
                  for k in ("H", "S", "U", "H_gamma0", "AUSUC", "unseen_confusion_similar",
                            "unseen_confusion_distinct")},
    }
    passed = checks["H_gain_ge_5"] and checks["gain_concentrated_on_similar_pairs"]
    summary = (f"{'reproduced' if passed else 'not reproduced'}: H granular - shared {value:+.1f} [{lo:.1f}, {hi:.1f}]"
               f" points; unseen confusions with similar designs -{sim_gain[0]:.1f}, with distinct -{dist_gain[0]:.1f}")
    return StudyResult(
        method=METHOD, claim=CLAIM, metric="GZSL harmonic mean, granularity-aware - shared map (points)",
        value=value, ci95=(lo, hi), passed=passed, summary=summary, synthetic=True,
        data=(f"Embodia's procedural object designs ({len(classes)} classes: category x colour x pattern) rendered "
              "by the PyBullet reference renderer (varied view, distance, yaw, light) -> offline MobileNetV2 "
              "features; class semantics = offline MiniLM embeddings of 4 wordings x 5 nuisance contexts. Rendered "
              "(synthetic) images stand in for photographs; attribute descriptions stand in for the paper's "
              "multi-source class semantics."),
        seeds=list(seeds), per_seed=per_seed, checks=checks)
