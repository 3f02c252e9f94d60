"""Weights files: the one writer and the one verified reader every checkpoint folder uses.

:func:`write_weights` refuses non-finite weights (a diverged run must not ship), saves byte-stable float tensors
(the same weights give the same sha256) through a temporary file, and writes the ``FILE.sha256`` line beside them.
:func:`read_weights` loads a file only after its sha256 matches what the manifest recorded and, when a
``FILE.sha256`` line is present, that line as well; a missing, corrupt, replaced or unreadable file is a
:class:`ConfigError` naming it, never a silent load.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envs.atomic_io import write_bytes_atomic
from envs.errors import ConfigError
from envs.paths import sha256_file


def check_finite(tensors: Mapping[str, Any], what: str) -> None:
    """ConfigError naming the first tensor of ``tensors`` (name → tensor) holding a NaN or an infinity."""
    import torch

    for name, value in tensors.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ConfigError(f"{what}: {name} holds non-finite values (the training diverged); nothing was saved, "
                              "lower the learning rate or check the data")


def write_weights(payload: Mapping[str, Any], path: str | Path, what: str, sidecar: bool = True) -> str:
    """Save ``payload`` (its ``state_dict`` and any other tensors) to ``path``; returns the file's sha256.

    Refuses (ConfigError, nothing written) when a tensor is not finite. ``sidecar`` also writes ``path.sha256``
    (``sha256sum -c`` format)."""
    import torch

    state = payload.get("state_dict", {})
    check_finite({**state, **{k: v for k, v in payload.items() if k != "state_dict"}}, what)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()  # torch.save names its archive after the file: a buffer keeps the bytes name-independent
    torch.save(dict(payload), buf)
    write_bytes_atomic(path, buf.getvalue())
    digest = sha256_file(path)
    if sidecar:
        path.with_name(path.name + ".sha256").write_text(f"{digest}  {path.name}\n")
    return digest


def read_weights(path: str | Path, expected_sha256: str, what: str) -> dict[str, Any]:
    """The payload saved at ``path`` after its sha256 matches ``expected_sha256`` and its ``.sha256`` line (if
    any); ConfigError naming the file otherwise."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} are missing")
    digest = sha256_file(path)
    if digest != expected_sha256:
        raise ConfigError(f"{what} {str(path)!r} fail the sha256 check (file {digest[:12]}…, manifest "
                          f"{str(expected_sha256)[:12]}…): corrupt or replaced")
    line = path.with_name(path.name + ".sha256")
    if line.exists():
        try:
            recorded = line.read_text().split()[:1]
        except (OSError, UnicodeDecodeError):
            recorded = []
        if recorded != [digest]:
            raise ConfigError(f"{what}: {str(line)!r} does not match the weights' sha256 {digest[:12]}…: corrupt "
                              "or replaced")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means the file is not such weights
        raise ConfigError(f"{what} {str(path)!r} cannot be read ({type(exc).__name__})") from exc
    if not isinstance(payload, dict):
        raise ConfigError(f"{what} {str(path)!r} hold a {type(payload).__name__}, not a weights payload")
    return payload
