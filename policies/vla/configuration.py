"""The generic VLA's configuration as users set it: the ``--policy-option`` keys of the policies built on the frozen
generic head (:class:`VLAOptions`), where its object memory comes from (:class:`VLAMemoryOptions`) and which base the
prompt baselines prompt (:class:`PromptBaseOptions`).

Light on purpose (no torch at import): the CLI declares and checks these options before anything loads. The head's
architecture and training settings are :class:`policies.vla.model.HeadConfig` and
:class:`policies.vla.training.TrainConfig`.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Literal

from envs.config import Options, option, require

# Where the head's object memory comes from (policies/vla/perceived_memory.py): its own first-frame estimate, or
# placed by the modular base's fused three-view depth ("depth": the head chooses the object, depth places it;
# "perceived": the modular base's choice; "fused": the head's heatmap, the instruction's colour and the category's
# height vote among the perceived objects).
MemorySource = Literal["own", "depth", "perceived", "fused"]
MEMORY_SOURCES: tuple[str, ...] = typing.get_args(MemorySource)
# How a chunk of actions is executed: its first action every step, temporal ensembling, or an open-loop queue.
Execution = Literal["first", "ensemble", "queue"]
EXECUTION_MODES: tuple[str, ...] = typing.get_args(Execution)


@dataclass(frozen=True)
class VLAOptions(Options):
    """``--policy-option`` keys of the generic VLA (the prompt baselines are built on it and read the same); the
    defaults of :class:`policies.vla.generic.GenericVLA` too."""

    title = "generic VLA"
    vla_checkpoint: str | None = field(default=None, metadata={"help": "checkpoint folder (default: the shipped one)"})
    vla_execution: Execution = field(
        default="first", metadata={"help": "first action of each chunk, temporal ensembling, or open-loop queue"})
    vla_action_steps: int | None = field(default=None, metadata={"help": "queue: actions per chunk (default all)"})
    vla_attributes: bool = field(default=True, metadata={"help": "use the attribute detectors (and localiser)"})
    vla_localiser: bool = field(default=True, metadata={"help": "use the first-frame base localiser"})
    vla_grasp_retries: int = field(default=0, metadata={"help": "reopen after up to N grasps that closed on nothing"})

    def check(self) -> None:
        require(self.vla_checkpoint is None or bool(self.vla_checkpoint.strip()),
                "option vla_checkpoint is empty; pass a checkpoint folder, or leave the option out for the default")
        require(self.vla_grasp_retries >= 0, f"vla_grasp_retries must be an integer >= 0, got {self.vla_grasp_retries}")
        require(self.vla_action_steps is None or self.vla_action_steps >= 1,
                f"vla_action_steps must be >= 1 (1..the chunk length), got {self.vla_action_steps}")


@dataclass(frozen=True)
class VLAMemoryOptions(Options):
    """``--policy-option`` key of the policies built on the generic head in the VLABench suite (bases built for
    VAP or a prompt baseline read it too)."""

    title = "generic VLA memory"
    vla_memory: MemorySource = option("own", "object memory: the head's own estimate, or placed by fused depth "
                                             "(depth), the modular base's choice (perceived) or a heatmap + colour + "
                                             "height vote (fused)")


@dataclass(frozen=True)
class PromptBaseOptions(Options):
    """``--policy-option`` key of the learned-prompt baselines (:mod:`policies.vla.prompt_baselines`) in the VLABench
    suite: the base they prompt, the generic VLA or the modular base (which reads words, so the soft prompt refuses
    it)."""

    title = "prompt baselines on personalized_vlabench"
    prompt_base: Literal["generic", "modular"] = option("generic", "the base the prompt baselines prompt")
