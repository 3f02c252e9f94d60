"""Training the causal next-token transformer on opponent sequences from D (``launch.train --env games:...``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agents.repeated_game import play_game
from envs.atomic_io import atomic_path
from envs.config import Options, require
from envs.errors import ConfigError, choice_error
from envs.games import GAMES, TASKS, make_game
from envs.games.env import RepeatedGameEnv
from envs.games.opponents import MixtureOpponent
from policies.next_token.agents import BestResponseAgent
from sim_benchmarks.train_log import TrainLog


@dataclass(frozen=True)
class NextTokenTrainOptions(Options):
    """``launch.train --option`` keys of the next-token family."""

    title = "next-token training"
    game_seed: int = 0
    context: int = 32
    d_model: int = 32
    n_layers: int = 2
    batch: int = 64
    log_every: int = 20
    sequences: int = 2000
    eval_episodes: int = 20

    def check(self) -> None:
        require(self.game_seed >= 0, f"game_seed must be >= 0, got {self.game_seed}")
        require(self.context >= 2, f"context must be >= 2, got {self.context}")
        for name in ("d_model", "n_layers", "batch", "log_every", "sequences", "eval_episodes"):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")


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
    opts = NextTokenTrainOptions.from_options(options)
    steps = int(steps)
    require(steps >= 1, f"steps must be a positive integer, got {steps!r}")
    game = make_game(_game_of(env), opts.game_seed)
    torch.set_num_threads(1)
    cfg = TransformerConfig(n_actions=game.n_opponent, context=opts.context, d_model=opts.d_model,
                            n_layers=opts.n_layers)
    tcfg = TrainConfig(steps=steps, batch=opts.batch, log_every=opts.log_every, sequences=opts.sequences,
                       seq_len=max(96, cfg.context + 1))
    out_dir = Path(out_dir)
    state_path = out_dir / "train_state.pt"
    # Without a checkpoint a resume starts over: records written before the first checkpoint are replaced, not kept.
    log = TrainLog(out_dir, resume=resume and state_path.exists())
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
        with atomic_path(state_path) as tmp:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)

    t0 = time.perf_counter()
    done_before = start[2] if start else 0
    model, losses = train_next_token(cfg, tcfg, seed=int(seed), on_log=log.append, on_progress=on_progress,
                                     start=start, on_checkpoint=checkpoint)
    train_s = time.perf_counter() - t0
    digest = save_model(model, out_dir / "model.pt", extra={"env": env, "steps": steps, "seed": int(seed)})
    # Evaluation: best response to the trained model on fresh D episodes (default 20) of 200 rounds.
    returns, avg_regrets = [], []
    for ep in range(opts.eval_episodes):
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
