"""LeRobot-style adapter (pi0, SmolVLA, ACT, diffusion …): batch dicts in, action chunks out.

LeRobot policies take a batch ``{"observation.images.<cam>": float 1×3×H×W in [0, 1], "observation.state": 1×S,
"task": [instruction]}`` and either return one action per call from an internal queue (``select_action``) or a
whole chunk (``predict_action_chunk``). This adapter builds that batch from an Embodia observation (resize rule,
channel order, value range), runs the chunk through Embodia's own execution rule — an n-step action queue or ACT
temporal ensembling — and converts the result to the SIMPLER action (rotation, gripper convention).

The ``lerobot`` package itself is optional: its wheels pin torch < 2.11 and need torchvision, so it cannot be
installed next to Embodia's torch 2.13 CPU build here. :meth:`LeRobotAdapter.from_pretrained` imports it lazily and
says so when missing; any object with the same methods (``reset``, ``select_action`` / ``predict_action_chunk``)
can be wrapped directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.errors import ConfigError, choice_error
from policies.vla.conversions import ActionQueue, TemporalEnsembler, first_camera, resize_image, to_embodia_action

LEROBOT_POLICY_TYPES = ("pi0", "pi05", "smolvla", "act", "diffusion")
EXECUTION = ("queue", "ensemble", "select_action")


def observation_batch(obs: dict[str, Any], instruction: str, image_key: str, state_key: str | None,
                      image_size: int | tuple[int, int] | None, resize: str) -> dict[str, Any]:
    """An Embodia observation as a LeRobot batch of size 1 (images float [0, 1], channels first)."""
    image = first_camera(obs["image"])
    if image_size is not None:
        image = resize_image(image, image_size, resize)
    batch: dict[str, Any] = {
        image_key: torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].float().div(255.0),
        "task": [instruction],
    }
    if state_key is not None:
        state = np.asarray(obs["ee_state"], dtype=np.float32).reshape(1, -1)
        batch[state_key] = torch.from_numpy(state)
    return batch


class LeRobotAdapter:
    """Wraps a LeRobot-style policy as a :class:`~policies.base.Policy` emitting Embodia actions."""

    def __init__(
        self,
        policy: Any,
        image_key: str = "observation.images.image",
        state_key: str | None = "observation.state",
        image_size: int | tuple[int, int] | None = 224,
        resize: str = "pad",
        gripper: str = "unit_open",
        rotation: str = "rpy",
        execution: str = "queue",
        n_action_steps: int = 4,
        ensemble_decay: float = 0.01,
    ) -> None:
        if execution not in EXECUTION:
            raise choice_error("LeRobot execution mode", execution, EXECUTION)
        if execution != "select_action" and not hasattr(policy, "predict_action_chunk"):
            raise ConfigError(f"execution {execution!r} needs a policy with predict_action_chunk; "
                              "use execution='select_action'")
        self.policy = policy
        if isinstance(policy, torch.nn.Module):
            policy.eval()
            for p in policy.parameters():
                p.requires_grad_(False)
        self.image_key, self.state_key = image_key, state_key
        self.image_size, self.resize = image_size, resize
        self.gripper, self.rotation = gripper, rotation
        self.execution = execution
        self.queue = ActionQueue(n_action_steps)
        self.ensembler: TemporalEnsembler | None = None
        self.ensemble_decay = ensemble_decay
        self.instruction = ""

    @classmethod
    def from_pretrained(cls, path: str | Path, policy_type: str, **kwargs: Any) -> LeRobotAdapter:
        """Load a LeRobot checkpoint folder (``config.json`` + ``model.safetensors``) with the lerobot package."""
        if policy_type not in LEROBOT_POLICY_TYPES:
            raise choice_error("LeRobot policy type", policy_type, LEROBOT_POLICY_TYPES)
        folder = Path(path).expanduser()
        if not (folder / "config.json").is_file():
            raise ConfigError(f"LeRobot policy path {str(folder)!r} has no config.json")
        try:
            from lerobot.policies.factory import get_policy_class
        except ImportError as exc:
            raise ConfigError("loading LeRobot weights needs the lerobot package (pip install lerobot; it pins "
                              "torch<2.11 and torchvision, so use a separate environment)") from exc
        policy = get_policy_class(policy_type).from_pretrained(str(folder), local_files_only=True)
        return cls(policy, **kwargs)

    def reset(self, instruction: str, info: dict[str, Any]) -> None:
        """New episode: clear the policy's and the adapter's action queues."""
        self.instruction = instruction
        if hasattr(self.policy, "reset"):
            self.policy.reset()
        self.queue.reset()
        self.ensembler = None

    @torch.inference_mode()
    def raw_action(self, obs: dict[str, Any]) -> np.ndarray:
        """The next action in the policy's own convention."""
        batch = observation_batch(obs, self.instruction, self.image_key, self.state_key, self.image_size,
                                  self.resize)
        if self.execution == "select_action":
            return self.policy.select_action(batch)[0].cpu().numpy()
        if self.execution == "queue":
            if self.queue.needs_chunk():
                self.queue.push(self.policy.predict_action_chunk(batch)[0].cpu().numpy())
            return self.queue.pop()
        chunk = self.policy.predict_action_chunk(batch)[0].cpu().numpy()
        if self.ensembler is None:
            self.ensembler = TemporalEnsembler(chunk.shape[0], self.ensemble_decay)
        return self.ensembler.add(chunk)

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        """Embodia action (SIMPLER convention, gripper ±1 with +1 = close)."""
        return to_embodia_action(self.raw_action(obs), rotation=self.rotation, gripper=self.gripper)
