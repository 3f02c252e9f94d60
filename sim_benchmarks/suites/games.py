"""Registers the ``games`` suite (repeated matrix games x opponents), its policies and the next-token trainer."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agents.repeated_game import games_episode_metrics, play_game
from envs.errors import ConfigError, choice_error
from envs.games import GAMES, TASKS, make_game, make_games_env
from envs.games.env import RepeatedGameEnv
from envs.games.opponents import MixtureOpponent
from policies.next_token.agents import BestResponseAgent, HedgeAgent, RobustAgent, WindowedRobustAgent
from policies.next_token.predictors import NGramPredictor
from sim_benchmarks.registry import (
    PolicyContext,
    PolicySpec,
    SuiteSpec,
    TrainerSpec,
    register_policy,
    register_suite,
    register_trainer,
)
from sim_benchmarks.train_log import TrainLog

SUITE = "games"


def _int_option(options: Mapping[str, Any], key: str, default: int, minimum: int = 1) -> int:
    value = options.get(key, default)
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"option {key} must be an integer >= {minimum}, got {value!r}") from None
    if out < minimum or out != float(value):
        raise ConfigError(f"option {key} must be an integer >= {minimum}, got {value!r}")
    return out


def make_env(task: str, options: Mapping[str, Any]) -> RepeatedGameEnv:
    """One episode = ``rounds`` (default 1000) rounds of the task's game against its opponent."""
    return make_games_env(task, rounds=_int_option(options, "rounds", 1000),
                          game_seed=_int_option(options, "game_seed", 0, minimum=0))


register_suite(SuiteSpec(
    name=SUITE,
    description="repeated matrix games (RPS, matching pennies, random 3x3) against patterned and adaptive opponents",
    tasks=TASKS,
    make_env=make_env,
    default_policies=("hedge", "best_response", "robust"),
    default_episodes=10,
    episode_metrics=games_episode_metrics,
))


def _n_opponent(ctx: PolicyContext) -> int:
    return int(ctx.env.unwrapped.game.n_opponent)


def _transformer_predictor(ctx: PolicyContext):
    from policies.next_token.pretrained import default_model
    from policies.next_token.transformer import TransformerPredictor

    return TransformerPredictor(default_model(_n_opponent(ctx)))


def _explicit(ctx: PolicyContext):
    from policies.next_token.explicit_layers import ExplicitRobustAgent

    return ExplicitRobustAgent(_transformer_predictor(ctx), tau=ctx.options.get("tau", "delta"))


POLICIES: dict[str, tuple[str, Callable[[PolicyContext], Any]]] = {
    "hedge": ("Hedge (exponential weights), eta = sqrt(8 ln K / T)", lambda ctx: HedgeAgent()),
    "best_response": ("pure best response to a back-off 3-gram next-token model (exploitable)",
                      lambda ctx: BestResponseAgent(NGramPredictor())),
    "robust": ("3-gram best response robustified: switch to Hedge once regret > sqrt(2T ln(K/0.05))",
               lambda ctx: RobustAgent(NGramPredictor(), tau="delta")),
    "robust_exp": ("3-gram best response robustified with tau = T^(2/3) (exponentially small TV)",
                   lambda ctx: RobustAgent(NGramPredictor(), tau="exp")),
    "windowed_robust": ("bounded-context robustification (window from options['window'], default 100)",
                        lambda ctx: WindowedRobustAgent(NGramPredictor(window=_int_option(ctx.options, "window", 100)),
                                                        window=_int_option(ctx.options, "window", 100))),
    "best_response_transformer": ("pure best response to the causal transformer trained on D",
                                  lambda ctx: BestResponseAgent(_transformer_predictor(ctx))),
    "robust_transformer": ("transformer + the robustification as explicit-weight transformer layers", _explicit),
}

POLICY_OPTIONS: dict[str, tuple[str, ...]] = {"windowed_robust": ("window",), "robust_transformer": ("tau",)}

for _name, (_desc, _factory) in POLICIES.items():
    register_policy(PolicySpec(name=_name, description=_desc, factory=_factory, suites=(SUITE,),
                               options=POLICY_OPTIONS.get(_name, ())))


# ---------------------------------------------------------------------------------------------- training
def _game_of(env: str) -> str:
    name = env.split(":", 1)[1] if ":" in env else env
    if name in TASKS:
        for g in sorted(GAMES, key=len, reverse=True):
            if name.startswith(g + "_"):
                return g
    if name in GAMES or (name.startswith("random") and "x" in name):
        return name
    raise choice_error("games env", env, [f"games:{g}" for g in GAMES] + [f"games:{t}" for t in TASKS])


