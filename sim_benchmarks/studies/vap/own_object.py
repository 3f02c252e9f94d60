"""Bring your own object: VAP's first-step grounding on a user's photo print among look-alikes made from it.

    python -m launch.study vap.own_object grounding --photos heldout --episodes 4 --seed 72000 --out runs/own_g
    python -m launch.study vap.own_object episodes --photos heldout --episodes 2 --seed 72000 --out runs/own_e
    python -m launch.study vap.own_object builtin --episodes 50 --seed 10000 --out runs/own_builtin
    python -m launch.study vap.own_object sheet --out docs/results/user_lookalikes.png

A *user object* is one photograph given as ``personal_texture`` on a mug or a box (``--categories``), among the
env's look-alikes made from it (recoloured, recropped, mirrored or turned upside down, another photo). Photos
come in two sets: ``dev`` (the four that ship with matplotlib / scikit-learn, also the source of the
``other_photo`` look-alikes; everything was chosen on them) and ``heldout`` (four other photographs that ship
inside installed packages, used only to report).

* ``grounding`` — per scene, each matcher variant's first-step choice (VAP over the scripted expert: grounding does
  not depend on the base), labelled by the look-alike kind it picked, with the cue that put it first and by how
  much (each cue's share of the logit gap between the chosen candidate and the user's object).
  ``--references photos`` gives VAP synthetic phone photos of the object (``personal_references``, written under
  ``OUT/phone_photos``) instead of the env's renders.
* ``episodes`` — full episodes of ``vap`` (the variant ``--variant``) and ``oracle_mask`` on the frozen generic
  base: success and correct object (``--policies vap`` runs one of them; ``summary`` pairs runs by episode).
* ``builtin`` — first-step grounding of two variants on the built-in test designs (paired, same frames).
* ``speed`` — VAP's first step (detect, match, track start, prompt; the scripted expert underneath costs ~nothing)
  per variant on one thread, as CPU time of the process (``time.process_time``: on a shared machine wall time
  mostly measures the neighbours) and wall time, on a user object (the first photo, a mug) and on built-in designs.
* ``summary`` — the grounding summary over the rows of several ``grounding`` runs (``--from DIR,DIR``: e.g. one
  run per photograph, ``--photo``, run side by side) and the episodes of several ``episodes`` runs.
* ``sheet`` — a contact sheet of one scene's objects, one per look-alike kind.

Variants: ``blend`` (VAP before the layout cue: embedding, colour, keypoints over 4 phone-like renders),
``layout`` (VAP's default now: the same plus the print-layout cue, with 16 more renders from the robot cameras'
elevation for a user object) and ``second_pass`` (``layout`` as it was before the category prior's floor and the
keypoint savings; grounding and speed only). Writes ``own_object.json`` + ``README.md`` (the sheet: the PNG alone).
"""

from __future__ import annotations

import io
import json
import math
import os
import shlex
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError, choice_error
from envs.manipulation.lookalikes import LOOKALIKE_KINDS, stock_photo_paths
from envs.statistics import wilson_ci
from sim_benchmarks import registry
from sim_benchmarks.cli import ArgumentParser, main_guard
from sim_benchmarks.results_folder import check_out_dir
from sim_benchmarks.studies.aux.results import bootstrap_ci
from sim_benchmarks.studies.vap.vap_benchmark import SUITE, make_vap
from sim_benchmarks.thread_pools import check_thread_pools, limit_threads

PARTS = ("grounding", "episodes", "builtin", "speed", "sheet", "summary")
CATEGORIES = ("mug", "box")
OLD_CUES = "embedding,colour,keypoints"
# variant -> (VAP policy options, env options for a user object)
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "blend": ({"vap_matcher_embedder": "blend", "vap_components": OLD_CUES}, {"reference_views": 0}),
    "layout": ({"vap_matcher_embedder": "blend", "vap_components": OLD_CUES + ",layout"}, {"reference_views": 16}),
}
# The second pass of the layout matcher as it was (the category prior relative to the scene's best score, keypoints
# against 5 best-layout references, never skipped), for paired comparisons on the same frames: ``layout`` with
# these VAPConfig / MatcherConfig fields put back. Grounding and speed only (a study-side override, not an option).
PAST: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "second_pass": ({"user_prior_floor": 0.0}, {"layout_keypoint_refs": 5, "keypoint_skip_gap": math.inf})}
VARIANTS["second_pass"] = VARIANTS["layout"]
REFERENCE_SOURCES = ("renders", "photos")
EPISODE_POLICIES = ("vap", "oracle_mask")
# Kinds as the study reports them: a mirrored print is split into its two draws.
KINDS = ("recoloured", "recropped", "mirror_lr", "upside_down", "other_photo")


