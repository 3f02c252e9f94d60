"""Zero-shot expansion: granularity decomposition, clustering, the maps' training and the harmonic mean."""

import numpy as np
import pytest
import torch

from policies.aux.structured.zeroshot_expansion import (
    GranularityMap,
    granularity_parts,
    harmonic_mean,
    kmeans,
    train_map,
)


def test_granularity_parts_reconstruct_and_unit_residuals_are_unit_norm():
    sem = torch.randn(6, 4)
    clusters = torch.tensor([0, 0, 0, 1, 1, 2])
    centroid, residual = granularity_parts(sem, clusters, "unit")
    assert torch.allclose(centroid[0], sem[:3].mean(0)) and torch.allclose(centroid[5], sem[5])
    assert torch.allclose(residual[:5].norm(dim=-1), torch.ones(5))
    assert torch.equal(residual[5], torch.zeros(4))  # a singleton cluster has no within-cluster residual
    # Similar classes (tiny differences) get residuals as far apart as distinct ones.
    close = torch.tensor([[1.0, 0.0, 0.01], [1.0, 0.0, -0.01]])
    _, r = granularity_parts(close, torch.tensor([0, 0]), "unit")
    assert float(r[0] @ r[1]) == pytest.approx(-1.0)


def test_global_residual_scale_does_not_amplify_a_class_near_its_centroid():
    # Two classes of a cluster differ along x; a third sits at the cluster's mean up to wording noise. One common
    # scale keeps the third's residual small; per-class unit norm would blow its noise up to full size.
    sem = torch.tensor([[1.0, 1.0, 0.0], [-1.0, 1.0, 0.0], [0.0, 1.0, 0.03], [0.0, 0.0, 5.0]])
    clusters = torch.tensor([0, 0, 0, 1])
    centroid, residual = granularity_parts(sem, clusters)
    norms = residual.norm(dim=-1)
    assert norms[2] < 0.05 * norms[0] and norms[3] == 0
    assert float(norms[:3].pow(2).mean().sqrt()) == pytest.approx(1.0)  # the common scale: unit RMS
    raw = sem[:3] - sem[:3].mean(0)
    assert torch.allclose(residual[:3] * raw.norm(dim=-1).pow(2).mean().sqrt(), raw)  # one factor for all
    unit = granularity_parts(sem, clusters, "unit")[1].norm(dim=-1)
    assert unit[2] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="residual_norm"):
        granularity_parts(sem, clusters, "l2")


def test_kmeans_separates_two_directions():
    rng = np.random.default_rng(0)
    x = np.vstack([[1, 0, 0] + 0.05 * rng.standard_normal((5, 3)), [0, 1, 0] + 0.05 * rng.standard_normal((5, 3))])
    labels = kmeans(x, 2, rng)
    assert len(set(labels[:5])) == 1 and len(set(labels[5:])) == 1 and labels[0] != labels[5]


def test_harmonic_mean():
    assert harmonic_mean(60.0, 40.0) == pytest.approx(48.0)
    assert harmonic_mean(0.0, 0.0) == 0.0


def test_invariance_penalty_pulls_intervened_weights_together():
    torch.manual_seed(0)
    sem = torch.nn.functional.normalize(torch.randn(4, 6), dim=-1)
    nuisance = torch.randn(1, 1, 6) * 0.5
    interventions = torch.stack([sem + nuisance[0], sem - nuisance[0]])
    feats = torch.nn.functional.normalize(torch.randn(40, 5), dim=-1)
    labels = torch.arange(4).repeat(10)
    clusters = torch.tensor([0, 0, 1, 1])
    drift = {}
    for weight in (0.0, 5.0):
        model = GranularityMap(6, 5)
        train_map(model, feats, labels, sem, clusters, torch.arange(4), interventions, steps=100, seed=0,
                  invariance=weight)
        with torch.no_grad():
            w = model.weights(sem, clusters)
            drift[weight] = float(((model.weights(interventions[0], clusters) - w) ** 2).sum() / (w**2).sum())
    assert drift[5.0] < 0.5 * drift[0.0]
