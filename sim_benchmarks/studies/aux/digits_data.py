"""scikit-learn's bundled 8×8 handwritten digits (1,797 images, offline) as seeded, stratified torch splits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class DigitsSplit:
    """Train/test tensors: ``x`` float32 (n, 64) scaled to [0, 1] (or [-1, 1] with ``signed``), ``y`` int64 (n,)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_digits_split(seed: int, test_fraction: float = 0.3, signed: bool = False) -> DigitsSplit:
    """A per-class stratified split of the digits; the same seed gives the same split."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = data.data.astype(np.float32) / 16.0
    if signed:
        x = 2.0 * x - 1.0
    y = data.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    test_idx: list[np.ndarray] = []
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(y == c))
        test_idx.append(idx[: int(round(test_fraction * idx.size))])
    test = np.zeros(y.size, dtype=bool)
    test[np.concatenate(test_idx)] = True
    tr, te = rng.permutation(np.flatnonzero(~test)), np.flatnonzero(test)
    return DigitsSplit(
        torch.from_numpy(x[tr]), torch.from_numpy(y[tr]), torch.from_numpy(x[te]), torch.from_numpy(y[te])
    )