def heldout_photo_paths() -> list[Path]:
    """Photographs that ship inside installed packages other than the look-alike sources: pygame's webcam
    frame (a house and a tree) and fist, pybullet's racing-car wheel and motor product photo."""
    import pybullet_data

    paths = [Path(pybullet_data.getDataPath()) / "racecar" / "meshes" / "wheel.jpg",
             Path(pybullet_data.getDataPath()) / "quadruped" / "t-motor.jpg"]
    try:
        import pygame

        root = Path(pygame.__file__).parent
        paths = [root / "docs" / "generated" / "_images" / "camera_rgb.jpg", root / "examples" / "data" / "fist.png",
                 *paths]
    except ImportError:  # pygame is optional: the two pybullet photographs remain
        pass
    return [p for p in paths if p.is_file()]


def photo_set(name: str) -> list[Path]:
    """``dev`` (the look-alike sources) or ``heldout`` photographs."""
    if name not in ("dev", "heldout"):
        raise choice_error("photo set", name, ("dev", "heldout"))
    photos = stock_photo_paths() if name == "dev" else heldout_photo_paths()
    if not photos:
        raise ConfigError(f"no {name} photographs found in the installed packages")
    return photos


def phone_photos(texture: str, category: str, folder: Path, count: int = 3) -> list[str]:
    """Synthetic stand-ins for a user's phone photos of the object: renders from other viewpoints and light than
    the env's references (another seed), at 320 px, turned by a few degrees, slightly blurred, saved as JPEG."""
    from PIL import Image, ImageFilter

    from envs.manipulation.personal import PersonalObject, render_references

    folder.mkdir(parents=True, exist_ok=True)
    obj = PersonalObject.from_texture(texture, category)
    refs = render_references(obj, 320, count, salt="phone")
    rng = np.random.default_rng(len(refs.images))
    paths = []
    for k, img in enumerate(refs.images):
        im = Image.fromarray(img).rotate(float(rng.uniform(-6, 6)), resample=Image.BILINEAR,
                                         fillcolor=tuple(int(c) for c in np.median(img[:4].reshape(-1, 3), axis=0)))
        im = im.filter(ImageFilter.GaussianBlur(0.6))
        path = folder / f"photo_{k}.jpg"
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=85)
        path.write_bytes(buf.getvalue())
        paths.append(str(path))
    return paths


def make_variant(env: Any, task: str, variant: str) -> Any:
    """The ``vap`` policy of a variant (a past one with its config fields put back)."""
    policy = make_vap(env, task, VARIANTS[variant][0])
    vap_fields, matcher_fields = PAST.get(variant, ({}, {}))
    policy.config = replace(policy.config, **vap_fields)
    policy.matcher.config = replace(policy.matcher.config, **matcher_fields)
    return policy


def _kind(instance_id: str | None, target: str, sub: dict[str, str]) -> str:
    if instance_id is None:
        return "no single object"
    if instance_id == target:
        return "mine"
    return sub.get(instance_id, "library" if not instance_id.startswith(target + "-") else "other")


