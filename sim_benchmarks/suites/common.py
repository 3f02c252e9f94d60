"""The policies every suite offers: ``random``, the floor."""

from __future__ import annotations

from policies.base import RandomPolicy
from sim_benchmarks.specs import PolicySpec, Spec

SPECS: list[Spec] = [PolicySpec(
    name="random",
    description="uniform random actions from the env's action space (the floor)",
    factory=lambda ctx: RandomPolicy(ctx.env.action_space, seed=ctx.seed),
)]
