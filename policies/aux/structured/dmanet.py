"""DMANet: multiscale forecasting with anti-aliased downsampling in the frequency domain.

Pipeline: RevIN (per-instance, per-channel normalisation with a learned affine) → per-channel embedding of each
coarse series → per scale a head predicting the coarse future → back to the horizon → a learned fusion of the scales
→ RevIN inverse. The method's point is how a scale is made and undone:

- *anti-aliased* (``DMANet``): rFFT of the input; bins below the new Nyquist (``L / 2k``) are the low band, bins above
  it the high band; the pre-sampling filter keeps ``low + a * high`` with a learned per-scale mix ``a = sigmoid(w)``
  (initialised near 0, so the filter starts as an ideal low-pass), then the spectrum is truncated to the coarse
  length (decimation in the frequency domain, which is exactly where the kept high band would fold). The coarse
  forecast is brought back to the horizon by post-sampling interpolation: zero-padding its spectrum.
- *plain* (the ablation): strided decimation ``x[::k]`` (everything above the new Nyquist folds) and
  nearest-neighbour repetition back up.

Channels are independent (shared weights), as in most linear-style forecasters.
"""

from __future__ import annotations

import torch
from torch import nn


class RevIN(nn.Module):
    """Reversible instance normalisation: per window and channel, subtract the mean and divide by the std."""

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def normalise(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``x`` [B, L, C] → normalised x and the (mean, std) needed to undo it."""
        mean = x.mean(dim=1, keepdim=True)
        std = torch.sqrt(x.var(dim=1, keepdim=True, unbiased=False) + self.eps)
        return (x - mean) / std * self.weight + self.bias, (mean, std)

    def denormalise(self, y: torch.Tensor, stats: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Undo :meth:`normalise` on a forecast ``y`` [B, H, C]."""
        mean, std = stats
        return (y - self.bias) / (self.weight + self.eps * 1e-3) * std + mean


def spectral_downsample(x: torch.Tensor, factor: int, high_mix: torch.Tensor | float = 0.0) -> torch.Tensor:
    """Anti-aliased decimation along the last axis: keep ``low + high_mix * high`` around the new Nyquist, then fold.

    ``x`` [..., L] with ``L`` divisible by ``factor``. The kept high band is folded onto the coarse grid exactly as
    strided decimation would fold it, so ``high_mix = 1`` reproduces ``x[..., ::factor]`` and ``high_mix = 0`` is an
    ideal low-pass followed by decimation.
    """
    length = x.shape[-1]
    if factor == 1:
        return x
    spec = torch.fft.rfft(x, dim=-1)
    cutoff = length // (2 * factor)  # the new Nyquist bin
    bins = torch.arange(spec.shape[-1], device=x.device)
    gain = torch.where(bins <= cutoff, torch.ones_like(bins, dtype=x.dtype), torch.zeros_like(bins, dtype=x.dtype))
    gain = gain + (1 - gain) * high_mix
    filtered = torch.fft.irfft(spec * gain, n=length, dim=-1)
    return filtered[..., ::factor]


def spectral_upsample(y: torch.Tensor, length: int) -> torch.Tensor:
    """Band-limited interpolation of ``y`` [..., M] to ``length`` samples by zero-padding its spectrum."""
    short = y.shape[-1]
    if short == length:
        return y
    spec = torch.fft.rfft(y, dim=-1)
    padded = torch.zeros(*spec.shape[:-1], length // 2 + 1, dtype=spec.dtype, device=y.device)
    keep = min(spec.shape[-1], padded.shape[-1])
    padded[..., :keep] = spec[..., :keep]
    if short % 2 == 0 and keep == short // 2 + 1:
        padded[..., keep - 1] *= 0.5  # split the old Nyquist bin between its two mirror images
    return torch.fft.irfft(padded, n=length, dim=-1) * (length / short)


def folded_energy(x: torch.Tensor, factor: int, high_mix: float) -> torch.Tensor:
    """Share of a window's (mean-removed) energy that folds into a ``factor``-coarse branch: the kept high band."""
    spec = torch.fft.rfft(x - x.mean(dim=-1, keepdim=True), dim=-1)
    power = spec.abs() ** 2
    cutoff = x.shape[-1] // (2 * factor)
    high = power[..., cutoff + 1:].sum(dim=-1) * high_mix**2
    return high / power.sum(dim=-1).clamp_min(1e-12)


class DMANet(nn.Module):
    """Multiscale forecaster; ``anti_alias=False`` gives the plain-downsampling ablation with the same parameters.

    Args:
        channels: number of input series C.
        lookback: input length L (divisible by every factor).
        horizon: forecast length H (divisible by every factor).
        factors: downsampling factor of each scale (1 = the full-resolution scale).
        embed: per-channel embedding width of each scale's head.
        anti_alias: frequency-domain filtering and interpolation (DMANet) or strided decimation and repetition.
    """

    def __init__(self, channels: int, lookback: int = 96, horizon: int = 96, factors: tuple[int, ...] = (1, 2, 4),
                 embed: int = 64, anti_alias: bool = True) -> None:
        super().__init__()
        if any(lookback % f or horizon % f for f in factors):
            raise ValueError(f"lookback {lookback} and horizon {horizon} must be divisible by every factor {factors}")
        self.lookback, self.horizon, self.factors, self.anti_alias = lookback, horizon, tuple(factors), anti_alias
        self.revin = RevIN(channels)
        # One embedding + head per scale, shared across channels (channel independence).
        self.embeds = nn.ModuleList(nn.Linear(lookback // f, embed) for f in factors)
        self.heads = nn.ModuleList(nn.Linear(embed, horizon // f) for f in factors)
        self.act = nn.GELU()
        # Pre-sampling high-band mix a = sigmoid(w): starts at ~0.05 (near-ideal low-pass) and is learned.
        self.mix_logit = nn.Parameter(torch.full((len(factors),), -3.0))
        self.fusion = nn.Parameter(torch.zeros(len(factors)))

    def high_mix(self) -> torch.Tensor:
        """The learned pre-sampling mix of the high band per scale (1.0 for every scale in the plain ablation)."""
        if not self.anti_alias:
            return torch.ones(len(self.factors))
        return torch.sigmoid(self.mix_logit)

    def downsample(self, x: torch.Tensor, scale: int) -> torch.Tensor:
        """``x`` [B, C, L] → the coarse series of scale index ``scale``."""
        factor = self.factors[scale]
        if self.anti_alias:
            return spectral_downsample(x, factor, torch.sigmoid(self.mix_logit[scale]))
        return x[..., ::factor]

    def upsample(self, y: torch.Tensor, scale: int) -> torch.Tensor:
        """A coarse forecast [B, C, H/k] → [B, C, H]."""
        factor = self.factors[scale]
        if self.anti_alias:
            return spectral_upsample(y, self.horizon)
        return y.repeat_interleave(factor, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [B, L, C] → forecast [B, H, C]."""
        z, stats = self.revin.normalise(x)
        z = z.transpose(1, 2)  # [B, C, L]
        weights = torch.softmax(self.fusion, dim=0)
        out = torch.zeros(z.shape[0], z.shape[1], self.horizon, dtype=z.dtype)
        for s in range(len(self.factors)):
            coarse = self.downsample(z, s)
            pred = self.heads[s](self.act(self.embeds[s](coarse)))
            out = out + weights[s] * self.upsample(pred, s)
        return self.revin.denormalise(out.transpose(1, 2), stats)


class LinearForecaster(nn.Module):
    """The linear baseline: RevIN + one shared linear map from lookback to horizon per channel."""

    def __init__(self, channels: int, lookback: int = 96, horizon: int = 96) -> None:
        super().__init__()
        self.revin = RevIN(channels)
        self.linear = nn.Linear(lookback, horizon)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [B, L, C] → forecast [B, H, C]."""
        z, stats = self.revin.normalise(x)
        return self.revin.denormalise(self.linear(z.transpose(1, 2)).transpose(1, 2), stats)

