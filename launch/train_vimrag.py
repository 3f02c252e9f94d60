"""Train VimRAG's reader and planner explicitly (evaluation never trains them) and store them with a manifest.

    python -m launch.train_vimrag                         # the shipped parts: corpus seed 0 → checkpoints/vimrag
    python -m launch.train_vimrag --corpus-dir my_corpus  # a saved corpus: parts go next to it, where eval looks

Builds (or reuses) the corpus and its encodings, trains the reader (``policies.vimrag.reader.train_reader``) and
then the planner exactly as the studies do (``agents.vimrag.stack.train_best_planner``: four GGPO runs, best on
dev kept), showing a progress bar (plain progress lines when stderr is not a terminal). Writes ``reader_seed<R>.pt``,
``planner_v<V>_<credit>_seed<S>.pt`` and ``manifest.json`` (sha256 of each file, the command, the curves) into
``--out``. One thread: the same arguments on the same machine give the same bytes.
"""

from __future__ import annotations

import datetime
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.atomic_io import atomic_path, write_json_atomic
from envs.errors import ConfigError
from launch.cli import ArgumentParser, main_guard
from sim_benchmarks.progress import progress_bar, progress_enabled
from sim_benchmarks.results_folder import check_out_dir


class _Progress:
    """A rich bar on a terminal; otherwise one plain stderr line per logged point (so a piped run is not silent)."""

    def __init__(self, handle, label: str, total: int) -> None:
        self.handle, self.label, self.total, self.done, self.t0 = handle, label, total, 0, time.perf_counter()

    def to(self, done: int, note: str = "") -> None:
        self.handle(max(0, done - self.done))
        self.done = max(self.done, done)
        if not progress_enabled():
            print(f"{self.label}: {self.done}/{self.total} {note} ({time.perf_counter() - self.t0:.0f} s)",
                  file=sys.stderr, flush=True)


def _write_manifest(out: Path, entry: dict[str, Any], files: dict[str, Path]) -> dict[str, Any]:
    """Add ``files`` (name → path in ``out``) to ``out``'s manifest (kept when it is of the same corpus)."""
    from agents.vimrag.shipped import FORMAT, read_manifest
    from envs.paths import sha256_file

    try:
        old = read_manifest(out)
    except ConfigError:
        old = None
    same = old is not None and all(old.get(k) == entry[k] for k in ("corpus_version", "corpus_seed", "corpus_dir"))
    manifest = old if same else {"format": FORMAT, **{k: entry[k] for k in ("corpus_version", "corpus_seed",
                                                                          "corpus_dir")}, "files": {}}
    for name, path in files.items():
        manifest["files"][name] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    manifest["command"] = entry["command"]
    manifest.setdefault("training", {}).update(entry["training"])
    write_json_atomic(out / "manifest.json", manifest)
    return manifest


