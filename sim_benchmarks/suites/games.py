"""Declares the ``games`` suite (repeated matrix games x opponents), its policies and the next-token trainer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agents.repeated_game import games_episode_metrics
from envs.config import Options
from envs.games import GAMES, TASKS, GamesEnvOptions, make_games_env
from envs.games.env import RepeatedGameEnv
from policies.next_token.agents import (
    BestResponseAgent,
    HedgeAgent,
    RobustAgent,
    TauOptions,
    WindowedRobustAgent,
    WindowOptions,
)
from policies.next_token.predictors import NGramPredictor
from sim_benchmarks.specs import PolicyContext, PolicySpec, Spec, SuiteSpec, TrainerSpec
from sim_benchmarks.training.next_token import NextTokenTrainOptions, run_training

SUITE = "games"


def make_env(task: str, options: Mapping[str, Any]) -> RepeatedGameEnv:
    """One episode = ``rounds`` (default 1000) rounds of the task's game against its opponent."""
    opts = GamesEnvOptions.from_options(options)
    return make_games_env(task, rounds=opts.rounds, game_seed=opts.game_seed)


SPECS: list[Spec] = []  # what this module declares, in order (the registry's table says when it is loaded)

SPECS.append(SuiteSpec(
    name=SUITE,
    description="repeated matrix games (RPS, matching pennies, random 3x3) against patterned and adaptive opponents",
    tasks=TASKS,
    make_env=make_env,
    default_policies=("hedge", "best_response", "robust"),
    default_episodes=10,
    episode_metrics=games_episode_metrics,
    options_type=GamesEnvOptions,
))


def _n_opponent(ctx: PolicyContext) -> int:
    return int(ctx.env.unwrapped.game.n_opponent)


def _transformer_predictor(ctx: PolicyContext):
    from policies.next_token.pretrained import default_model
    from policies.next_token.transformer import TransformerPredictor

    return TransformerPredictor(default_model(_n_opponent(ctx), train=False))  # evaluation never trains


def _explicit(ctx: PolicyContext):
    from policies.next_token.explicit_layers import ExplicitRobustAgent

    return ExplicitRobustAgent(_transformer_predictor(ctx), tau=TauOptions.from_options(ctx.options, strict=False).tau)


def _windowed(ctx: PolicyContext):
    window = WindowOptions.from_options(ctx.options, strict=False).window
    return WindowedRobustAgent(NGramPredictor(window=window), window=window)


POLICIES: dict[str, tuple[str, Callable[[PolicyContext], Any]]] = {
    "hedge": ("Hedge (exponential weights), eta = sqrt(8 ln K / T)", lambda ctx: HedgeAgent()),
    "best_response": ("pure best response to a back-off 3-gram next-token model (exploitable)",
                      lambda ctx: BestResponseAgent(NGramPredictor())),
    "robust": ("3-gram best response robustified: switch to Hedge once regret > sqrt(2T ln(K/0.05))",
               lambda ctx: RobustAgent(NGramPredictor(), tau="delta")),
    "robust_exp": ("3-gram best response robustified with tau = T^(2/3) (exponentially small TV)",
                   lambda ctx: RobustAgent(NGramPredictor(), tau="exp")),
    "windowed_robust": ("bounded-context robustification (option window, default 100)", _windowed),
    "best_response_transformer": ("pure best response to the causal transformer trained on D",
                                  lambda ctx: BestResponseAgent(_transformer_predictor(ctx))),
    "robust_transformer": ("transformer + the robustification as explicit-weight transformer layers", _explicit),
}

POLICY_OPTIONS: dict[str, type[Options]] = {"windowed_robust": WindowOptions, "robust_transformer": TauOptions}

for _name, (_desc, _factory) in POLICIES.items():
    SPECS.append(PolicySpec(name=_name, description=_desc, factory=_factory, suites=(SUITE,),
                               options_type=POLICY_OPTIONS.get(_name)))


SPECS.append(TrainerSpec(
    name=SUITE,
    env_prefixes=("games:",),
    agents={"next_token": "causal transformer trained on opponent sequences from D (next-action cross-entropy)"},
    run=run_training,  # torch is imported only when a run starts
    env_names=lambda: [f"games:{g}" for g in GAMES] + [f"games:{t}" for t in TASKS],
    options_type=NextTokenTrainOptions,
))
