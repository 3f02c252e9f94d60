"""The built-in generic VLA as a :class:`~policies.base.Policy`: frozen vision + frozen language + trained head.

``GenericVLA.act`` resizes the camera image, runs the vision backbone (the head's own CNN stem, or the frozen
MobileNetV2 prefix), conditions the FiLM head on the cached instruction embedding — object-memory heads also on
what they localised on the episode's first frame — and returns the first action of the predicted chunk (or a
temporal ensemble of overlapping chunks). Nothing is updated at evaluation: the head is frozen at load and runs under
``torch.inference_mode``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.errors import ConfigError, choice_error
from perception.text_encoder import EMBED_DIM, load_text_encoder
from policies.vla.checkpoint import DEFAULT_CHECKPOINT, HeadBundle, load_checkpoint
from policies.vla.configuration import EXECUTION_MODES, VLAOptions
from policies.vla.conversions import ActionQueue, TemporalEnsembler, first_camera
from policies.vla.model import AUX_SCALE
from policies.vla.vision_input import image_features

_MY = re.compile(r"\bmy\b", flags=re.IGNORECASE)


def drop_possessive(instruction: str) -> str:
    """The generic baseline's rewrite: "bring my cup" → "bring the cup" (the policy was trained on "the ...")."""
    return re.sub(r"\s+", " ", _MY.sub("the", instruction)).strip()


def encode_words(text_encoder: Any, instructions: list[str], max_words: int) -> np.ndarray:
    """Per-word embeddings of each instruction (len × max_words × ``EMBED_DIM``, zero rows pad short instructions):
    the input of word-additive grounding heads. Words are lower-cased whitespace tokens; extra words are dropped."""
    tokens = [t.lower().split()[:max_words] for t in instructions]
    vocab = sorted({w for ws in tokens for w in ws})
    table = dict(zip(vocab, text_encoder.encode(vocab), strict=True)) if vocab else {}
    out = np.zeros((len(instructions), max_words, EMBED_DIM), np.float32)
    for i, ws in enumerate(tokens):
        for j, w in enumerate(ws):
            out[i, j] = table[w]
    return out


def state_vector(obs: dict[str, Any], state_dim: int, indices: tuple[int, ...] = ()) -> np.ndarray:
    """The proprioceptive input: ``obs["ee_state"]`` flattened, restricted to ``indices`` when given."""
    if state_dim == 0:
        return np.zeros(0, dtype=np.float32)
    state = np.asarray(obs["ee_state"], dtype=np.float32).reshape(-1)
    if indices:
        state = state[list(indices)]
    if state.shape[0] != state_dim:
        raise ValueError(f"ee_state has {state.shape[0]} values; the checkpoint expects {state_dim}")
    return state