class _Recorder:
    """Wraps one VAP policy to keep its first-step candidates, cue values and final scores."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.last = policy, {}
        score, with_cues = policy._score, policy.matcher.score_with_cues

        def cues(image, cands):
            probs, values = with_cues(image, cands)
            self.last["cues"] = values
            return probs, values

        def scored(image, cands):
            final, best = score(image, cands)
            self.last.update(cands=list(cands), final=final, best=best)
            return final, best

        policy.matcher.score_with_cues = cues
        policy._score = scored


def _explain(rec: dict[str, Any], target_idx: int, matcher: Any) -> dict[str, float]:
    """Each cue's share of the logit gap between the chosen candidate and the user's object."""
    from perception.matching import margins, overlap_matrix

    cfg, b = matcher.config, rec["best"]
    ov = overlap_matrix([c.mask for c in rec["cands"]])
    out = {}
    for name, val in rec["cues"].items():
        m = margins(val, ov)
        out[name] = round(float(cfg.weights_abs[name] * (val[b] - val[target_idx])
                                + cfg.weights_rel[name] * (m[b] - m[target_idx])), 3)
    return out


@contextmanager
def labelled_lookalikes() -> Iterator[dict[str, str]]:
    """While open, every look-alike the env makes is recorded in the yielded dict (instance id -> kind as the
    study reports it: a mirrored print as ``mirror_lr`` or ``upside_down``)."""
    import envs.manipulation.env as env_module

    sub: dict[str, str] = {}
    made = env_module.user_lookalikes

    def labelled(user, texture, count, rng):
        pairs = made(user, texture, count, rng)
        for inst, tex in pairs:
            kind = inst.instance_id.rsplit("-", 1)[1].rstrip("0123456789")
            if kind == "mirrored":
                kind = "mirror_lr" if np.array_equal(tex, texture[:, ::-1]) else "upside_down"
            sub[inst.instance_id] = kind
        return pairs

    env_module.user_lookalikes = labelled
    try:
        yield sub
    finally:
        env_module.user_lookalikes = made


def kinds_present(photo: Path, category: str, task: str, seeds: Sequence[int]) -> dict[int, list[str]]:
    """The look-alike kinds in each seed's scene of a user object (the env reset alone: no policy runs)."""
    out = {}
    with labelled_lookalikes() as sub:
        env = registry.suites()[SUITE].make_env(task, {"personal_texture": str(photo), "personal_category": category})
        try:
            for seed in seeds:
                _, info = env.reset(seed=int(seed))
                out[int(seed)] = sorted(sub.get(d, d) for d in info["distractors"])
        finally:
            env.close()
    return out


def grounding_rows(photos: list[Path], categories: Sequence[str], tasks: Sequence[str], episodes: int, seed: int,
                   variants: Sequence[str], references: str, out: Path) -> list[dict[str, Any]]:
    """One row per scene and variant: correct, the kind chosen, kinds present, cue shares of a miss."""
    from policies.vap.modeling import _majority_id

    rows: list[dict[str, Any]] = []
    with labelled_lookalikes() as sub:
        for photo in photos:
            for cat in categories:
                base = {"privileged": True, "personal_texture": str(photo), "personal_category": cat}
                if references == "photos":
                    base["personal_references"] = ",".join(
                        phone_photos(str(photo), cat, out / "phone_photos" / f"{photo.stem}_{cat}"))
                for task in tasks:
                    # Own seeds per photo, category and task: the look-alikes' count and kinds come from the seed.
                    first = seed + 1000 * (zlib.crc32(f"{photo.name}/{cat}/{task}".encode()) % 1000)
                    # One env for every variant: its reference set is the 4 phone-like renders (or photos) and then
                    # the robot-view renders, so a variant without them reads the first part (the same images).
                    env = registry.suites()[SUITE].make_env(task, {**base, "reference_views": 16})
                    pols = {v: _Recorder(make_variant(env, task, v)) for v in variants}
                    try:
                        for i in range(episodes):
                            obs, info = env.reset(seed=first + i)
                            state = env.unwrapped.privileged_state()
                            by_body = {o["body"]: o["instance_id"] for o in state["objects"]}
                            target = by_body[env.unwrapped.personal_body_id]
                            for v in variants:
                                rec, refs = pols[v], info["reference_images"]
                                if not VARIANTS[v][1]["reference_views"]:
                                    refs = refs[: len(refs) - 16]
                                rec.last = {}
                                rec.policy.reset(obs["instruction"], {**info, "reference_images": refs,
                                                                      "policy_seed": first + i})
                                rec.policy.act(obs)
                                row = {"photo": photo.name, "category": cat, "task": task, "seed": first + i,
                                       "variant": v, "references": len(refs),
                                       "present": sorted(sub.get(d, d) for d in info["distractors"]),
                                       "correct": bool(rec.policy.grounding_correct)}
                                if rec.policy.chosen is None:
                                    row["chosen"] = "fallback"
                                else:
                                    seg = obs["segmentation"]
                                    ids = [by_body.get(_majority_id(seg, c.mask)) for c in rec.last["cands"]]
                                    row["chosen"] = _kind(by_body.get(_majority_id(seg, rec.policy.chosen.mask)),
                                                          target, sub)
                                    if not row["correct"] and target in ids:
                                        row["cue_shares"] = _explain(rec.last, ids.index(target),
                                                                     rec.policy.matcher)
                                    elif not row["correct"]:
                                        row["cue_shares"] = "user object not among the candidates"
                                rows.append(row)
                    finally:
                        env.close()
                print(f"  {photo.name} {cat}: {len(rows)} rows", file=sys.stderr, flush=True)
    return rows


