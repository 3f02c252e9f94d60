"""The shipped next-token models (``checkpoints/next_token/d_n{N}.pt``) and how they were made.

Reproduce a checkpoint with::

    python -m launch.train --env games:rps --agent next_token --steps 600 --seed 0 --out /tmp/nt_rps
    cp /tmp/nt_rps/model.pt checkpoints/next_token/d_n3.pt   # and model.pt.sha256 -> d_n3.pt.sha256

(``games:matching_pennies`` gives the N = 2 model.) When a checkpoint is missing it is trained in memory with
the same defaults (~20 s on one core), so nothing is ever downloaded.
"""

from __future__ import annotations

from pathlib import Path

import torch

from envs.paths import CHECKPOINTS
from policies.next_token.transformer import (
    CausalTransformer,
    TrainConfig,
    TransformerConfig,
    load_model,
    train_next_token,
)

CHECKPOINT_DIR = CHECKPOINTS / "next_token"
DEFAULT_STEPS = 600
DEFAULT_SEED = 0


def checkpoint_path(n_actions: int) -> Path:
    """Where the model for games with N opponent actions lives."""
    return CHECKPOINT_DIR / f"d_n{int(n_actions)}.pt"


def default_model(n_actions: int, train: bool = True) -> CausalTransformer:
    """The shipped model for N opponent actions, or (if absent) one trained now with the shipped recipe when
    ``train`` (studies); evaluation passes ``train=False`` and gets a ConfigError naming the command instead."""
    path = checkpoint_path(n_actions)
    if path.exists():
        return load_model(path)
    if not train:
        from envs.errors import ConfigError

        raise ConfigError(f"no next-token model for {int(n_actions)} opponent actions ({str(path)!r} missing); train "
                          f"it: python -m launch.train --env games:<a game with {int(n_actions)} actions> --agent "
                          f"next_token --steps {DEFAULT_STEPS} --seed {DEFAULT_SEED}, then copy its model.pt there")
    torch.set_num_threads(1)
    model, _ = train_next_token(TransformerConfig(n_actions=int(n_actions)), TrainConfig(steps=DEFAULT_STEPS),
                                seed=DEFAULT_SEED)
    return model.eval()
