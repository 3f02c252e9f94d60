"""Conversions between Embodia's action/observation conventions and those of external VLAs.

Embodia's manipulation action is the SIMPLER convention: ``[dx, dy, dz, droll, dpitch, dyaw, gripper]`` in the
end-effector frame, rotation as extrinsic roll-pitch-yaw (``sxyz``), gripper in [-1, 1] with > 0 = close.
External policies differ in image size and resizing rule, rotation parameterisation (axis-angle vs rpy), gripper
range and polarity, and in whether they emit one action or a chunk of future actions. Each rule here is a small
pure function or object, so an adapter is a composition of them and each can be unit-tested.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import cv2
import numpy as np
from scipy.spatial.transform import Rotation

from envs.errors import ConfigError, choice_error

RESIZE_MODES = ("stretch", "center_crop", "pad")


def first_camera(image: np.ndarray) -> np.ndarray:
    """The main view: observations may stack several cameras as (n_cams, H, W, 3)."""
    image = np.asarray(image)
    return image[0] if image.ndim == 4 else image


def resize_image(image: np.ndarray, size: int | tuple[int, int], mode: str = "stretch") -> np.ndarray:
    """Resize an HxWx3 uint8 image to ``size`` (int = square, or (height, width)).

    ``stretch`` ignores the aspect ratio (OpenVLA's processor, SIMPLER's 224 resize); ``center_crop`` crops the
    largest centred box of the target aspect ratio first; ``pad`` keeps the aspect ratio and pads with black
    (pi0 / SmolVLA's resize-with-pad). Area interpolation when shrinking avoids aliasing; linear when growing.
    """
    if mode not in RESIZE_MODES:
        raise choice_error("resize mode", mode, RESIZE_MODES)
    out_h, out_w = (size, size) if isinstance(size, int) else size
    image = np.ascontiguousarray(first_camera(image))
    h, w = image.shape[:2]
    if mode == "center_crop":
        target_ratio = out_w / out_h
        if w / h > target_ratio:  # too wide: crop columns
            new_w = max(1, round(h * target_ratio))
            x0 = (w - new_w) // 2
            image = image[:, x0:x0 + new_w]
        else:
            new_h = max(1, round(w / target_ratio))
            y0 = (h - new_h) // 2
            image = image[y0:y0 + new_h]
        h, w = image.shape[:2]
    if mode == "pad":
        scale = min(out_h / h, out_w / w)
        new_h, new_w = max(1, round(h * scale)), max(1, round(w * scale))
        resized = _resize(image, new_h, new_w)
        canvas = np.zeros((out_h, out_w, image.shape[2]), dtype=image.dtype)
        y0, x0 = (out_h - new_h) // 2, (out_w - new_w) // 2
        canvas[y0:y0 + new_h, x0:x0 + new_w] = resized
        return canvas
    return _resize(image, out_h, out_w)


def _resize(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    h, w = image.shape[:2]
    if (h, w) == (out_h, out_w):
        return image.copy()
    interp = cv2.INTER_AREA if out_h * out_w < h * w else cv2.INTER_LINEAR
    return cv2.resize(image, (out_w, out_h), interpolation=interp)


def rpy_to_axis_angle(rpy: np.ndarray) -> np.ndarray:
    """Extrinsic xyz (``sxyz``) roll-pitch-yaw → axis-angle vector (axis * angle, angle in [0, pi])."""
    rpy = np.asarray(rpy, dtype=np.float64)
    return Rotation.from_euler("xyz", rpy.reshape(-1, 3)).as_rotvec().reshape(rpy.shape)


def axis_angle_to_rpy(rotvec: np.ndarray) -> np.ndarray:
    """Axis-angle vector → extrinsic xyz roll-pitch-yaw, the inverse of :func:`rpy_to_axis_angle`."""
    rotvec = np.asarray(rotvec, dtype=np.float64)
    return Rotation.from_rotvec(rotvec.reshape(-1, 3)).as_euler("xyz").reshape(rotvec.shape)


@dataclass(frozen=True)
class GripperConvention:
    """How a policy or robot encodes the gripper command: its range, which end is open, whether it is binary."""

    low: float
    high: float
    open_is_high: bool
    binary: bool = False

    def to_openness(self, value: float) -> float:
        """Map a command to openness in [0, 1] (1 = fully open)."""
        frac = (float(value) - self.low) / (self.high - self.low)
        frac = float(np.clip(frac, 0.0, 1.0))
        return frac if self.open_is_high else 1.0 - frac

    def from_openness(self, openness: float) -> float:
        """Map openness in [0, 1] to this convention's command (thresholded at 0.5 when binary)."""
        openness = float(np.clip(openness, 0.0, 1.0))
        if self.binary:
            openness = 1.0 if openness > 0.5 else 0.0
        frac = openness if self.open_is_high else 1.0 - openness
        return self.low + frac * (self.high - self.low)


# Embodia's env: > 0 closes, <= 0 opens (like SIMPLER's Google-robot "closedness", +1 closed). OpenVLA & Octo
# (Bridge data): 1 open, 0 closed. SIMPLER-WidowX: +1 open, -1 closed. LeRobot datasets vary; adapters take the
# convention as a parameter.
GRIPPER_CONVENTIONS: dict[str, GripperConvention] = {
    "embodia": GripperConvention(-1.0, 1.0, open_is_high=False),
    "widowx": GripperConvention(-1.0, 1.0, open_is_high=True),
    "unit_open": GripperConvention(0.0, 1.0, open_is_high=True),
    "unit_closed": GripperConvention(0.0, 1.0, open_is_high=False),
    "closedness": GripperConvention(-1.0, 1.0, open_is_high=False),
}


def gripper_convention(name: str) -> GripperConvention:
    """Look up a named gripper convention (ConfigError listing the valid names)."""
    if name not in GRIPPER_CONVENTIONS:
        raise choice_error("gripper convention", name, sorted(GRIPPER_CONVENTIONS))
    return GRIPPER_CONVENTIONS[name]


def convert_gripper(value: float, source: GripperConvention, target: GripperConvention) -> float:
    """Re-express a gripper command from one convention in another (through openness)."""
    return target.from_openness(source.to_openness(value))


def to_embodia_action(action: np.ndarray, rotation: str = "rpy", gripper: str = "embodia") -> np.ndarray:
    """Turn an external 7-D ``[xyz, rot(3), gripper]`` action into Embodia's action (rpy, gripper +1 = close)."""
    action = np.asarray(action, dtype=np.float64).reshape(-1)
    if action.shape[0] != 7:
        raise ConfigError(f"external action has {action.shape[0]} dims; expected 7 ([xyz, rotation(3), gripper])")
    if rotation not in ("rpy", "axis_angle"):
        raise choice_error("rotation format", rotation, ("rpy", "axis_angle"))
    rot = action[3:6] if rotation == "rpy" else axis_angle_to_rpy(action[3:6])
    grip = convert_gripper(action[6], gripper_convention(gripper), GRIPPER_CONVENTIONS["embodia"])
    return np.concatenate([action[:3], rot, [grip]]).astype(np.float32)


class TemporalEnsembler:
    """ACT-style temporal ensembling of overlapping action chunks.

    Every step a new chunk of ``chunk`` future actions is added; the executed action for the current step is the
    weighted mean of every stored prediction for that step, weight ``exp(-decay * i)`` where i = 0 is the oldest
    prediction (a positive decay favours older, already-committed predictions, which smooths the motion).
    """

    def __init__(self, chunk: int, decay: float = 0.01) -> None:
        if chunk < 1:
            raise ConfigError(f"action chunk length must be >= 1, got {chunk}")
        self.chunk = chunk
        self.decay = float(decay)
        self.reset()

    def reset(self) -> None:
        """Forget all stored predictions (call at episode start)."""
        self._chunks: deque[tuple[int, np.ndarray]] = deque()
        self._t = 0

    def add(self, chunk: np.ndarray) -> np.ndarray:
        """Store the chunk predicted at the current step and return the ensembled action for this step."""
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.ndim != 2 or chunk.shape[0] < 1:
            raise ValueError(f"chunk must be (T, action_dim), got shape {chunk.shape}")
        self._chunks.append((self._t, chunk[: self.chunk]))
        # Drop chunks that no longer cover the current step.
        while self._chunks and self._t - self._chunks[0][0] >= self._chunks[0][1].shape[0]:
            self._chunks.popleft()
        preds = np.stack([c[self._t - t0] for t0, c in self._chunks])
        weights = np.exp(-self.decay * np.arange(len(preds)))
        self._t += 1
        return (weights[:, None] * preds).sum(0) / weights.sum()


class ActionQueue:
    """Execute the first ``n_steps`` actions of each predicted chunk before asking the model again (LeRobot style)."""

    def __init__(self, n_steps: int) -> None:
        if n_steps < 1:
            raise ConfigError(f"n_action_steps must be >= 1, got {n_steps}")
        self.n_steps = n_steps
        self._queue: deque[np.ndarray] = deque()

    def reset(self) -> None:
        """Empty the queue (episode start)."""
        self._queue.clear()

    def needs_chunk(self) -> bool:
        """True when the queue is empty and the model must predict a new chunk."""
        return not self._queue

    def push(self, chunk: np.ndarray) -> None:
        """Queue the first ``n_steps`` actions of a predicted chunk."""
        for a in np.asarray(chunk)[: self.n_steps]:
            self._queue.append(np.asarray(a))

    def pop(self) -> np.ndarray:
        """The next action to execute."""
        return self._queue.popleft()
