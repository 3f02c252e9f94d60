"""RobuQ building blocks: ternary (W1.58) weights, Hadamard-rotated low-bit activations, mixed activation bit-widths.

- Weights: absmean ternarisation ``W_q = γ·clip(round(W/γ), -1, 1)``, ``γ = mean|W|``, trained through a
  straight-through estimator (the forward pass sees ``W_q``, the gradient reaches the latent ``W``).
- Activations: per-token asymmetric uniform quantisation to ``b`` bits (``2^b`` levels between the token's min and
  max), also with a straight-through estimator.
- Rotation: with ``Q = diag(s)·H`` (``H`` the orthonormal Walsh–Hadamard matrix, ``s`` seeded random signs, so
  ``Q Qᵀ = I``), a linear layer computes ``y = x Wᵀ = (x Q)(W Q)ᵀ``; quantising the rotated activation ``x Q`` and
  the rotated weight ``W Q`` leaves the full-precision output unchanged while spreading outlier channels over all
  channels (lower kurtosis, lower quantisation error). The random signs matter: the plain Sylvester ``H`` has a
  constant first column, so it maps a token's mean (large after GELU) onto one coordinate, creating an outlier.
- AMPN: per-layer activation bit-widths chosen under an average-bit budget (weighted by how many activation
  values each layer quantises), minimising the summed per-layer error exactly (multiple-choice knapsack).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import nn


def hadamard(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Orthonormal Walsh–Hadamard matrix of size ``n`` (a power of two), Sylvester construction."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"Hadamard size must be a power of two, got {n}")
    h = torch.ones(1, 1, dtype=dtype)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / math.sqrt(n)


def ternary_absmean(weight: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """W1.58 weights with a straight-through gradient: values in ``{-γ, 0, γ}``, ``γ = mean|W|``."""
    gamma = weight.abs().mean().clamp_min(eps)
    q = (weight / gamma).round().clamp(-1, 1) * gamma
    return weight + (q - weight).detach()


def quantize_activations(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Per-token (last axis) asymmetric ``bits``-bit quantisation with a straight-through gradient."""
    if bits < 1:
        raise ValueError(f"activation bits must be >= 1, got {bits}")
    lo = x.amin(dim=-1, keepdim=True)
    hi = x.amax(dim=-1, keepdim=True)
    scale = ((hi - lo) / (2**bits - 1)).clamp_min(1e-8)
    q = ((x - lo) / scale).round().clamp(0, 2**bits - 1) * scale + lo
    return x + (q - x).detach()


def kurtosis(x: torch.Tensor) -> float:
    """Pearson kurtosis of all values of ``x`` (3 for a Gaussian; large when a few channels carry outliers)."""
    v = x.detach().double().ravel()
    c = v - v.mean()
    return float(c.pow(4).mean() / c.pow(2).mean().clamp_min(1e-30).pow(2))


def random_hadamard(n: int, seed: int) -> torch.Tensor:
    """Orthonormal ``diag(s)·H`` with seeded random signs ``s``."""
    signs = torch.randint(0, 2, (n,), generator=torch.Generator().manual_seed(seed)) * 2.0 - 1.0
    return signs[:, None] * hadamard(n)


def activation_quant_mse(x: torch.Tensor, bits: int, rotation: torch.Tensor | None = None) -> float:
    """Mean squared activation-quantisation error in the original basis (the rotation is orthonormal)."""
    x = x.detach().float()
    if rotation is None:
        return float((quantize_activations(x, bits) - x).pow(2).mean())
    xr = x @ rotation
    return float((quantize_activations(xr, bits) @ rotation.T - x).pow(2).mean())


class RobuQLinear(nn.Module):
    """A linear layer that can ternarise its weight, rotate its input and quantise the (rotated) input.

    The latent full-precision weight and bias are trained; quantisation happens on the fly in ``forward``.
    Settings are plain attributes so one model can be switched between FP, W1.58, W1.58A4, rotated, … .
    """

    def __init__(self, linear: nn.Linear, seed: int = 0) -> None:
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach().clone())
        self.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None
        self.register_buffer("h", random_hadamard(linear.in_features, seed), persistent=False)
        self.ternary = False
        self.rotate = False
        self.act_bits: int | None = None
        self.record = False
        self.last_input: torch.Tensor | None = None

    @property
    def in_features(self) -> int:
        return self.weight.shape[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x Wᵀ + b`` with the configured rotation and quantisers."""
        if self.record:
            self.last_input = x.detach()
        w = self.weight
        if self.rotate:
            x = x @ self.h
            w = w @ self.h
        if self.act_bits is not None:
            x = quantize_activations(x, self.act_bits)
        if self.ternary:
            w = ternary_absmean(w)
        return nn.functional.linear(x, w, self.bias)


def robuq_layers(model: nn.Module) -> dict[str, RobuQLinear]:
    """Every :class:`RobuQLinear` in ``model`` by its module name."""
    return {name: m for name, m in model.named_modules() if isinstance(m, RobuQLinear)}


def configure(model: nn.Module, ternary: bool, rotate: bool, act_bits: int | None | Mapping[str, int]) -> None:
    """Switch every RobuQ layer: ``act_bits`` is one width for all, None for full precision, or a per-layer map."""
    for name, layer in robuq_layers(model).items():
        layer.ternary, layer.rotate = ternary, rotate
        layer.act_bits = act_bits.get(name) if isinstance(act_bits, Mapping) else act_bits


def allocate_bits(errors: Mapping[str, Mapping[int, float]], sizes: Mapping[str, int], budget: float,
                  choices: Sequence[int] = (1, 2, 3, 4)) -> dict[str, int]:
    """AMPN: per-layer bit-widths minimising the summed error with size-weighted mean width ≤ ``budget``.

    ``errors[layer][bits]`` is that layer's (relative) quantisation error at ``bits``; ``sizes[layer]`` how many
    activation values it quantises per sample. Solved exactly as a multiple-choice knapsack by dynamic programming
    over the bit cost (in units of the sizes' greatest common divisor).
    """
    names = list(errors)
    unit = math.gcd(*(int(sizes[n]) for n in names))
    cap = int(math.floor(budget * sum(sizes[n] for n in names) / unit + 1e-9))
    if cap < min(choices) * sum(sizes[n] for n in names) // unit:
        raise ValueError(f"budget {budget} is below the smallest width {min(choices)}")
    # best[c] = (summed error, widths) over the layers so far at total cost exactly c.
    best: dict[int, tuple[float, tuple[int, ...]]] = {0: (0.0, ())}
    for name in names:
        nxt: dict[int, tuple[float, tuple[int, ...]]] = {}
        for cost, (err, widths) in best.items():
            for b in choices:
                c = cost + sizes[name] // unit * b
                if c > cap:
                    continue
                e = err + errors[name][b]
                if c not in nxt or e < nxt[c][0]:
                    nxt[c] = (e, (*widths, b))
        best = nxt
    _, widths = min(best.values(), key=lambda v: v[0])
    return dict(zip(names, widths, strict=True))