def _rate(k: int, n: int) -> dict[str, Any]:
    return {"k": k, "n": n, "rate": k / max(n, 1), "ci95": list(wilson_ci(k, n))}


def summarise_grounding(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per variant: grounding overall, per category, per task and per look-alike kind present; misses by the kind
    chosen with the median cue shares; paired differences between variants (bootstrap over scenes)."""
    variants = sorted({r["variant"] for r in rows})
    out: dict[str, Any] = {"variants": {}, "paired": {}}
    for v in variants:
        rs = [r for r in rows if r["variant"] == v]
        res: dict[str, Any] = {"overall": _rate(sum(r["correct"] for r in rs), len(rs))}
        for key in ("category", "task", "photo"):
            res[f"per_{key}"] = {x: _rate(sum(r["correct"] for r in rs if r[key] == x), sum(r[key] == x for r in rs))
                                 for x in sorted({r[key] for r in rs})}
        res["per_kind_present"] = {k: _rate(sum(r["correct"] for r in rs if k in r["present"]),
                                            sum(k in r["present"] for r in rs)) for k in KINDS}
        misses = [r for r in rs if not r["correct"]]
        res["misses_by_chosen"] = dict(Counter(r["chosen"] for r in misses).most_common())
        shares: dict[str, dict[str, Any]] = {}
        for kind in res["misses_by_chosen"]:
            expl = [r["cue_shares"] for r in misses if r["chosen"] == kind and isinstance(r.get("cue_shares"), dict)]
            if expl:
                cues = expl[0].keys()
                shares[kind] = {"misses_explained": len(expl),
                                "median_share": {c: round(float(np.median([e[c] for e in expl])), 2) for c in cues},
                                "top_cue": dict(Counter(max(e, key=e.get) for e in expl).most_common()),
                                "median_gap": round(float(np.median([sum(e.values()) for e in expl])), 2)}
        res["cue_shares"] = shares
        out["variants"][v] = res
    key = {v: {(r["photo"], r["category"], r["task"], r["seed"]): r["correct"] for r in rows if r["variant"] == v}
           for v in variants}
    for a in variants:
        for b in variants:
            if a < b:
                common = sorted(set(key[a]) & set(key[b]))
                m, lo, hi = bootstrap_ci([int(key[b][k]) - int(key[a][k]) for k in common])
                out["paired"][f"{b} - {a}"] = {"diff": m, "ci95": [lo, hi], "n": len(common)}
    return out


def episodes_part(photos: list[Path], categories: Sequence[str], episodes: int, seed: int, variant: str,
                  out: Path, policies: Sequence[str] = EPISODE_POLICIES) -> dict[str, Any]:
    """Full episodes of ``vap`` (``variant``) and ``oracle_mask`` (or one of them: ``policies``) on the generic
    base, every task."""
    from sim_benchmarks.evaluation import EvalConfig, run_evaluation

    opts, env_opts = VARIANTS[variant]
    records: dict[str, list[dict[str, Any]]] = {"vap": [], "oracle_mask": []}
    for photo in photos:
        for cat in categories:
            folder = out / "episodes" / f"{photo.stem}_{cat}"
            # a base seed per user object: the episode seeds (and so the look-alikes drawn) differ between objects
            obj_seed = seed + 1000 * (zlib.crc32(f"{photo.name}/{cat}".encode()) % 1000)
            cfg = EvalConfig(env=SUITE, policies=list(policies), episodes=episodes, seed=obj_seed, workers=1,
                             out=folder, resume=(folder / "episodes.jsonl").exists(),
                             env_options={"personal_texture": str(photo), "personal_category": cat, **env_opts},
                             policy_options=opts)
            _, where = run_evaluation(cfg)
            for line in (where / "episodes.jsonl").read_text().splitlines():
                r = json.loads(line)
                records[r["policy"]].append({**r, "photo": photo.stem, "category": cat})
            print(f"  {photo.name} {cat}: done", file=sys.stderr, flush=True)
    add_kinds(records)
    return summarise_episodes(records, categories)


def add_kinds(records: dict[str, list[dict[str, Any]]]) -> None:
    """Each episode record gets ``kinds``: the look-alike kinds in its scene (rebuilt from its env seed)."""
    paths = {p.stem: p for name in ("dev", "heldout") for p in photo_set(name)}
    groups: dict[tuple[str, str, str], set[int]] = {}
    for rs in records.values():
        for r in rs:
            groups.setdefault((r["photo"], r["category"], r["task"]), set()).add(int(r["seed"]))
    kinds = {key: kinds_present(paths[key[0]], key[1], key[2], sorted(seeds)) for key, seeds in groups.items()}
    for rs in records.values():
        for r in rs:
            r["kinds"] = kinds[(r["photo"], r["category"], r["task"])][int(r["seed"])]


def merge_episodes(folders: list[Path]) -> dict[str, Any]:
    """The summary over the episodes written so far by several ``episodes`` runs (a stopped run counts the
    episodes it finished: only pairs that both policies finished are compared)."""
    records: dict[str, list[dict[str, Any]]] = {"vap": [], "oracle_mask": []}
    for folder in folders:
        for run in sorted((folder / "episodes").glob("*/episodes.jsonl")):
            photo, cat = run.parent.name.rsplit("_", 1)
            for line in run.read_text().splitlines():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:  # a torn last line of a stopped run
                    continue
                records[r["policy"]].append({**r, "photo": photo, "category": cat})
    add_kinds(records)
    return summarise_episodes(records, sorted({r["category"] for rs in records.values() for r in rs}))


def summarise_episodes(records: dict[str, list[dict[str, Any]]], categories: Sequence[str]) -> dict[str, Any]:
    """Success, correct object and grounding per policy with Wilson CIs; vap − oracle_mask paired (bootstrap)."""
    res: dict[str, Any] = {"records": records}
    for pol, rs in records.items():
        res[pol] = {m: _rate(sum(bool(r.get(m)) for r in rs), len(rs))
                    for m in ("success", "correct_object", "grounding_correct")}
        res[pol]["per_category"] = {c: _rate(sum(bool(r["correct_object"]) for r in rs if r["category"] == c),
                                             sum(r["category"] == c for r in rs)) for c in categories}
        res[pol]["per_task"] = {t: _rate(sum(bool(r["correct_object"]) for r in rs if r["task"] == t),
                                         sum(r["task"] == t for r in rs)) for t in sorted({r["task"] for r in rs})}
        if all("kinds" in r for r in rs):  # correct object in the scenes where each look-alike kind stood
            res[pol]["per_kind_present"] = {
                k: _rate(sum(bool(r["correct_object"]) for r in rs if k in r["kinds"]),
                         sum(k in r["kinds"] for r in rs)) for k in KINDS}
    key = {p: {(r["photo"], r["category"], r["task"], r["seed"], r["episode"]): r for r in rs}
           for p, rs in records.items()}
    common = sorted(set(key["vap"]) & set(key["oracle_mask"]))
    for m in ("success", "correct_object") if common else ():  # nothing paired when one policy was not run
        d, lo, hi = bootstrap_ci([int(bool(key["vap"][k][m])) - int(bool(key["oracle_mask"][k][m])) for k in common])
        res[f"vap - oracle_mask {m}"] = {"diff": d, "ci95": [lo, hi], "n": len(common)}
    return res


def builtin_part(episodes: int, seed: int, tasks: Sequence[str]) -> dict[str, Any]:
    """First-step grounding of both variants on the built-in test designs, the same frames (paired)."""
    from sim_benchmarks.studies.vap.vap_benchmark import grounding_variants

    variants = ("blend", "layout")  # built-in designs: the layout cue and all that came with it is gated off
    rows = {v: [] for v in variants}
    for task in tasks:
        res = grounding_variants(task, episodes, seed, {v: VARIANTS[v][0] for v in variants})
        for v in variants:
            rows[v] += [{"task": task, **r} for r in res[v]["rows"]]
        print(f"  {task}: " + ", ".join(f"{v} {res[v]['correct']}/{res[v]['episodes']}" for v in variants),
              file=sys.stderr, flush=True)
    out: dict[str, Any] = {v: {"overall": _rate(sum(r["correct"] for r in rs), len(rs)),
                               "per_task": {t: _rate(sum(r["correct"] for r in rs if r["task"] == t),
                                                     sum(r["task"] == t for r in rs)) for t in tasks}}
                           for v, rs in rows.items()}
    d, lo, hi = bootstrap_ci([int(b["correct"]) - int(a["correct"]) for a, b in zip(rows["blend"], rows["layout"],
                                                                                     strict=True)])
    out["paired layout - blend"] = {"diff": d, "ci95": [lo, hi], "n": len(rows["blend"])}
    return out


def speed_part(photo: Path, episodes: int, seed: int, task: str = "fractal_pick_my") -> dict[str, Any]:
    """Median CPU and wall milliseconds of VAP's first ``act`` per variant, user object and built-in designs."""
    # One core really: torch's pool and numpy's BLAS pool (which otherwise spins a second thread whose CPU time
    # the process clock counts) both capped at one thread, and read back into the result.
    limit_threads(1)
    out: dict[str, Any] = {"task": task, "photo": photo.name, "episodes": episodes, "load_before": os.getloadavg()}
    for where, extra in (("user object", {"personal_texture": str(photo), "personal_category": "mug"}),
                         ("built-in", {})):
        for v, (_opts, env_opts) in VARIANTS.items():
            env = registry.suites()[SUITE].make_env(task, {"privileged": True, **extra,
                                                           **(env_opts if extra else {})})
            try:
                policy = make_variant(env, task, v)
                cpu, wall = [], []
                for i in range(-2, episodes):  # two warm-up episodes: weights, caches
                    obs, info = env.reset(seed=seed + i)
                    policy.reset(obs["instruction"], {**info, "policy_seed": seed + i})
                    c0, w0 = time.process_time(), time.perf_counter()
                    policy.act(obs)
                    if i >= 0:
                        cpu.append(1000 * (time.process_time() - c0))
                        wall.append(1000 * (time.perf_counter() - w0))
            finally:
                env.close()
            out[f"{where} / {v}"] = {"cpu_ms_median": round(float(np.median(cpu)), 2),
                                     "wall_ms_median": round(float(np.median(wall)), 2),
                                     "references": len(info["reference_images"])}
            print(f"  {where} / {v}: {out[f'{where} / {v}']}", file=sys.stderr, flush=True)
    out["load_after"] = os.getloadavg()
    out["thread_pools"] = check_thread_pools(1)
    return out


def contact_sheet(photo: Path, category: str, seed: int, path: Path, size: int = 448) -> dict[str, Any]:
    """One scene's same-category objects (the user's and one look-alike of each kind), cropped from the robot
    camera's frame, above their flat prints; saved as a PNG."""
    from PIL import Image, ImageDraw

    from envs.manipulation.env import make_env
    from perception.candidate import object_crop

    env = make_env("fractal_pick_my", {"privileged": True, "personal_texture": str(photo),
                                       "personal_category": category, "num_distractors": 4, "image_size": size})
    try:
        obs, info = env.reset(seed=seed)
        state = env.unwrapped.privileged_state()
        made = {o.instance_id: o for o in env.unwrapped._objects}
        tiles = []
        for o in state["objects"]:
            if o["category"] != category:
                continue
            iid = o["instance_id"]
            label = "user's object" if o["role"] == "target" else iid.rsplit("-", 1)[1].rstrip("0123456789")
            crop, _ = object_crop(obs["image"], obs["segmentation"] == o["body"], 160)
            tiles.append((label, crop, made[iid]))
    finally:
        env.close()
    from envs.manipulation.objects import load_user_texture

    user_tex = load_user_texture(photo)
    w = 170
    sheet = Image.new("RGB", (w * len(tiles), 160 + 90 + 40), "white")
    draw = ImageDraw.Draw(sheet)
    for k, (label, crop, _) in enumerate(tiles):
        sheet.paste(Image.fromarray(crop), (k * w + 5, 25))
        draw.text((k * w + 8, 5), label, fill=(0, 0, 0))
    sheet.paste(Image.fromarray(user_tex).resize((160, 80)), (5, 195))
    draw.text((8, 278), "the user's print (flat)", fill=(0, 0, 0))
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)
    return {"photo": photo.name, "category": category, "seed": seed, "objects": [t[0] for t in tiles]}


