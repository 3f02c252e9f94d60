"""Scripted controllers for gymnasium's classic-control tasks (the harness's own demo suite)."""

from __future__ import annotations

from typing import Any

import numpy as np


class CartPoleBalancer:
    """A PD controller on pole angle and angular velocity plus a weak cart-centring term: balances CartPole."""

    def __init__(self, k_angle: float = 10.0, k_rate: float = 1.0, k_pos: float = 0.1, k_vel: float = 0.3) -> None:
        self.gains = np.array([k_pos, k_vel, k_angle, k_rate])

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        pass

    def act(self, obs: np.ndarray) -> int:
        # Push the cart towards the side the pole is falling to.
        return int(float(np.dot(self.gains, obs)) > 0.0)
