"""The harness's demo suite on gymnasium's CartPole (``random``, offered for every suite, is in ``common``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from envs.config import Options, require
from policies.classic_control import CartPoleBalancer
from sim_benchmarks.specs import PolicyContext, PolicySpec, Spec, SuiteSpec

CARTPOLE_STEPS = 200


@dataclass(frozen=True)
class CartPoleOptions(Options):
    """``--env-option`` keys of the classic_control suite."""

    title = "classic_control env"
    max_steps: int = field(default=CARTPOLE_STEPS, metadata={"help": "episode length cap"})

    def check(self) -> None:
        require(1 <= self.max_steps <= 100_000, f"max_steps must be in [1, 100000], got {self.max_steps}")


def _make_env(task: str, options: Mapping[str, Any]) -> gym.Env:
    opts = CartPoleOptions.from_options(options)
    return gym.make("CartPole-v1", max_episode_steps=opts.max_steps, render_mode="rgb_array")


def _metrics(info: dict[str, Any], total_return: float, steps: int) -> dict[str, Any]:
    # Success: the pole stayed up for the whole (truncated) episode.
    return {"success": total_return >= CARTPOLE_STEPS, "correct_object": False, "wrong_object": False,
            "return": float(total_return)}


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(SuiteSpec(
    name="classic_control",
    description="gymnasium CartPole-v1 (200 steps): the harness's own demo and test suite",
    tasks={"cartpole": "balance the pole for 200 steps (success = return 200)"},
    make_env=_make_env,
    default_policies=("balancer", "random"),
    default_episodes=20,
    episode_metrics=_metrics,
    options_type=CartPoleOptions,
))



def _balancer(ctx: PolicyContext) -> CartPoleBalancer:
    return CartPoleBalancer()


SPECS.append(PolicySpec(
    name="balancer",
    description="scripted PD controller on pole angle (CartPole only)",
    factory=_balancer,
    suites=("classic_control",),
))
