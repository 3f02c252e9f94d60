"""Declares the streaming-RL training family for ``launch.train`` (arcade envs × Stream Q / AC / SPR).

The training code lives in ``sim_benchmarks.training.streaming``; it is imported only when a run starts, so
listing suites does not pay for torch.
"""

from __future__ import annotations

from typing import Any

from sim_benchmarks.specs import Spec, TrainerSpec

AGENTS = {
    "stream_q": "Stream Q(λ): ε-greedy Q-learning with eligibility traces and ObGD, no replay",
    "stream_ac": "Stream AC(λ): online actor-critic, separate ObGD per network",
    "stream_spr": "Streaming SPR (K=5) on Stream Q(λ) with momentum + RL-orthogonal projections",
}


def _train(**kwargs: Any) -> dict[str, Any]:
    from sim_benchmarks.training.streaming import train

    return train(**kwargs)


def _env_names() -> list[str]:
    from envs.arcade import env_names

    return env_names()


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(TrainerSpec(
    name="streaming",
    env_prefixes=("minatar:", "atari:", "octax:"),
    agents=AGENTS,
    run=_train,
    env_names=_env_names,
))