def markdown(r: dict[str, Any]) -> str:
    """The result as markdown."""
    lines = [f"`{r['command']}`", ""]

    def pct(x: dict[str, Any]) -> str:
        return f"{100 * x['rate']:.1f} % ({x['k']}/{x['n']}) [{100 * x['ci95'][0]:.0f}–{100 * x['ci95'][1]:.0f}]"

    if "grounding" in r:
        g = r["grounding"]
        lines += ["| variant | first-step grounding | " + " | ".join(f"with {k}" for k in KINDS) + " |",
                  "| --- " * (len(KINDS) + 2) + "|"]
        for v, res in g["variants"].items():
            lines.append(f"| {v} | {pct(res['overall'])} | "
                         + " | ".join(pct(res["per_kind_present"][k]) for k in KINDS) + " |")
        lines.append("")
        for v, res in g["variants"].items():
            lines.append(f"- {v}: misses by the object chosen {res['misses_by_chosen']}; per category "
                         + ", ".join(f"{c} {pct(x)}" for c, x in res["per_category"].items()))
            for kind, s in res["cue_shares"].items():
                lines.append(f"  - chose {kind}: median logit gap {s['median_gap']}, median cue shares "
                             f"{s['median_share']}, largest share {s['top_cue']}")
        for name, d in g["paired"].items():
            lines.append(f"- paired {name}: {100 * d['diff']:+.1f} points [{100 * d['ci95'][0]:+.1f}, "
                         f"{100 * d['ci95'][1]:+.1f}] over {d['n']} scenes")
    if "episodes" in r:
        e = r["episodes"]
        lines += ["", "| policy | success | correct object | first-step grounding |", "| --- | --- | --- | --- |"]
        ran = [pol for pol in EPISODE_POLICIES if e[pol]["success"]["n"]]
        for pol in ran:
            lines.append(f"| {pol} | {pct(e[pol]['success'])} | {pct(e[pol]['correct_object'])} | "
                         f"{pct(e[pol]['grounding_correct'])} |")
        if ran and "per_kind_present" in e[ran[0]]:
            lines += ["", "| correct object, scenes with … | " + " | ".join(KINDS) + " |",
                      "| --- " * (len(KINDS) + 1) + "|"]
            for pol in ran:
                lines.append(f"| {pol} | " + " | ".join(pct(e[pol]["per_kind_present"][k]) for k in KINDS) + " |")
        for m in ("success", "correct_object") if "vap - oracle_mask success" in e else ():
            d = e[f"vap - oracle_mask {m}"]
            lines.append(f"\nvap − oracle_mask {m}: {100 * d['diff']:+.1f} points [{100 * d['ci95'][0]:+.1f}, "
                         f"{100 * d['ci95'][1]:+.1f}] over {d['n']} paired episodes")
    if "speed" in r:
        lines += ["", "| first VAP step (one thread) | references | CPU ms (median) | wall ms (median) |",
                  "| --- | --- | --- | --- |"]
        for k, x in r["speed"].items():
            if isinstance(x, dict):
                lines.append(f"| {k} | {x['references']} | {x['cpu_ms_median']} | {x['wall_ms_median']} |")
        lines.append(f"\nload average before {r['speed']['load_before']}, after {r['speed']['load_after']}")
    if "builtin" in r:
        b = r["builtin"]
        lines += ["", "| variant | built-in grounding |", "| --- | --- |"]
        for v in ("blend", "layout"):
            lines.append(f"| {v} | {pct(b[v]['overall'])} |")
        d = b["paired layout - blend"]
        lines.append(f"\npaired layout − blend: {100 * d['diff']:+.1f} points [{100 * d['ci95'][0]:+.1f}, "
                     f"{100 * d['ci95'][1]:+.1f}] over {d['n']} scenes")
    return "\n".join(lines)