class GenericVLA:
    """The frozen generic VLA policy (images + instruction → 7-D SIMPLER action)."""

    def __init__(
        self,
        bundle: HeadBundle,
        execution: str = VLAOptions.vla_execution,
        ensemble_decay: float = 0.01,
        action_steps: int | None = VLAOptions.vla_action_steps,
        instruction_rewrite: Callable[[str], str] | None = None,
        text_encoder: Any = None,
        attributes: bool = VLAOptions.vla_attributes,
        localiser: bool = VLAOptions.vla_localiser,
        memory_refiner: Any = None,
    ) -> None:
        if execution not in EXECUTION_MODES:
            raise choice_error("execution mode", execution, EXECUTION_MODES)
        self.bundle = bundle
        self.cfg = bundle.config
        self.action_frame = bundle.action_frame  # what the deltas are added to (policies/manipulation/delta_adapter.py)
        self.execution = execution
        self.ensembler = TemporalEnsembler(self.cfg.chunk, ensemble_decay)
        # "queue": run the first ``action_steps`` actions of a chunk open loop before looking again (ACT-style
        # chunk execution: commits to a motion instead of re-deciding — and hesitating — every step).
        steps = self.cfg.chunk if action_steps is None else int(action_steps)
        if not 1 <= steps <= self.cfg.chunk:
            raise ConfigError(f"action_steps {steps} is out of range; valid: 1..{self.cfg.chunk} (the chunk length)")
        self.queue = ActionQueue(steps)
        self.instruction_rewrite = instruction_rewrite
        # The checkpoint's attribute detectors (if it has them) vote on which object the memory remembers.
        self.grounder = bundle.grounder if attributes else None
        # The checkpoint's base localiser (if any) places the voted object; it was trained on the detectors' vote.
        self.localiser = bundle.localiser if attributes and localiser else None
        self.text_encoder = text_encoder if text_encoder is not None else load_text_encoder()
        self.instruction = ""
        self._text: torch.Tensor | None = None
        self._memory: torch.Tensor | None = None  # object-memory heads: what the episode's first frame showed
        self._words: torch.Tensor | None = None  # word-additive heads: the instruction's per-word embeddings
        # Diagnostics only (sim_benchmarks/studies/vlabench/vlabench_base_probe.py): M×2 table positions (metres,
        # robot base frame) that replace the remembered ones after the first frame, NaN rows keeping the head's own.
        self.memory_override: np.ndarray | None = None
        # Object-memory heads: places what the head remembered with depth (policies/vla/perceived_memory.py:
        # ``reset(instruction, info)``, ``place(obs, own M×2) -> M×2``, NaN rows keep the head's own); None = own.
        self.memory_refiner = memory_refiner
        self._mean = torch.as_tensor(bundle.action_mean, dtype=torch.float32)
        self._std = torch.as_tensor(bundle.action_std, dtype=torch.float32)

    @classmethod
    def from_checkpoint(cls, folder: str | Path = DEFAULT_CHECKPOINT, **kwargs: Any) -> GenericVLA:
        """Load (sha256-verified) and wrap a head checkpoint."""
        return cls(load_checkpoint(folder), **kwargs)

    @property
    def head(self) -> torch.nn.Module:
        """The trained (frozen) module."""
        return self.bundle.head

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """Encode the (optionally rewritten) instruction once per episode; clear the action ensemble."""
        self.instruction = self.instruction_rewrite(instruction) if self.instruction_rewrite else instruction
        self.set_text_embedding(self.text_encoder.encode([self.instruction])[0])
        if self.cfg.words:
            self._words = torch.as_tensor(encode_words(self.text_encoder, [self.instruction], self.cfg.words))
        self._memory = None
        if self.memory_refiner is not None:
            self.memory_refiner.reset(self.instruction, info)
        self.ensembler.reset()
        self.queue.reset()

    def set_text_embedding(self, embedding: np.ndarray) -> None:
        """Condition on an arbitrary instruction-space vector (the soft-prompt baseline feeds a learned one)."""
        self._text = torch.as_tensor(np.asarray(embedding, dtype=np.float32)).view(1, -1)
        # A word-additive head grounds such a vector as a one-word instruction.
        self._words = self._text.view(1, 1, -1) if self.cfg.words else None
        self._memory = None

    def _inputs(self, obs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None,
                                                  torch.Tensor | None]:
        if self._text is None:
            raise RuntimeError("call reset(instruction, info) before act(obs)")
        feats = image_features(first_camera(obs["image"]), self.cfg.vision)
        state = None
        if self.cfg.state_dim:
            raw = state_vector(obs, self.cfg.state_dim, self.cfg.state_indices)
            s = (raw - self.bundle.state_mean) / self.bundle.state_std
            state = torch.as_tensor(s, dtype=torch.float32).view(1, -1)
        if self.cfg.memory and self._memory is None:  # the episode's first frame: localise and remember
            window = self.grounder.cfg.window if self.grounder is not None else 0
            prior = self._prior(obs)
            refine = (self.localiser.refiner(first_camera(obs["image"]), prior) if self.localiser is not None
                      else None)
            self._memory = self.bundle.head.remember(feats, self._text, self._words, prior=prior,
                                                     prior_window=window, refine=refine)
            if self.memory_refiner is not None:
                extra = {}
                if getattr(self.memory_refiner, "needs_heatmap", False):  # the refiner also weighs the head's heatmap
                    logits = self.bundle.head.localise(*self.bundle.head.trunk(feats, self._text), words=self._words,
                                                       prior=prior, prior_window=window)["logits"][0, 0]
                    extra["heatmap"] = torch.softmax(logits.detach().flatten(), 0).view(logits.shape).numpy()
                given = torch.as_tensor(self.memory_refiner.place(obs, self._memory[0, :, :2].numpy().copy(), **extra))
                self._memory[0, :, :2] = torch.where(torch.isnan(given), self._memory[0, :, :2], given)
            if self.memory_override is not None:
                given = torch.as_tensor(np.asarray(self.memory_override, np.float32))
                keep = torch.isnan(given)
                self._memory[0, :, :2] = torch.where(keep, self._memory[0, :, :2], given)
        return feats, self._text, state, self._memory

    def _prior(self, obs: dict[str, Any]) -> torch.Tensor | None:
        """The attribute detectors' weighted log-probability map of the instruction's words (1×h×w), or None."""
        if self.grounder is None:
            return None
        logp = self.grounder.log_prob_map(first_camera(obs["image"]), self.instruction)
        return None if logp is None else self.grounder.cfg.weight * logp[None]

    @torch.inference_mode()
    def predict_chunk(self, obs: dict[str, Any], memory_offset: np.ndarray | None = None) -> np.ndarray:
        """The head's chunk of future actions (chunk × 7) in env units. ``memory_offset`` (object-memory heads,
        M×2 metres) moves the remembered positions for this prediction only: how much the action follows them."""
        feats, text, state, memory = self._inputs(obs)
        if memory_offset is not None and memory is not None:
            memory = memory.clone()
            memory[0, :, :2] += torch.as_tensor(np.asarray(memory_offset, np.float32))
        out = self.bundle.head(feats, text, state, memory)[0]
        actions = out * self._std + self._mean
        if self.cfg.gripper_classifier:  # logits of "closed": their sign is the command (tanh keeps it in [-1, 1])
            actions[:, -1] = torch.tanh(out[:, -1])
        return actions.numpy()

    @torch.inference_mode()
    def predict_target_offset(self, obs: dict[str, Any]) -> np.ndarray | None:
        """Where the head thinks the described object is: its xy offset from the gripper in metres (object-memory
        heads: the remembered position; others: the training-only auxiliary output; None without either)."""
        if self.cfg.memory:
            inputs = self._inputs(obs)
            ee_xy = np.asarray(obs["ee_state"], np.float32).reshape(-1)[:2]
            return inputs[3][0, 0, :2].numpy() - ee_xy
        if not self.cfg.aux_dim:
            return None
        aux = self.bundle.head.forward_with_aux(*self._inputs(obs))[1]
        return aux[0].numpy() * AUX_SCALE

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        """One 7-D action: the chunk's first step, the temporal ensemble of overlapping chunks, or the next queued."""
        if self.execution == "queue":
            if self.queue.needs_chunk():
                self.queue.push(self.predict_chunk(obs))
            action = self.queue.pop()
        else:
            chunk = self.predict_chunk(obs)
            action = chunk[0] if self.execution == "first" else self.ensembler.add(chunk)
        action = np.asarray(action, dtype=np.float32).copy()
        action[6] = 1.0 if action[6] >= 0.0 else -1.0  # the env's gripper is binary in effect: commit to one
        return action
