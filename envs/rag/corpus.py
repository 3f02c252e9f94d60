"""The VimRAG benchmark corpus: robot run logs, incident reports, catalogue cards, keyframes, photos, questions.

Everything is generated from one seed with Embodia's PyBullet tabletop and procedural object library, so the
ground truth (which object was placed, which one stood closest to the plate, what was dropped) comes from the
simulated scene, not from annotation. The corpus is information-sparse on purpose: colours and patterns appear
only in images, most images are irrelevant to any one question, and real photographs shipped inside installed
packages (matplotlib, scikit-learn) are mixed in as distractors.

The generated corpus is cached as ``.npz`` + ``.json`` under a git-ignored folder and rebuilt bit-for-bit from
the seed when missing. See ``docs/vimrag_dataset.md`` for the dataset card.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from envs.atomic_io import atomic_path, write_text_atomic
from envs.build_processes import map_in_processes
from envs.cache_files import load_or_build, read_npz
from envs.errors import ConfigError, choice_error
from envs.paths import data_cache

CORPUS_VERSION = "vimrag-corpus/2"
IMAGE_SIZE = 112  # rendered pixels per side; readers resample to their own input size
OPERATORS = ("Anna", "Max", "Leo", "Mia", "Sam", "Zoe", "Ben", "Eva")
SUPPLIERS = ("Acme", "Borealis", "Cobalt", "Delta", "Elm")
QUESTION_TYPES: dict[str, str] = {
    "placed_colour": "colour of the object placed on the plate in a named run (run log -> keyframe or photo)",
    "neighbour_category": "kind of object closest to the plate at the end of a named run (run log -> end keyframe)",
    "drop_colour": "colour of the object an operator's robot dropped on a given day (incident -> card -> photo)",
    "placed_pattern": "pattern of the object placed on the plate in a named run (run log -> card -> photo)",
    "slot_colour": "colour of the object in a named table slot in a run's start or end keyframe (run log -> keyframe; "
                   "needs the keyframe at high resolution)",
}
SPLITS = ("train", "dev", "test")
SPLIT_FRACTIONS = (0.5, 0.1, 0.4)  # of runs; every question belongs to its run's split
IMAGE_KINDS = ("keyframe_start", "keyframe_mid", "keyframe_end", "catalogue_photo", "calibration", "stock_photo")
MID_FRAMES = 3  # keyframes between start and end: the placed object carried toward the plate (a short clip)
_CARRY_HEIGHT = 0.08  # metres above the table at the middle of the carry
# Table slots (x, y) in metres; 12 cm apart so every object is visible and the closest one is unambiguous.
_SLOTS = tuple((x, y) for x in (0.43, 0.55, 0.67) for y in (-0.13, 0.0, 0.13))
_PLATE_RADIUS, _PLATE_HEIGHT = 0.05, 0.008
# Slot names as the keyframe camera shows the table (it faces the robot: larger x is nearer the camera, larger y
# further right in the image); _SLOTS[3 * i + j] is row i, column j.
_SLOT_ROWS, _SLOT_COLUMNS = ("back", "middle", "front"), ("left", "centre", "right")


def slot_name(slot: int) -> str:
    """A table slot as a person looking at the keyframe names it ("back-left", ..., "centre")."""
    row, col = _SLOT_ROWS[slot // 3], _SLOT_COLUMNS[slot % 3]
    return "centre" if (row, col) == ("middle", "centre") else f"{row}-{col}"


@dataclass(frozen=True)
class Document:
    """A text document; ``links`` are the ids it refers to (keyframes, catalogue cards, photos)."""

    doc_id: str
    kind: str  # run_log | incident | catalogue_card
    text: str
    links: tuple[str, ...]


@dataclass(frozen=True)
class ImageItem:
    """An image of the corpus; ``caption`` is the short text shown with it (its title, not its content)."""

    image_id: str
    kind: str  # one of IMAGE_KINDS
    caption: str


@dataclass(frozen=True)
class Question:
    """One question: its answer (exact match), the gold evidence ids that suffice to answer it, and its split."""

    qid: str
    qtype: str
    split: str
    text: str
    answer: str
    gold: tuple[str, ...]


@dataclass
class Corpus:
    """Documents, images (uint8, N x H x W x 3, row i = ``images[i]``) and questions of one seed."""

    seed: int
    documents: list[Document]
    images: list[ImageItem]
    pixels: np.ndarray
    questions: list[Question]

    def __post_init__(self) -> None:
        self.doc_by_id = {d.doc_id: d for d in self.documents}
        self.image_row = {im.image_id: i for i, im in enumerate(self.images)}

    def split(self, name: str, qtype: str | None = None) -> list[Question]:
        """The questions of one split (optionally one type), in a fixed order."""
        if name not in SPLITS:
            raise choice_error("split", name, SPLITS)
        if qtype is not None and qtype not in QUESTION_TYPES:
            raise choice_error("question type", qtype, list(QUESTION_TYPES))
        return [q for q in self.questions if q.split == name and (qtype is None or q.qtype == qtype)]

    def item(self, item_id: str) -> Document | ImageItem:
        """A document or image by id (ConfigError when unknown)."""
        if item_id in self.doc_by_id:
            return self.doc_by_id[item_id]
        if item_id in self.image_row:
            return self.images[self.image_row[item_id]]
        raise ConfigError(f"unknown corpus id {item_id!r}")


FIT_PARTS = ("reader", "planner")


def fitting_half(questions: list[Question], part: str) -> list[Question]:
    """The train questions one learned part is fitted on: the runs of ``questions`` in id order alternate between the
    reader and the planner. Were the planner's RL rollouts read by a reader fitted on the same questions, nearly
    every plan would be rewarded (the reader recalls those answers), and the reward would say nothing about plans."""
    if part not in FIT_PARTS:
        raise choice_error("fitting part", part, FIT_PARTS)
    runs = sorted({q.qid.split("/")[0] for q in questions})
    mine = set(runs[FIT_PARTS.index(part)::2])
    return [q for q in questions if q.qid.split("/")[0] in mine]


def sample_by_type(questions: list[Question], rng: np.random.Generator, n: int) -> list[Question]:
    """``n`` questions drawn with every question type equally likely, then uniformly within the type (the train
    split asks about every occupied slot, so drawing questions uniformly would mostly train on slot questions)."""
    by_type: dict[str, list[Question]] = {}
    for q in questions:
        by_type.setdefault(q.qtype, []).append(q)
    types = sorted(by_type)
    picks = [by_type[types[int(k)]] for k in rng.integers(0, len(types), n)]
    return [qs[int(rng.integers(len(qs)))] for qs in picks]


def answer_vocabulary() -> tuple[str, ...]:
    """Every possible answer string (colours, categories, patterns of the object library)."""
    from envs.manipulation.objects import CATEGORIES, COLOURS, PATTERNS

    return tuple(COLOURS) + tuple(CATEGORIES) + tuple(PATTERNS)


# ---------------------------------------------------------------------------------------------- world
@dataclass(frozen=True)
class _Run:
    run_id: str
    day: int
    operator: str
    plate_slot: int
    placed: str  # catalogue id
    others: tuple[tuple[str, int], ...]  # (catalogue id, slot) of objects left on the table
    placed_slot: int
    dropped: tuple[str, int] | None  # (catalogue id, slot) of the object dropped off the table, if any


def _plan_runs(rng: np.random.Generator, catalogue: list[str], n_runs: int) -> list[_Run]:
    runs: list[_Run] = []
    drop_keys: set[tuple[str, int]] = set()
    for r in range(n_runs):
        while True:
            slots = rng.permutation(len(_SLOTS))
            plate, placed_slot, o1, o2, d_slot = (int(s) for s in slots[:5])
            px, py = _SLOTS[plate]
            dist = [np.hypot(_SLOTS[s][0] - px, _SLOTS[s][1] - py) for s in (o1, o2)]
            if abs(dist[0] - dist[1]) >= 0.04:  # one neighbour clearly closest
                break
        objs = [catalogue[int(i)] for i in rng.choice(len(catalogue), size=4, replace=False)]
        operator = OPERATORS[int(rng.integers(len(OPERATORS)))]
        day = int(rng.integers(1, 41))
        dropped = None
        if rng.random() < 0.5 and (operator, day) not in drop_keys:
            drop_keys.add((operator, day))  # "what did Mia's robot drop on day 12" has one answer
            dropped = (objs[3], d_slot)
        runs.append(_Run(f"R-{r:03d}", day, operator, plate, objs[0], ((objs[1], o1), (objs[2], o2)), placed_slot,
                         dropped))
    return runs


def _closest_other(run: _Run) -> str:
    px, py = _SLOTS[run.plate_slot]
    return min(run.others, key=lambda o: np.hypot(_SLOTS[o[1]][0] - px, _SLOTS[o[1]][1] - py))[0]


# ---------------------------------------------------------------------------------------------- rendering
class _Renderer:
    """One PyBullet scene reused for every keyframe (bodies are added and removed), plus a photo scene.

    Each catalogue object's mesh, texture and PyBullet shapes are made once per scene and reused by every keyframe
    that shows it: rebuilding them per keyframe cost more than rendering, and every ``loadTexture`` stays in PyBullet's
    memory until the scene closes."""

    def __init__(self) -> None:
        from envs.manipulation.objects import category_mesh, write_obj
        from envs.manipulation.scene import TabletopScene

        self.scene = TabletopScene("fractal", image_size=IMAGE_SIZE)
        self.scene.build()
        self.photo_scene = TabletopScene("fractal", image_size=2 * IMAGE_SIZE)
        self.photo_scene.build()
        self.plate_mesh = write_obj(category_mesh("plate", _PLATE_RADIUS, _PLATE_HEIGHT, {}),
                                    f"vimrag/plate/{_PLATE_RADIUS}")
        self._files: dict[str, tuple[str, str]] = {}  # instance id -> (mesh OBJ, texture PNG)
        self._shapes: dict[tuple[int, str], tuple[int, int, int]] = {}  # (client, instance) -> collision, visual, tex

    def _add(self, scene, inst, xy: tuple[float, float], z: float = 0.0) -> int:
        """A static body of ``inst`` standing at ``xy`` (what ``TabletopScene.add_body`` builds for a zero mass)."""
        import pybullet as p

        from envs.manipulation.objects import instance_mesh_path, make_texture
        from envs.manipulation.scene import texture_file

        c = scene.client
        key = (c, inst.instance_id)
        if key not in self._shapes:
            if inst.instance_id not in self._files:
                self._files[inst.instance_id] = (instance_mesh_path(inst), texture_file(make_texture(inst)))
            mesh, texture = self._files[inst.instance_id]
            col = p.createCollisionShape(p.GEOM_CYLINDER, radius=inst.radius, height=inst.height,
                                         collisionFramePosition=(0, 0, inst.height / 2), physicsClientId=c)
            vis = p.createVisualShape(p.GEOM_MESH, fileName=mesh, rgbaColor=(1, 1, 1, 1), physicsClientId=c)
            self._shapes[key] = (col, vis, p.loadTexture(texture, physicsClientId=c))
        col, vis, tex = self._shapes[key]
        body = p.createMultiBody(0.0, col, vis, basePosition=(float(xy[0]), float(xy[1]), z),
                                 baseOrientation=p.getQuaternionFromEuler((0, 0, 0.0)), physicsClientId=c)
        p.changeVisualShape(body, -1, textureUniqueId=tex, rgbaColor=(1, 1, 1, 1), physicsClientId=c)
        return body

    def scene_image(self, placements: list[tuple[object, tuple[float, float], float]],
                    plate_xy: tuple[float, float] | None) -> np.ndarray:
        """Render the keyframe camera with the given objects (instance, xy, z) and an optional plate."""
        import pybullet as p

        sc = self.scene
        bodies = []
        if plate_xy is not None:
            bodies.append(sc.add_body(self.plate_mesh, None, (0.93, 0.93, 0.90, 1.0), ("cylinder", (_PLATE_RADIUS,)),
                                      0.0, (plate_xy[0], plate_xy[1], 0.0), 0.0, _PLATE_HEIGHT))
        bodies += [self._add(sc, inst, xy, z) for inst, xy, z in placements]
        rgb, _, _ = sc.render()
        for b in bodies:
            p.removeBody(b, physicsClientId=sc.client)
        return rgb

    def photo(self, inst) -> np.ndarray:
        """A catalogue photo: the object alone, cropped around it so it fills the frame."""
        import pybullet as p
        from PIL import Image

        from envs.manipulation.scene import project_to_image

        sc = self.photo_scene
        xy = (0.55, 0.0)
        body = self._add(sc, inst, xy)
        rgb, _, _ = sc.render()
        p.removeBody(body, physicsClientId=sc.client)
        n = rgb.shape[0]
        centre = project_to_image("fractal", np.array([[xy[0], xy[1], inst.height / 2]]))[0]
        cx, cy = ((centre + 1) / 2 * n).astype(int)
        half = n // 5
        x0, y0 = int(np.clip(cx - half, 0, n - 2 * half)), int(np.clip(cy - half, 0, n - 2 * half))
        crop = rgb[y0:y0 + 2 * half, x0:x0 + 2 * half]
        return np.asarray(Image.fromarray(crop).resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR), np.uint8)

    def close(self) -> None:
        self.scene.close()
        self.photo_scene.close()


# An image to render: (instance id, xy, z) of each object, and the plate's xy; no plate = a catalogue photo of the
# one object. Plain ids and numbers, so a shot pickles cheaply to a rendering process.
_Shot = tuple[tuple[tuple[str, tuple[float, float], float], ...], tuple[float, float] | None]


def _shot(placements: list[tuple[object, tuple[float, float], float]], plate_xy: tuple[float, float]) -> _Shot:
    return tuple((inst.instance_id, (float(xy[0]), float(xy[1])), float(z)) for inst, xy, z in placements), plate_xy


def _render_shots(shots: list[_Shot]) -> np.ndarray:
    """Render shots in one renderer (one process's share of the corpus): N x H x W x 3 uint8."""
    from envs.manipulation.objects import LIBRARY

    out = np.zeros((len(shots), IMAGE_SIZE, IMAGE_SIZE, 3), np.uint8)
    if not shots:
        return out
    renderer = _Renderer()
    try:
        for i, (placements, plate_xy) in enumerate(shots):
            if plate_xy is None:
                out[i] = renderer.photo(LIBRARY[placements[0][0]])
            else:
                out[i] = renderer.scene_image([(LIBRARY[name], xy, z) for name, xy, z in placements], plate_xy)
    finally:
        renderer.close()
    return out


def _stock_photos(rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Random square crops of real photographs that ship inside installed packages (matplotlib, scikit-learn)."""
    import matplotlib
    from PIL import Image

    sources: list[np.ndarray] = []
    sample = Path(matplotlib.get_data_path()) / "sample_data"
    for name in ("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png"):
        if (sample / name).exists():
            sources.append(np.asarray(Image.open(sample / name).convert("RGB")))
    try:
        from sklearn.datasets import load_sample_images

        sources += [np.asarray(im) for im in load_sample_images().images]
    except ImportError:  # scikit-learn is optional: matplotlib's photos alone still give distractors
        pass
    if not sources:
        raise ConfigError("no stock photographs found (need matplotlib's sample_data)")
    out = []
    for k in range(count):
        src = sources[k % len(sources)]
        h, w = src.shape[:2]
        side = int(rng.integers(min(h, w) // 3, min(h, w) + 1))
        y0, x0 = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
        crop = Image.fromarray(src[y0:y0 + side, x0:x0 + side]).resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
        out.append(np.asarray(crop, np.uint8))
    return out


# ---------------------------------------------------------------------------------------------- generation
# Images per rendering process at least: starting a process and its two scenes costs about as much as rendering
# this many keyframes, so small corpora (the tests') render in the calling process.
MIN_IMAGES_PER_PROCESS = 200


def generate_corpus(seed: int = 0, n_runs: int = 400, n_calibration: int = 80, n_stock: int = 40,
                    processes: int | None = None) -> Corpus:
    """Build the whole corpus from ``seed``. Rendering every image is most of the cost (about a minute of CPU for
    the defaults); it is spread over ``processes`` processes (None: the usable cores, see
    :func:`envs.build_processes.build_processes`), which gives the same pixels as one."""
    from envs.build_processes import build_processes
    from envs.manipulation.objects import LIBRARY

    if n_runs < 10:
        raise ConfigError(f"n_runs must be >= 10, got {n_runs}")
    rng = np.random.default_rng(seed)
    inst_ids = sorted(LIBRARY)
    order = rng.permutation(len(inst_ids))
    cat_of = {f"OBJ-{k:03d}": LIBRARY[inst_ids[int(i)]] for k, i in enumerate(order)}  # catalogue id -> instance
    catalogue = sorted(cat_of)
    runs = _plan_runs(rng, catalogue, n_runs)
    split_of = _split_runs(rng, [r.run_id for r in runs])

    documents: list[Document] = []
    images: list[ImageItem] = []
    shots: list[_Shot] = []  # what each image shows, rendered below (rendering draws nothing from rng)
    for oid in catalogue:
        inst = cat_of[oid]
        shelf = f"S{int(rng.integers(1, 25)):02d}"
        supplier = SUPPLIERS[int(rng.integers(len(SUPPLIERS)))]
        documents.append(Document(f"card:{oid}", "catalogue_card",
                                  f"Catalogue card {oid}: a {inst.category}, kept on shelf {shelf}, mass "
                                  f"{inst.mass:.2f} kg, supplier {supplier}. Photo on file.", (f"photo:{oid}",)))
        images.append(ImageItem(f"photo:{oid}", "catalogue_photo", f"Catalogue photo of {oid}"))
        shots.append((((inst.instance_id, (0.0, 0.0), 0.0),), None))
    for run in runs:
        px, py = _SLOTS[run.plate_slot]
        table = [(cat_of[o], _SLOTS[s], 0.0) for o, s in run.others]
        start = table + [(cat_of[run.placed], _SLOTS[run.placed_slot], 0.0)]
        if run.dropped is not None:
            start.append((cat_of[run.dropped[0]], _SLOTS[run.dropped[1]], 0.0))
        end = table + [(cat_of[run.placed], (px, py), _PLATE_HEIGHT)]
        frames = [("0", "keyframe_start", start, "start keyframe")]
        sx, sy = _SLOTS[run.placed_slot]
        for k in range(1, MID_FRAMES + 1):
            f = k / (MID_FRAMES + 1)
            lift = _CARRY_HEIGHT * 4 * f * (1 - f)
            carried = (cat_of[run.placed], (sx + f * (px - sx), sy + f * (py - sy)), lift)
            # The dropped object falls off the table during the first part of the run.
            gone = run.dropped is not None and k > 1
            mid = table + [carried] + ([] if gone or run.dropped is None
                                       else [(cat_of[run.dropped[0]], _SLOTS[run.dropped[1]], 0.0)])
            frames.append((f"m{k}", "keyframe_mid", mid, f"keyframe {k + 1} of {MID_FRAMES + 2}"))
        frames.append(("1", "keyframe_end", end, "end keyframe"))
        for tag, kind, scene, words in frames:
            images.append(ImageItem(f"kf:{run.run_id}:{tag}", kind, f"Run {run.run_id}, {words}"))
            shots.append(_shot(scene, (px, py)))
        others = ", ".join(o for o, _ in run.others)
        documents.append(Document(
            f"log:{run.run_id}", "run_log",
            f"Run {run.run_id} log, day {run.day}, operator {run.operator}: the robot picked {run.placed} and "
            f"placed it on the plate. Also on the table: {others}. Video keyframes attached.",
            tuple(f"kf:{run.run_id}:{tag}" for tag, *_ in frames) + (f"card:{run.placed}",)))
        if run.dropped is not None:
            documents.append(Document(
                f"incident:{run.run_id}", "incident",
                f"Incident report, day {run.day}, operator {run.operator}: during run {run.run_id} the robot "
                f"dropped {run.dropped[0]} off the table.", (f"card:{run.dropped[0]}",)))
    for k in range(n_calibration):  # unlinked scenes: look like keyframes, belong to no run
        objs = rng.choice(catalogue, size=3, replace=False)
        slots = rng.permutation(len(_SLOTS))[:4]
        scene = [(cat_of[str(o)], _SLOTS[int(s)], 0.0) for o, s in zip(objs, slots[1:], strict=True)]
        images.append(ImageItem(f"calib:C-{k:03d}", "calibration", f"Calibration snapshot C-{k:03d}"))
        shots.append(_shot(scene, _SLOTS[int(slots[0])]))
    if processes is None:
        processes = build_processes(len(shots), MIN_IMAGES_PER_PROCESS)
    chunks = np.array_split(np.arange(len(shots)), max(1, int(processes)))
    pixels = list(np.concatenate(map_in_processes(_render_shots, [[shots[int(i)] for i in c] for c in chunks],
                                                  processes)))
    for k, photo in enumerate(_stock_photos(rng, n_stock)):
        images.append(ImageItem(f"stock:P-{k:03d}", "stock_photo", f"Stock photograph P-{k:03d}"))
        pixels.append(photo)
    questions = _make_questions(runs, cat_of, split_of, np.random.default_rng([seed, 1]))
    return Corpus(seed, documents, images, np.stack(pixels).astype(np.uint8), questions)


def _split_runs(rng: np.random.Generator, run_ids: list[str]) -> dict[str, str]:
    order = rng.permutation(len(run_ids))
    n_train = int(round(SPLIT_FRACTIONS[0] * len(run_ids)))
    n_dev = int(round(SPLIT_FRACTIONS[1] * len(run_ids)))
    out = {}
    for rank, i in enumerate(order):
        out[run_ids[int(i)]] = "train" if rank < n_train else ("dev" if rank < n_train + n_dev else "test")
    return out


def _keyframe_slots(run: _Run) -> dict[str, dict[int, str]]:
    """Catalogue id standing in each slot of a run's start ("0") and end ("1") keyframe, the plate's slot left out
    (the placed object stands on the plate at the end)."""
    start = {s: o for o, s in run.others} | {run.placed_slot: run.placed}
    if run.dropped is not None:
        start[run.dropped[1]] = run.dropped[0]
    return {"0": start, "1": {s: o for o, s in run.others}}


def _slot_questions(run: _Run, cat_of: dict, split: str, rng: np.random.Generator) -> list[Question]:
    """Train split: every occupied slot of both keyframes (the reader learns where slots are); dev and test: one
    slot of one keyframe per run, drawn from ``rng``."""
    rid = run.run_id
    slots = _keyframe_slots(run)
    pairs = [(tag, s) for tag in ("0", "1") for s in sorted(slots[tag])]
    if split != "train":
        pairs = [pairs[int(rng.integers(len(pairs)))]]
    out = []
    for tag, s in pairs:
        word = "start" if tag == "0" else "end"
        suffix = "" if split != "train" else f"/{word}/{slot_name(s)}"
        out.append(Question(f"{rid}/slot_colour{suffix}", "slot_colour", split,
                            f"In the {word} keyframe of run {rid}, what colour was the object in the {slot_name(s)} "
                            f"slot of the table?", cat_of[slots[tag][s]].colour, (f"log:{rid}", f"kf:{rid}:{tag}")))
    return out


def _make_questions(runs: list[_Run], cat_of: dict, split_of: dict[str, str],
                    rng: np.random.Generator) -> list[Question]:
    qs: list[Question] = []
    for run in runs:
        rid, split = run.run_id, split_of[run.run_id]
        placed = cat_of[run.placed]
        qs.append(Question(f"{rid}/placed_colour", "placed_colour", split,
                           f"What colour was the object the robot placed on the plate in run {rid}?", placed.colour,
                           (f"log:{rid}", f"kf:{rid}:1")))
        qs.append(Question(f"{rid}/neighbour_category", "neighbour_category", split,
                           f"At the end of run {rid}, what kind of object stood closest to the plate?",
                           cat_of[_closest_other(run)].category, (f"log:{rid}", f"kf:{rid}:1")))
        qs.append(Question(f"{rid}/placed_pattern", "placed_pattern", split,
                           f"What pattern was on the object the robot placed on the plate in run {rid}?",
                           placed.pattern, (f"log:{rid}", f"card:{run.placed}", f"photo:{run.placed}")))
        if run.dropped is not None:
            oid = run.dropped[0]
            qs.append(Question(f"{rid}/drop_colour", "drop_colour", split,
                               f"What colour was the object that {run.operator}'s robot dropped on day {run.day}?",
                               cat_of[oid].colour, (f"incident:{rid}", f"card:{oid}", f"photo:{oid}")))
        qs += _slot_questions(run, cat_of, split, rng)
    return qs


# ---------------------------------------------------------------------------------------------- cache
def cache_root() -> Path:
    """The VimRAG corpora's folder in the data cache (:func:`envs.paths.data_cache`)."""
    return data_cache() / "vimrag"


def corpus_dir(seed: int) -> Path:
    """The cache folder of one seed's corpus."""
    # The version is in the name: a corpus of an older generator (and the reader and planner trained on it) is never
    # picked up by mistake.
    return cache_root() / f"corpus_v{CORPUS_VERSION.rsplit('/', 1)[1]}_seed{int(seed)}"


def save_corpus(corpus: Corpus, folder: Path) -> None:
    """Write ``corpus.json`` (texts, questions) and ``pixels.npz``; the json goes last (it marks completeness)."""
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / "pixels.npz") as tmp:
        np.savez_compressed(tmp, pixels=corpus.pixels)
    blob = {"version": CORPUS_VERSION, "seed": corpus.seed,
            "documents": [asdict(d) for d in corpus.documents], "images": [asdict(i) for i in corpus.images],
            "questions": [asdict(q) for q in corpus.questions]}
    write_text_atomic(folder / "corpus.json", json.dumps(blob))


def load_corpus_files(folder: Path) -> Corpus:
    """Read a saved corpus; a missing or malformed file raises ConfigError naming it."""
    folder = Path(folder)
    path = folder / "corpus.json"
    try:
        blob = json.loads(path.read_text())
        if not isinstance(blob, dict):
            raise ValueError(f"corpus.json holds a {type(blob).__name__}, not the corpus object")
        if blob.get("version") != CORPUS_VERSION:
            raise ValueError(f"version {blob.get('version')!r}, expected {CORPUS_VERSION!r}")
        documents = [Document(d["doc_id"], d["kind"], d["text"], tuple(d["links"])) for d in blob["documents"]]
        images = [ImageItem(i["image_id"], i["kind"], i["caption"]) for i in blob["images"]]
        questions = [Question(q["qid"], q["qtype"], q["split"], q["text"], q["answer"], tuple(q["gold"]))
                     for q in blob["questions"]]
        pixels = read_npz(folder / "pixels.npz", "vimrag corpus pixels", ("pixels",))["pixels"]
    except ConfigError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:  # ConfigError is a ValueError
        raise ConfigError(f"malformed vimrag corpus in {str(folder)!r}: {type(exc).__name__}: {exc}") from None
    if pixels.shape[0] != len(images) or pixels.ndim != 4:
        raise ConfigError(f"malformed vimrag corpus in {str(folder)!r}: {pixels.shape[0]} images for "
                          f"{len(images)} entries")
    return Corpus(int(blob["seed"]), documents, images, pixels, questions)


def load_corpus(seed: int = 0, folder: str | Path | None = None) -> Corpus:
    """The corpus of ``seed`` from the cache, generating it first when absent (one process builds, others wait).

    ``folder`` loads a corpus saved elsewhere instead (no generation).
    """
    if folder is not None:
        if not (Path(folder) / "corpus.json").exists():
            raise ConfigError(f"no vimrag corpus at {str(folder)!r} (corpus.json missing)")
        return load_corpus_files(Path(folder))
    target = corpus_dir(seed)

    def build() -> Corpus:
        t0 = time.perf_counter()
        save_corpus(generate_corpus(seed), target)
        (target / "build.json").write_text(json.dumps({"build_s": time.perf_counter() - t0}))
        return load_corpus_files(target)

    target.mkdir(parents=True, exist_ok=True)
    # parallel eval workers: the first builds, the rest reuse
    return load_or_build(target.parent / f".lock_seed{int(seed)}",
                         lambda: load_corpus_files(target) if (target / "corpus.json").exists() else None, build)
