"""Episode videos: mp4 through imageio-ffmpeg (bundled ffmpeg, no moviepy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_video(path: Path, frames: list[np.ndarray], fps: int = 10) -> Path:
    """Write RGB uint8 frames to ``path`` (mp4); returns the path."""
    import imageio.v3 as iio

    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, np.stack(frames).astype(np.uint8), fps=fps, macro_block_size=1)
    return path
