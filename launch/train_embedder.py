"""Train the instance embedder (a head on frozen MobileNetV2 features) from simulator crops of train designs only.

    python -m launch.train_embedder --seed 0 --out checkpoints/instance_embedder

Data: the first frames of ``--episodes`` seeded ``generic_simpler`` episodes per task on the ``train_extended``
split (train-split + extra designs; never a test design), cut into candidates by VAP's own proposal detector and
labelled by instance (simulator segmentation), plus the episode's reference renders of the target (masked as the
matcher masks references). Each crop also gets ``--augmentations`` random views (zoom/shift, mirror, light, an
occluding bar). Training: supervised contrastive over instance ids, one category per batch with same-colour /
same-pattern look-alikes as up-weighted hard negatives (``perception.instance_embedder``). Writes ``head.pt``,
``head.pt.sha256`` and ``manifest.json`` into ``--out``. Same seed and arguments → the same bytes (one thread).
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from envs.errors import ConfigError
from envs.manipulation.objects import find_instance
from launch.cli import ArgumentParser, main_guard, require_positive
from perception.candidate import OBJECT_CROP, object_crop
from perception.instance_embedder import HeadConfig, Sample, TrainConfig, featurise, save_head, train_head
from perception.matching import reference_mask
from sim_benchmarks import registry
from sim_benchmarks.results_folder import check_out_dir

TASKS = ("fractal_pick", "fractal_move_near", "bridge_pick", "bridge_put_on")
SPLIT = "train_extended"


def collect_samples(episodes: int, seed: int, tasks: tuple[str, ...] = TASKS) -> list[Sample]:
    """Labelled object crops (scene candidates + reference renders) from train-split and extra designs."""
    from sim_benchmarks.studies.vap.instance_retrieval import candidate_sets

    samples: list[Sample] = []
    seen_refs: set[str] = set()
    for cs in candidate_sets("generic_simpler", tasks, episodes, seed, {"split": SPLIT}, keep_all=True):
        for mask, iid in zip(cs.masks, cs.instance_ids, strict=True):
            if iid is None:
                continue
            inst = find_instance(iid)
            if inst.split == "test":  # cannot happen on this split; the guard keeps held-out designs out for sure
                raise ConfigError(f"test design {iid} reached embedder training")
            samples.append(Sample(object_crop(cs.image, mask, OBJECT_CROP)[0], iid, inst.category, inst.colour,
                                  inst.pattern))
        if cs.target not in seen_refs:  # a target's references are the same every episode
            seen_refs.add(cs.target)
            inst = find_instance(cs.target)
            for ref in cs.references:
                samples.append(Sample(object_crop(ref, reference_mask(ref), OBJECT_CROP)[0], cs.target,
                                      inst.category, inst.colour, inst.pattern))
    return samples


@main_guard
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="launch.train_embedder", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", writes="folder", type=Path, default=Path("checkpoints/instance_embedder"))
    parser.add_argument("--episodes", type=int, default=240, min=1, max=100_000,
                        help="generic_simpler episodes per task")
    parser.add_argument("--augmentations", type=int, default=3, min=0, max=1000, help="random views per crop")
    parser.add_argument("--steps", type=int, default=TrainConfig.steps, min=1, max=10_000_000)
    args = parser.parse_args(argv)
    require_positive(args, ("episodes", "steps"))
    if args.augmentations < 0:
        raise ConfigError(f"--augmentations must be >= 0, got {args.augmentations}")
    check_out_dir(args.out)
    torch.set_num_threads(1)  # byte-identical weights for a seed
    registry.load_all()
    t0 = time.perf_counter()
    samples = collect_samples(args.episodes, args.seed)
    t_collect = time.perf_counter() - t0
    feats, origin = featurise(samples, args.augmentations, args.seed)
    t_feat = time.perf_counter() - t0 - t_collect
    cfg = TrainConfig(steps=args.steps, seed=args.seed)
    head_cfg = HeadConfig()
    head, losses = train_head(feats, origin, samples, head_cfg, cfg)
    training = {"command": "python -m launch.train_embedder " + shlex.join(sys.argv[1:] if argv is None else argv),
                "seed": args.seed, "episodes_per_task": args.episodes, "tasks": list(TASKS), "split": SPLIT,
                "crops": len(samples), "rows": len(origin), "instances": len({s.instance_id for s in samples}),
                "augmentations": args.augmentations, "train": asdict(cfg),
                "loss_first": round(float(np.mean(losses[:20])), 4),
                "loss_last": round(float(np.mean(losses[-20:])), 4),
                "collect_s": round(t_collect, 1), "featurise_s": round(t_feat, 1),
                "train_s": round(time.perf_counter() - t0 - t_collect - t_feat, 1)}
    manifest = save_head(head, args.out, head_cfg, training)
    print(f"instance embedder: {training['instances']} instances, {training['crops']} crops ({training['rows']} "
          f"rows), loss {training['loss_first']} → {training['loss_last']}; sha256 {manifest['sha256'][:12]}… "
          f"in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
