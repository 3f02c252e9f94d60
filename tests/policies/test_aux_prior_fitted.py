"""Prior-fitted transformer: the attention mask keeps test rows apart, the SCM prior is shaped and seeded, training
is reproducible, bad inputs are refused."""

import numpy as np
import pytest
import torch

from policies.aux.structured.prior_fitted import (
    ModelConfig,
    PriorConfig,
    TrainConfig,
    build_model,
    predict_proba,
    prepare_features,
    sample_batch,
    sample_task,
    train_prior_fitted,
)

SMALL = {"d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 64}


def table(seed: int, n_train: int = 30, n_test: int = 12, f: int = 7, k: int = 3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_train, f)), rng.integers(0, k, n_train), rng.standard_normal((n_test, f))


def test_changing_one_test_row_leaves_the_other_test_predictions_unchanged():
    model = build_model(SMALL, seed=1)
    xtr, ytr, xte = table(0)
    before = predict_proba(model, xtr, ytr, xte, n_classes=3)
    changed = xte.copy()
    changed[4] = 25.0
    after = predict_proba(model, xtr, ytr, changed, n_classes=3)
    others = np.arange(len(xte)) != 4
    np.testing.assert_allclose(after[others], before[others], atol=1e-6)
    assert not np.allclose(after[4], before[4])  # the changed row itself is seen by the model


def test_a_test_row_predicted_alone_or_with_others_gets_the_same_probabilities():
    model = build_model(SMALL, seed=2)
    xtr, ytr, xte = table(1)
    together = predict_proba(model, xtr, ytr, xte, n_classes=3)
    alone = np.concatenate([predict_proba(model, xtr, ytr, xte[i:i + 1], n_classes=3) for i in range(len(xte))])
    np.testing.assert_allclose(alone, together, atol=1e-6)


def test_test_rows_never_change_the_training_rows_hidden_states():
    model = build_model(SMALL, seed=3).eval()
    seen = []
    model.blocks[-1].register_forward_hook(lambda _m, _i, out: seen.append(out[:, :20].clone()))
    rng = np.random.default_rng(4)
    y = torch.from_numpy(rng.integers(0, 4, (1, 20)))
    x = torch.from_numpy(rng.standard_normal((1, 30, 64)).astype(np.float32))
    with torch.no_grad():
        model(x, y, 4)
        x[:, 20:] = torch.from_numpy(rng.standard_normal((1, 10, 64)).astype(np.float32)) * 5
        model(x, y, 4)
        x[:, 3] += 1.0  # a training row does change them (the check can fail)
        model(x, y, 4)
    assert torch.equal(seen[0], seen[1])
    assert not torch.allclose(seen[1], seen[2])


def test_training_rows_and_labels_steer_the_prediction():
    model = build_model(SMALL, seed=5)
    xtr, ytr, xte = table(6)
    base = predict_proba(model, xtr, ytr, xte, n_classes=3)
    assert not np.allclose(predict_proba(model, xtr, (ytr + 1) % 3, xte, n_classes=3), base)


def test_probabilities_sum_to_one_over_exactly_k_classes_and_chunking_covers_many_test_rows():
    model = build_model(SMALL, seed=7)
    xtr, ytr, xte = table(8, n_test=250, k=5)
    proba = predict_proba(model, xtr, ytr, xte, n_classes=5)
    assert proba.shape == (250, 5)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-5)


def test_bad_inputs_are_refused_with_the_valid_range():
    model = build_model(SMALL, seed=0)
    xtr, ytr, xte = table(9)
    with pytest.raises(ValueError, match="at most 64 features"):
        prepare_features(np.zeros((5, 65)), np.zeros((2, 65)), 64)
    with pytest.raises(ValueError, match="0..k-1"):
        predict_proba(model, xtr, ytr + 5, xte, n_classes=3)
    with pytest.raises(ValueError, match="1 to 100 training rows"):
        predict_proba(model, np.zeros((101, 3)), np.arange(101) % 2, xte[:, :3])


def test_prepare_features_standardises_by_training_rows_and_scales_by_feature_count():
    rng = np.random.default_rng(10)
    xtr, xte = rng.normal(5.0, 3.0, (50, 16)), rng.normal(5.0, 3.0, (9, 16))
    ztr, zte = prepare_features(xtr, xte, 64)
    assert ztr.shape == (50, 64) and zte.shape == (9, 64)
    np.testing.assert_allclose(ztr[:, :16].mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(ztr[:, :16].std(0), 2.0, atol=1e-4)  # sqrt(64 / 16)
    assert not ztr[:, 16:].any() and not zte[:, 16:].any()


@pytest.mark.parametrize("f,k", [(2, 2), (20, 7), (64, 10)])
def test_the_prior_gives_tables_of_the_asked_shape_and_every_class(f, k):
    x, y = sample_task(np.random.default_rng(f), 140, f, k)
    assert x.shape == (140, f) and x.dtype == np.float32 and y.shape == (140,)
    assert np.isfinite(x).all()
    assert set(np.unique(y)) == set(range(k))  # each class holds at least half its even share of rows


def test_the_prior_is_deterministic_by_seed():
    a = sample_batch(np.random.default_rng(3), 4)
    b = sample_batch(np.random.default_rng(3), 4)
    c = sample_batch(np.random.default_rng(4), 4)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2:] == b[2:]
    assert a[0].shape != c[0].shape or not np.array_equal(a[0], c[0])
    x, y, n_train, f, k = a
    cfg = PriorConfig()
    assert x.shape == (4, n_train + cfg.n_test, f) and y.shape == (4, n_train + cfg.n_test)
    assert cfg.min_train <= n_train <= cfg.max_train and 2 <= k <= cfg.max_classes and y.max() < k


def test_training_is_reproducible_by_seed_and_leaves_global_rng_alone():
    cfg = ModelConfig(**SMALL)
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a, losses_a = train_prior_fitted(cfg, TrainConfig(steps=3, batch=2, warmup=1, seed=11))
    assert torch.equal(torch.rand(1), expected_next)
    b, losses_b = train_prior_fitted(cfg, TrainConfig(steps=3, batch=2, warmup=1, seed=11))
    assert losses_a == losses_b and all(np.isfinite(losses_a))
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(pa, pb), name
