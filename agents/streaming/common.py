"""Pieces shared by the streaming learners: observation caching/normalisation, schedules, RNG state."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from policies.streaming.normalizers import ObservationNormalizer, RewardScaler


def linear_schedule(start: float, end: float, duration: int, t: int) -> float:
    """Linear interpolation from ``start`` to ``end`` over ``duration`` steps, then constant."""
    if duration <= 0:
        return end
    return start + (end - start) * min(t / duration, 1.0)


class ObservationPipe:
    """Normalises each *new* observation exactly once and remembers the latest one.

    The learner normalises ``next_obs`` inside ``observe``; the following ``act`` receives that same array and
    reuses the cached tensor (and whatever network outputs were computed for it) instead of normalising twice.
    """

    def __init__(self, obs_shape: tuple[int, ...], gamma: float) -> None:
        self.obs_norm = ObservationNormalizer(obs_shape)
        self.reward_scaler = RewardScaler(gamma)
        self._raw: Any = None
        self.tensor: torch.Tensor | None = None
        self.outputs: Any = None  # network outputs for ``tensor`` (pre-update), or None

    def push(self, obs: np.ndarray) -> torch.Tensor:
        self._raw = obs
        self.tensor = self.obs_norm(torch.from_numpy(np.asarray(obs)))
        self.outputs = None
        return self.tensor

    def adopt(self, obs: np.ndarray, tensor: torch.Tensor, outputs: Any) -> None:
        """Make ``tensor`` (``obs`` normalised by a compiled step through ``obs_norm.stats.next_sample``) and its
        network ``outputs`` the latest observation, as :meth:`push` would have."""
        self._raw, self.tensor, self.outputs = obs, tensor, outputs
        self.obs_norm.mark_updated()

    def get(self, obs: np.ndarray) -> tuple[torch.Tensor, bool]:
        """The normalised tensor for ``obs`` and whether it was already cached."""
        if obs is self._raw and self.tensor is not None:
            return self.tensor, True
        return self.push(obs), False

    def state_dict(self) -> dict:
        return {"obs_norm": self.obs_norm.state_dict(), "reward_scaler": self.reward_scaler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.obs_norm.load_state_dict(state["obs_norm"])
        self.reward_scaler.load_state_dict(state["reward_scaler"])
        self._raw, self.tensor, self.outputs = None, None, None


def make_rngs(seed: int) -> tuple[torch.Generator, np.random.Generator]:
    """Independent generators for weight init (torch) and action selection (numpy), both from ``seed``."""
    ss = np.random.SeedSequence([int(seed), 0x5EED])
    init_seed, act_ss = ss.spawn(2)
    gen = torch.Generator().manual_seed(int(init_seed.generate_state(1, np.uint64)[0] % (2**63)))
    return gen, np.random.default_rng(act_ss)


def flat_grad_norm(grads: list[torch.Tensor]) -> float:
    """L2 norm of a list of tensors as one vector."""
    return float(torch.stack(torch._foreach_norm(grads)).norm())
