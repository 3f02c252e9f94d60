"""Options of the vimrag policies (kept free of heavy imports: the suite registers them at start-up)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from envs.config import Options, require

DEFAULT_BUDGET = 64


@dataclass(frozen=True)
class VimragOptions(Options):
    """Options of the vimrag policies (``--policy-option key=value``)."""

    title = "VimRAG options"
    budget: int = dataclasses.field(default=DEFAULT_BUDGET, metadata={"help": "total visual tokens per question"})
    max_steps: int = dataclasses.field(default=8, metadata={"help": "agent steps before a forced answer"})
    planner_seed: int = dataclasses.field(default=0, metadata={"help": "seed of the GGPO-trained planner"})
    credit: Literal["ggpo", "trajectory"] = dataclasses.field(default="ggpo",
                                                               metadata={"help": "planner trained with this credit"})
    planner: Literal["learned", "smollm2"] = dataclasses.field(default="learned", metadata={
        "help": "learned: the GGPO/trajectory-trained MLP; smollm2: the offline SmolLM2-135M, replies constrained "
                "to the valid actions"})
    checkpoint_db: str | None = dataclasses.field(default=None, metadata={
        "help": "SQLite file for the LangGraph checkpointer (resumable threads); none: no checkpointer"})

    def check(self) -> None:
        require(self.budget > 0, f"option budget must be a positive integer, got {self.budget}")
        require(self.max_steps >= 2, f"option max_steps must be >= 2, got {self.max_steps}")
