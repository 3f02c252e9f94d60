"""Visual tokens at several resolutions from the frozen offline MobileNetV2.

An image becomes a 7x7 grid of feature vectors (mid-level block-14 features, which keep colour and texture,
concatenated with the final 1280-d block), reduced by a PCA fitted on the corpus. Coarser token grids (4x4, 2x2,
1x1) are average pools of that grid, so a reader given ``g*g`` tokens really sees ``g*g`` vectors.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

GRID_LEVELS: tuple[int, ...] = (0, 1, 2, 4, 7)  # tokens per image = g * g; 0 = the image is dropped
FULL_GRID = 7


def level_tokens(g: int) -> int:
    """How many visual tokens a ``g x g`` grid costs."""
    return int(g) * int(g)


@torch.no_grad()
def feature_grid(images: np.ndarray, batch: int = 32) -> np.ndarray:
    """N x 7 x 7 x 1376 float32 grid features of uint8 N x H x W x 3 images (input resized to 224)."""
    from perception.mobilenet_v2 import load_mobilenet_v2, to_input

    net = load_mobilenet_v2()
    out = []
    for i in range(0, len(images), batch):
        x = to_input(images[i:i + batch], 224)
        mid = net.features[:14](x)  # 96 channels, 14 x 14
        top = net.features[14:](mid)  # 1280 channels, 7 x 7
        mid = F.adaptive_avg_pool2d(mid, FULL_GRID)
        out.append(torch.cat([mid, top], dim=1).permute(0, 2, 3, 1).float().numpy())
    return np.concatenate(out) if out else np.zeros((0, FULL_GRID, FULL_GRID, 1376), np.float32)


def fit_projection(grids: np.ndarray, dim: int = 64, max_rows: int = 20000, seed: int = 0) -> dict[str, np.ndarray]:
    """PCA of standardised grid cells: ``{"mean", "scale", "components"}`` (components: C x dim)."""
    cells = grids.reshape(-1, grids.shape[-1])
    rng = np.random.default_rng(seed)
    if len(cells) > max_rows:  # sampled before the float64 copy: a corpus' cells would take over a gigabyte
        cells = cells[rng.choice(len(cells), max_rows, replace=False)]
    cells = cells.astype(np.float64)
    mean = cells.mean(0)
    scale = cells.std(0) + 1e-3  # the 96 mid-level channels would otherwise be swamped by the 1280
    z = (cells - mean) / scale
    _, _, vt = np.linalg.svd(z - z.mean(0), full_matrices=False)
    comps = vt[:dim].T
    proj_std = (z @ comps).std(0) + 1e-6
    return {"mean": mean.astype(np.float32), "scale": scale.astype(np.float32),
            "components": (comps / proj_std).astype(np.float32)}


def project_grid(grids: np.ndarray, projection: dict[str, np.ndarray]) -> np.ndarray:
    """Apply :func:`fit_projection`'s PCA to N x 7 x 7 x C grids → N x 7 x 7 x dim float32 (unit-variance axes)."""
    z = (grids - projection["mean"]) / projection["scale"]
    return (z @ projection["components"]).astype(np.float32)


def pooled_levels(grid: np.ndarray) -> dict[int, np.ndarray]:
    """Every token level of N x 7 x 7 x D grids: ``{g: N x g*g x D}`` for g in GRID_LEVELS (g > 0)."""
    x = torch.from_numpy(np.ascontiguousarray(grid)).permute(0, 3, 1, 2)
    out = {}
    for g in GRID_LEVELS:
        if g == 0:
            continue
        pooled = F.adaptive_avg_pool2d(x, g)
        out[g] = pooled.permute(0, 2, 3, 1).reshape(len(grid), g * g, -1).numpy().astype(np.float16)
    return out