@main_guard
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="launch.train_vimrag", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus-seed", type=int, default=0, help="seed of the generated corpus")
    parser.add_argument("--corpus-dir", type=Path, default=None, help="a saved corpus instead of the generated one")
    parser.add_argument("--reader-seed", type=int, default=0)
    parser.add_argument("--planner-seed", type=int, default=0)
    parser.add_argument("--credit", default="ggpo", help="planner credit: ggpo or trajectory")
    parser.add_argument("--reader-steps", type=int, default=1600, help="reader training steps (default: as shipped)")
    parser.add_argument("--planner-episodes", type=int, default=None,
                        help="episodes per planner run (default: as shipped; fewer only for smoke tests)")
    parser.add_argument("--out", type=Path, default=None,
                        help="default: checkpoints/vimrag for corpus seed 0, else the corpus' own folder")
    args = parser.parse_args(argv)
    from agents.vimrag.ggpo import CREDITS
    from envs.errors import choice_error

    for name in ("corpus_seed", "reader_seed", "planner_seed"):
        if getattr(args, name) < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.reader_steps < 1 or (args.planner_episodes is not None and args.planner_episodes < 1):
        raise ConfigError(f"--reader-steps and --planner-episodes must be >= 1, got {args.reader_steps}, "
                          f"{args.planner_episodes}")
    if args.credit not in CREDITS:
        raise choice_error("--credit", args.credit, CREDITS)
    if args.corpus_dir is not None and not (args.corpus_dir / "corpus.json").is_file():
        raise ConfigError(f"--corpus-dir {str(args.corpus_dir)!r} holds no corpus.json")
    from agents.vimrag.shipped import SHIPPED
    from envs.rag.corpus import CORPUS_VERSION, corpus_dir

    if args.out is None:
        args.out = args.corpus_dir if args.corpus_dir is not None else (
            SHIPPED if args.corpus_seed == 0 else corpus_dir(args.corpus_seed))
    check_out_dir(args.out)
    torch.set_num_threads(1)  # the same bytes for the same seeds

    from agents.vimrag.ggpo import TrainConfig
    from agents.vimrag.stack import PLANNER_RESTARTS, Stack, planner_path, train_best_planner
    from policies.vimrag.knowledge_base import load_knowledge_base
    from policies.vimrag.reader import VisualReader, reader_path, train_reader
    from policies.vimrag.tools import RetrievalTools

    t0 = time.perf_counter()
    print("vimrag: corpus and encodings (built and cached on first use, a few minutes) ...", file=sys.stderr,
          flush=True)
    folder = None if args.corpus_dir is None else str(args.corpus_dir)
    kb = load_knowledge_base(args.corpus_seed, folder)
    t_kb = time.perf_counter() - t0

    reader_steps = args.reader_steps
    losses: list[float] = []
    with progress_bar(reader_steps, "reader") as handle:
        bar = _Progress(handle, "reader steps", reader_steps)

        def reader_log(point: dict) -> None:
            losses.append(float(point["loss"]))
            bar.to(int(point["step"]) + 1, f"loss {point['loss']:.3f}")

        net = train_reader(kb, args.reader_seed, steps=reader_steps, log=reader_log)
    t_reader = time.perf_counter() - t0 - t_kb
    args.out.mkdir(parents=True, exist_ok=True)
    reader_file = reader_path(args.out, args.reader_seed)
    with atomic_path(reader_file) as tmp:
        torch.save(net.state_dict(), tmp)

    where = args.corpus_dir if args.corpus_dir is not None else corpus_dir(args.corpus_seed)
    stack = Stack(kb, RetrievalTools(kb), VisualReader(kb, net.eval()), Path(where), args.reader_seed,
                  args.corpus_dir is None)
    episodes = args.planner_episodes or TrainConfig().episodes
    total = PLANNER_RESTARTS * episodes
    with progress_bar(total, f"planner ({PLANNER_RESTARTS} {args.credit} runs)") as handle:
        bar = _Progress(handle, "planner episodes", total)

        def planner_log(k: int, point: dict) -> None:
            # A run ends on the first whole batch (8 questions x 8 rollouts) at or past its episode count.
            done = k * episodes + min(int(point["episodes"]), episodes)
            bar.to(done, f"run {k + 1}: dev accuracy {point['dev_accuracy']:.3f}")

        planner, curves = train_best_planner(stack, args.credit, args.planner_seed, log=planner_log,
                                             episodes=args.planner_episodes)
    t_planner = time.perf_counter() - t0 - t_kb - t_reader
    planner_file = args.out / planner_path(stack, args.credit, args.planner_seed).name
    planner.save(planner_file)

    finals = [c[-1]["dev_accuracy"] for c in curves]
    command = ("python -m launch.train_vimrag " + shlex.join(sys.argv[1:] if argv is None else argv)).strip()
    training = {
        reader_file.name: {"seed": args.reader_seed, "steps": reader_steps,
                           "loss_first": round(float(np.mean(losses[:2])), 4),
                           "loss_last": round(float(np.mean(losses[-2:])), 4), "train_s": round(t_reader, 1)},
        planner_file.name: {"seed": args.planner_seed, "credit": args.credit, "runs": PLANNER_RESTARTS,
                            "episodes_per_run": episodes, "final_dev_accuracy": [round(a, 4) for a in finals],
                            "kept_run": int(np.argmax(finals)), "train_s": round(t_planner, 1),
                            "reader": reader_file.name},
        "corpus_and_encodings_s": round(t_kb, 1),
        "date": datetime.date.today().isoformat(),
    }
    entry = {"corpus_version": CORPUS_VERSION, "corpus_seed": args.corpus_seed,
             "corpus_dir": None if args.corpus_dir is None else str(args.corpus_dir), "command": command,
             "training": training}
    _write_manifest(args.out, entry, {reader_file.name: reader_file, planner_file.name: planner_file})
    print(f"vimrag parts in {args.out}: {reader_file.name} (loss {training[reader_file.name]['loss_first']} → "
          f"{training[reader_file.name]['loss_last']}), {planner_file.name} (dev accuracy of the "
          f"{PLANNER_RESTARTS} runs {', '.join(f'{a:.3f}' for a in finals)}); {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
