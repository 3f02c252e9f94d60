"""Render Personalized-SIMPLER assets to PNG for inspection.

    python -m sim_benchmarks.studies.simpler.render_simpler_assets --out runs/simpler_assets \
        [--episodes 4] [--image-size 224]

Writes ``references/<instance>.png`` (the reference set of every test-split instance side by side),
``references_grid.png`` (first reference of every test instance, one row per category) and
``first_frames/<task>.png`` (a grid of first frames of ``--episodes`` seeds per task, personalized and generic).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from envs.manipulation.env import ALL_TASKS, make_env
from envs.manipulation.objects import CATEGORIES, instances
from envs.manipulation.personal import PersonalObject, render_references
from sim_benchmarks.cli import ArgumentParser, main_guard


def _row(images: list[np.ndarray], pad: int = 4) -> np.ndarray:
    h = max(im.shape[0] for im in images)
    parts = []
    for im in images:
        parts += [im, np.full((h, pad, 3), 255, np.uint8)]
    return np.concatenate(parts[:-1], axis=1)


def _grid(rows: list[list[np.ndarray]], pad: int = 4) -> np.ndarray:
    lines = [_row(r, pad) for r in rows]
    width = max(line.shape[1] for line in lines)
    lines = [np.pad(line, ((0, 0), (0, width - line.shape[1]), (0, 0)), constant_values=255) for line in lines]
    out = []
    for line in lines:
        out += [line, np.full((pad, width, 3), 255, np.uint8)]
    return np.concatenate(out[:-1], axis=0)


@main_guard
def main(argv: list[str] | None = None) -> None:
    """CLI entry point."""
    ap = ArgumentParser(prog="sim_benchmarks.studies.simpler.render_simpler_assets",
                        description=__doc__.splitlines()[0])
    ap.add_argument("--out", writes="folder", type=Path, required=True)
    ap.add_argument("--episodes", type=int, default=4, help="first frames per task")
    ap.add_argument("--image-size", type=int, default=224)
    args = ap.parse_args(argv)
    ref_dir, frame_dir = args.out / "references", args.out / "first_frames"
    ref_dir.mkdir(parents=True, exist_ok=True)
    frame_dir.mkdir(parents=True, exist_ok=True)
    grid_rows = []
    for category in CATEGORIES:
        row = []
        for inst in instances(category, "test"):
            refs = render_references(PersonalObject.from_library(inst.instance_id), args.image_size)
            Image.fromarray(_row(refs.images)).save(ref_dir / f"{inst.instance_id}.png")
            row.append(refs.images[0])
        grid_rows.append(row)
    Image.fromarray(_grid(grid_rows)).save(args.out / "references_grid.png")
    for task in ALL_TASKS:
        env = make_env(task, {"image_size": args.image_size, "references": False})
        frames = [env.reset(seed=s)[0]["image"] for s in range(args.episodes)]
        env.close()
        cols = min(4, len(frames))
        sheet = _grid([frames[i:i + cols] for i in range(0, len(frames), cols)])
        Image.fromarray(sheet).save(frame_dir / f"{task}.png")
    print(f"wrote {len(list(ref_dir.iterdir()))} reference sheets, references_grid.png and "
          f"{len(ALL_TASKS)} first-frame grids to {args.out}")


if __name__ == "__main__":
    main()