def run_training(*, env: str, agent: str, steps: int, seed: int, out_dir: Path, resume: bool = False,
                 options: Mapping[str, Any] | None = None,
                 on_progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Train the causal next-token transformer on sequences from D for the env's game; write the train contract."""
    import torch

    from policies.next_token.transformer import (
        CausalTransformer,
        TrainConfig,
        TransformerConfig,
        TransformerPredictor,
        save_model,
        train_next_token,
    )

    if agent != "next_token":
        raise choice_error("games agent", agent, ["next_token"])
    options = dict(options or {})
    steps = int(steps)
    if steps < 1:
        raise ConfigError(f"steps must be a positive integer, got {steps!r}")
    game = make_game(_game_of(env), _int_option(options, "game_seed", 0, minimum=0))
    torch.set_num_threads(1)
    cfg = TransformerConfig(n_actions=game.n_opponent, context=_int_option(options, "context", 32, minimum=2),
                            d_model=_int_option(options, "d_model", 32), n_layers=_int_option(options, "n_layers", 2))
    tcfg = TrainConfig(steps=steps, batch=_int_option(options, "batch", 64),
                       log_every=_int_option(options, "log_every", 20),
                       sequences=_int_option(options, "sequences", 2000),
                       seq_len=max(96, cfg.context + 1))
    out_dir = Path(out_dir)
    state_path = out_dir / "train_state.pt"
    log = TrainLog(out_dir, resume=resume)
    start = None
    if resume and state_path.exists():
        try:
            blob = torch.load(state_path, map_location="cpu", weights_only=True)
            model = CausalTransformer(cfg)
            model.load_state_dict(blob["model"])
            opt = torch.optim.AdamW(model.parameters(), lr=tcfg.lr, weight_decay=0.01)
            opt.load_state_dict(blob["opt"])
        except Exception as exc:
            raise ConfigError(f"cannot resume from {state_path}: {type(exc).__name__}: {exc}") from exc
        start = (model, opt, int(blob["step"]))
        log.truncate_after(int(blob["step"]))

    def checkpoint(model, opt, step: int) -> None:
        tmp = state_path.with_name(state_path.name + ".tmp")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
        tmp.replace(state_path)

    t0 = time.perf_counter()
    done_before = start[2] if start else 0
    model, losses = train_next_token(cfg, tcfg, seed=int(seed), on_log=log.append, on_progress=on_progress,
                                     start=start, on_checkpoint=checkpoint)
    train_s = time.perf_counter() - t0
    digest = save_model(model, out_dir / "model.pt", extra={"env": env, "steps": steps, "seed": int(seed)})
    # Evaluation: best response to the trained model on fresh D episodes (default 20) of 200 rounds.
    returns, avg_regrets = [], []
    for ep in range(_int_option(options, "eval_episodes", 20)):
        game_env = RepeatedGameEnv(game, MixtureOpponent(), rounds=200, opponent_name="D")
        traj = play_game(game_env, BestResponseAgent(TransformerPredictor(model)),
                         env_seed=10_000 + int(seed) * 100 + ep)
        returns.append(traj.total_payoff)
        avg_regrets.append(traj.avg_regret)
    records = log.records()
    summary = log.write_summary({
        "env": env, "agent": agent, "steps": steps, "seed": int(seed),
        "return_last100": float(np.mean(returns[-100:])),
        "eval_avg_regret_D": float(np.mean(avg_regrets)),
        "final_loss": float(records[-1]["loss"]) if records else float("nan"),
        "entropy_floor_uniform": math.log(game.n_opponent),
        "steps_per_second": (steps - done_before) / max(train_s, 1e-9),
        "wall_s": time.perf_counter() - t0,
        "checkpoint": str(out_dir / "model.pt"), "sha256": digest,
        "config": {"model": cfg.__dict__, "train": tcfg.__dict__},
    })
    log.close()
    return summary


register_trainer(TrainerSpec(
    name=SUITE,
    env_prefixes=("games:",),
    agents={"next_token": "causal transformer trained on opponent sequences from D (next-action cross-entropy)"},
    run=run_training,
    env_names=lambda: [f"games:{g}" for g in GAMES] + [f"games:{t}" for t in TASKS],
))
