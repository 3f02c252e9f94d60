"""Closed-loop evaluation of a trained generic policy on the generic tasks it learnt (the generic VLA's check).

Each task runs ``episodes`` seeded episodes (env seed ``10000 * (seed + 1) + episode``, so they never meet a
demonstration's seeds) and reports success, correct-object and correct-among-successes rates, with their mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agents.episodic import run_episode
from agents.manipulation.vlabench_demonstrations import GENERIC_TRACK
from envs.manipulation.env import make_env
from policies.base import Policy
from sim_benchmarks.progress import progress_bar


def evaluate(policy: Policy, tasks: list[str], episodes: int, seed: int, split: str = "test",
             suite: str = "personalized_simpler") -> dict[str, Any]:
    """Closed-loop success / correct-object rates per generic task on ``split`` instances.

    On ``personalized_vlabench`` the generic track (train designs; unseen seeds) is the only one a generic
    policy can be asked about without a personal object, so ``split`` is not used there.
    """
    out: dict[str, Any] = {}
    total = max(1, episodes * len(tasks))
    label = split if suite == "personalized_simpler" else GENERIC_TRACK
    with progress_bar(total, f"closed-loop eval ({label})") as advance:
        for task in tasks:
            actor = policy
            if suite == "personalized_simpler":
                env = make_env(task, {"split": split})
                metrics = None
            else:  # MuJoCo (the vlabench extra) only when asked for
                from envs.manipulation.vlabench.env import episode_metrics as vlabench_metrics
                from envs.manipulation.vlabench.env import make_env as make_vlabench_env

                hand = getattr(policy, "action_frame", "command") == "hand"
                env = make_vlabench_env(task, {"track": GENERIC_TRACK, "action_mode": "absolute" if hand else "delta",
                                               "cameras": ("front",), "references": False})
                metrics = vlabench_metrics
                if hand:  # hand-frame deltas are added to the measured hand, which the env's delta mode does not do
                    from policies.manipulation.delta_adapter import DeltaToAbsolute

                    # a new adapter per task around the policy itself: wrapping the previous task's adapter would
                    # integrate its absolute targets as if they were deltas
                    actor = DeltaToAbsolute(policy)
            succ = correct = any_ok = 0
            for ep in range(episodes):
                res = run_episode(env, actor, env_seed=10_000 * (seed + 1) + ep, policy_seed=ep,
                                  episode_metrics=metrics)
                succ += res.metrics["success"]
                correct += res.metrics["success"] and res.metrics["correct_object"]
                any_ok += res.metrics["correct_object"]
                advance(1)
            env.close()
            out[task] = {"episodes": episodes, "success_rate": succ / max(1, episodes),
                         "correct_among_successes": correct / max(1, succ) if succ else None,
                         "correct_object_rate": any_ok / max(1, episodes)}
    rates = [v["success_rate"] for v in out.values()]
    out["mean_success_rate"] = float(np.mean(rates)) if rates else 0.0
    return out
