"""``--policy-option`` keys of the toolpro policies (``toolpro``, ``program_only``, ``stepwise``)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from envs.config import Options


@dataclasses.dataclass(frozen=True)
class ToolProOptions(Options):
    """Options of the toolpro policies."""

    title = "ToolPro options"
    constructor: Literal["planner", "smollm2", "random"] = dataclasses.field(default="planner", metadata={
        "help": "who builds the program: planner = the deterministic planner for the task templates; smollm2 = the "
                "offline SmolLM2-135M, decoding constrained to the program grammar and the tool schemas; random = "
                "uniform choices under the same constraints (a floor)"})
    constructor_seed: int = dataclasses.field(default=0, metadata={"help": "seed of the random constructor"})
