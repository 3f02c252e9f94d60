"""Fit the soft-prompt baseline's maps (reference-image features → instruction embedding, one ridge map per task kind)
on the train-split object library, and store them for evaluation (which never fits them).

    python -m launch.train_soft_prompt                   # → checkpoints/soft_prompt (maps.npz + manifest.json)

Renders four reference images of every train-split library object, pools their frozen MobileNetV2 features and
fits a closed-form ridge map per task kind to the MiniLM embedding of the generic instruction naming the object
(``policies.vla.prompt_baselines.fit_soft_prompt_from_library``; no robot data). A progress bar (plain lines when
stderr is not a terminal) counts the objects. Deterministic: the same library gives the same maps.
"""

from __future__ import annotations

import datetime
import shlex
import sys
import time
from pathlib import Path

import torch

from launch.cli import ArgumentParser, main_guard
from sim_benchmarks.progress import progress_bar, progress_enabled
from sim_benchmarks.results_folder import check_out_dir


@main_guard
def main(argv: list[str] | None = None) -> int:
    from policies.vla.soft_prompt_checkpoint import SOFT_PROMPT_DIR

    parser = ArgumentParser(prog="launch.train_soft_prompt", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=SOFT_PROMPT_DIR, help="output folder (default: the shipped one)")
    args = parser.parse_args(argv)
    check_out_dir(args.out)
    torch.set_num_threads(1)

    from envs.manipulation.objects import LIBRARY
    from perception.text_encoder import load_text_encoder
    from policies.vla.prompt_baselines import fit_soft_prompt_from_library
    from policies.vla.soft_prompt_checkpoint import save_maps

    total = sum(inst.split == "train" for inst in LIBRARY.values())
    t0 = time.perf_counter()
    with progress_bar(total, "soft-prompt references") as handle:
        done = [0]

        def advance(n: int) -> None:
            handle(n)
            done[0] += n
            if not progress_enabled() and (done[0] % 10 == 0 or done[0] == total):
                print(f"soft-prompt references: {done[0]}/{total} objects ({time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr, flush=True)

        maps = fit_soft_prompt_from_library(load_text_encoder(), on_progress=advance)
    command = ("python -m launch.train_soft_prompt " + shlex.join(sys.argv[1:] if argv is None else argv)).strip()
    training = {"command": command,
                "objects": total, "ridge": 1.0, "render_size": 160, "references": 4,
                "fit_s": round(time.perf_counter() - t0, 1), "date": datetime.date.today().isoformat()}
    manifest = save_maps(maps, args.out, training)
    print(f"soft-prompt maps ({', '.join(manifest['kinds'])}) from {total} train objects in {args.out}; sha256 "
          f"{manifest['sha256'][:12]}…; {training['fit_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
