"""Running observation normaliser and discounted-return reward scaler used by every streaming agent."""

from __future__ import annotations

import numpy as np
import torch

from policies.streaming.kernels import welford_normalize_


class RunningMeanStd:
    """Per-element running mean and sample variance (Welford); var is 1 until two samples were seen."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.count = 0
        self.mean = torch.zeros(shape, dtype=torch.float64)
        self.m2 = torch.zeros(shape, dtype=torch.float64)  # float64 so millions of updates do not drift
        self._shape = tuple(shape)
        self._mean_np = self.mean.numpy().reshape(-1)  # views: loads copy_ into the tensors, so they stay valid
        self._m2_np = self.m2.numpy().reshape(-1)

    def update(self, x: torch.Tensor) -> None:
        """Add one sample."""
        self.update_and_normalize(x, 1e-8)

    def update_and_normalize(self, x: torch.Tensor, eps: float) -> torch.Tensor:
        """Add one sample, then return it as (x − mean)/√(var + ε) in float32: one fused pass (the kernel)."""
        if tuple(x.shape) != self._shape:
            raise ValueError(f"observation shape {tuple(x.shape)} != normaliser shape {self._shape}")
        x_np = np.ascontiguousarray(x.detach().cpu().numpy()).reshape(-1)
        if x_np.dtype == np.bool_:
            x_np = x_np.view(np.uint8)  # the same 0/1 values, without a conversion pass
        self.count += 1
        out = torch.empty(self._shape, dtype=torch.float32)
        welford_normalize_(x_np, self.count, self._mean_np, self._m2_np, eps, out.numpy().reshape(-1))
        return out

    def next_sample(self) -> tuple[int, np.ndarray, np.ndarray]:
        """Count one more sample and return (count, mean, M2) as flat numpy views, for a compiled caller that
        applies ``welford_normalize_`` itself (as :meth:`update_and_normalize` does)."""
        self.count += 1
        return self.count, self._mean_np, self._m2_np

    @property
    def var(self) -> torch.Tensor:
        if self.count < 2:
            return torch.ones_like(self.mean)
        return self.m2 / (self.count - 1)

    def state_dict(self) -> dict:
        return {"count": self.count, "mean": self.mean.clone(), "m2": self.m2.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.count = int(state["count"])
        self.mean.copy_(state["mean"])
        self.m2.copy_(state["m2"])


class ObservationNormalizer:
    """Updates running statistics with each observation, then returns (x − mean)/√(var + ε) as float32."""

    def __init__(self, shape: tuple[int, ...], eps: float = 1e-8) -> None:
        self.stats = RunningMeanStd(shape)
        self.eps = eps
        self._mean32 = torch.zeros(shape)
        self._inv_std32 = torch.ones(shape)
        self._stale = False  # the float32 mean / inverse std lag the stats (refreshed only when needed)

    def __call__(self, obs: torch.Tensor, update: bool = True) -> torch.Tensor:
        if update:
            return self._update_and_normalize(obs)
        if self._stale:
            self._refresh()
        return (obs.float() - self._mean32) * self._inv_std32

    def _update_and_normalize(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.stats.update_and_normalize(obs, self.eps)
        self._stale = True
        return out

    def mark_updated(self) -> None:
        """The statistics changed outside :meth:`__call__` (``stats.next_sample``): refresh before the next
        non-updating call."""
        self._stale = True

    def _refresh(self) -> None:
        self._mean32 = self.stats.mean.float()
        self._inv_std32 = (self.stats.var + self.eps).rsqrt().float()
        self._stale = False

    def state_dict(self) -> dict:
        return self.stats.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.stats.load_state_dict(state)
        self._refresh()


class RewardScaler:
    """Divides rewards by the running std of the discounted return trace u ← γ(1−done)u + r (not centred)."""

    def __init__(self, gamma: float = 0.99, eps: float = 1e-8) -> None:
        self.gamma, self.eps = float(gamma), float(eps)
        self.u = 0.0
        self.count = 0
        self.mean = 0.0
        self.m2 = 0.0

    def __call__(self, reward: float, done: bool) -> float:
        # The formula as written in Stream-x (and gymnasium's NormalizeReward): done multiplies the old trace.
        self.u = self.gamma * (1.0 - float(done)) * self.u + float(reward)
        self.count += 1
        delta = self.u - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (self.u - self.mean)
        var = self.m2 / (self.count - 1) if self.count >= 2 else 1.0
        return float(reward) / (var + self.eps) ** 0.5

    def state_dict(self) -> dict:
        return {"u": self.u, "count": self.count, "mean": self.mean, "m2": self.m2}

    def load_state_dict(self, state: dict) -> None:
        self.u, self.count = float(state["u"]), int(state["count"])
        self.mean, self.m2 = float(state["mean"]), float(state["m2"])