@main_guard
def main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(prog="vap.own_object", description=__doc__.split("\n")[0])
    parser.add_argument("part", help=f"one of {', '.join(PARTS)}")
    parser.add_argument("--photos", default="heldout", help="dev or heldout")
    parser.add_argument("--photo", default="", help="only this photograph of the set (file name)")
    parser.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated: mug, box")
    parser.add_argument("--tasks", default="", help="comma-separated personalized_simpler tasks (default: all)")
    parser.add_argument("--episodes", type=int, default=4, help="scenes / episodes per task per photo and category")
    parser.add_argument("--seed", type=int, default=72000)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="grounding: comma-separated variants")
    parser.add_argument("--variant", default="layout", help="episodes: the vap variant")
    parser.add_argument("--policies", default=",".join(EPISODE_POLICIES),
                        help="episodes: comma-separated, vap and/or oracle_mask (summary pairs them by episode)")
    parser.add_argument("--references", default="renders", help="grounding: renders or photos")
    parser.add_argument("--from", dest="sources", default="", help="summary: comma-separated result folders")
    parser.add_argument("--out", type=Path, default=Path("runs/own_object"))
    args = parser.parse_args(argv)
    if args.part not in PARTS:
        raise choice_error("part", args.part, PARTS)
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be a positive integer, got {args.episodes}")
    if args.references not in REFERENCE_SOURCES:
        raise choice_error("reference source", args.references, REFERENCE_SOURCES)
    categories = [c for c in args.categories.split(",") if c]
    for c in categories or [""]:
        if c not in CATEGORIES:
            raise choice_error("category", c, CATEGORIES)
    variants = [v for v in args.variants.split(",") if v]
    for v in [*variants, args.variant] or [""]:
        if v not in VARIANTS:
            raise choice_error("variant", v, list(VARIANTS))
    if args.variant in PAST:
        raise choice_error("episodes variant", args.variant, [v for v in VARIANTS if v not in PAST])
    episode_policies = [p for p in args.policies.split(",") if p]
    for p in episode_policies or [""]:
        if p not in EPISODE_POLICIES:
            raise choice_error("episodes policy", p, EPISODE_POLICIES)
    photos = photo_set(args.photos)
    if args.photo:
        if args.photo not in [p.name for p in photos]:
            raise choice_error(f"{args.photos} photograph", args.photo, [p.name for p in photos])
        photos = [p for p in photos if p.name == args.photo]
    registry.load_all()
    every = list(registry.suites()[SUITE].tasks)
    tasks = [t for t in args.tasks.split(",") if t] or every
    for t in tasks:
        if t not in every:
            raise choice_error(f"task of {SUITE}", t, every)
    if args.part == "sheet":
        info = contact_sheet(photos[0], categories[0], args.seed, args.out)
        print(json.dumps(info))
        return 0
    out = check_out_dir(args.out)
    start = time.perf_counter()
    result: dict[str, Any] = {
        "schema": "embodia.vap_own_object/1",
        "command": "python -m launch.study vap.own_object " + shlex.join(sys.argv[1:] if argv is None else argv),
        "part": args.part, "photos": [p.name for p in photos], "photo_set": args.photos, "categories": categories,
        "tasks": tasks, "episodes_per_task": args.episodes, "seed": args.seed, "references": args.references,
        "variants": {v: {"policy_options": VARIANTS[v][0], "env_options": VARIANTS[v][1],
                         **({"config_fields": PAST[v]} if v in PAST else {})} for v in VARIANTS},
        "lookalike_kinds": list(LOOKALIKE_KINDS)}
    if args.part == "summary":
        parts = [json.loads((Path(d) / "own_object.json").read_text()) for d in args.sources.split(",")
                 if d and (Path(d) / "own_object.json").is_file()]
        if not args.sources:
            raise ConfigError("summary needs --from DIR[,DIR...] (folders of grounding or episodes runs)")
        rows = [row for r in parts if "grounding" in r for row in r["grounding"]["rows"]]
        if rows:
            result["grounding"] = {**summarise_grounding(rows), "rows": rows}
        folders = [Path(d) for d in args.sources.split(",") if d]
        if any((f / "episodes").is_dir() for f in folders):
            result["episodes"] = merge_episodes(folders)
    elif args.part == "grounding":
        rows = grounding_rows(photos, categories, tasks, args.episodes, args.seed, variants, args.references, out)
        result["grounding"] = {**summarise_grounding(rows), "rows": rows}
    elif args.part == "speed":
        result["speed"] = speed_part(photos[0], args.episodes, args.seed)
    elif args.part == "episodes":
        result["episodes"] = episodes_part(photos, categories, args.episodes, args.seed, args.variant, out,
                                           episode_policies)
    else:
        result["builtin"] = builtin_part(args.episodes, args.seed, tasks)
    result["wall_s"] = round(time.perf_counter() - start, 1)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "own_object.json", result)
    table = markdown(result)
    (out / "README.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
