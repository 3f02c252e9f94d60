"""Why ``neighbour_category`` stays near chance: a diagnostic on the dev split (never the test split).

``python -m sim_benchmarks.studies.vimrag.neighbour --out DIR`` measures, on corpus seed 0:

1. the trained reader (seed 0) on each dev question type, given every image its gold documents link to, at each
   grid size (so retrieval and allocation play no part);
2. linear probes (multinomial logistic regression, fixed L2, nothing tuned on dev) on the frozen visual tokens:
   an object's kind from its catalogue photo (held-out half of the objects), and from a run's end keyframe the
   kind of the object placed on the plate (no spatial relation needed) and of the object closest to the plate
   (the neighbour_category answer), trained on train-split runs and scored on dev-split runs;
3. what the text alone allows: guessing uniformly among the kinds of the other objects the run log lists.

Writes ``DIR/results.json`` and ``DIR/table.md``; accuracies carry Wilson 95 % intervals.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import torch

from envs.statistics import wilson_ci
from sim_benchmarks.cli import ArgumentParser, main_guard

LEVELS = (1, 2, 4, 7)
_CARD = re.compile(r"Catalogue card (OBJ-\d+): an? (\w+)")  # the corpus generator's card template
_PICKED = re.compile(r"picked (OBJ-\d+) and placed it on the plate")
_OTHERS = re.compile(r"Also on the table: ([^.]*)\.")


def _acc(hits: list[bool]) -> dict:
    k, n = int(sum(hits)), len(hits)
    lo, hi = wilson_ci(k, n)
    return {"correct": k, "n": n, "acc": k / n if n else float("nan"), "ci95": [lo, hi]}


def linear_probe(x_train: np.ndarray, y_train: np.ndarray, x_eval: np.ndarray, n_classes: int,
                 l2: float = 1e-2, seed: int = 0) -> np.ndarray:
    """Predicted classes of ``x_eval`` from an L2-regularised multinomial logistic regression (standardised inputs,
    full-batch L-BFGS)."""
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    xt = torch.from_numpy(((x_train - mean) / std).astype(np.float32))
    xe = torch.from_numpy(((x_eval - mean) / std).astype(np.float32))
    yt = torch.from_numpy(np.asarray(y_train, np.int64))
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        lin = torch.nn.Linear(xt.shape[1], n_classes)
    opt = torch.optim.LBFGS(lin.parameters(), max_iter=300, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(lin(xt), yt) + l2 * lin.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return lin(xe).argmax(-1).numpy()


def run_diagnostic(corpus_seed: int = 0, reader_seed: int = 0) -> dict:
    """The three measurements of the module docstring, as a JSON-able dict."""
    from agents.vimrag.stack import load_stack
    from envs.manipulation.objects import CATEGORIES
    from envs.rag.corpus import QUESTION_TYPES
    from policies.vimrag.reader import evidence_images

    stack = load_stack(corpus_seed, reader_seed=reader_seed)
    kb, reader, corpus = stack.kb, stack.reader, stack.kb.corpus
    dev = corpus.split("dev")
    out: dict = {"corpus_seed": corpus_seed, "reader_seed": reader_seed, "split": "dev", "reader": {}, "probes": {}}
    for g in LEVELS:
        for qtype in QUESTION_TYPES:
            hits = []
            for q in (q for q in dev if q.qtype == qtype):
                images, context = evidence_images(kb, q)
                hits.append(reader.read(kb.question_emb[q.qid], context, [(i, g) for i in images]).answer == q.answer)
            out["reader"][f"{qtype}@{g}"] = _acc(hits)

    kinds = list(CATEGORIES)
    kind_of = {m.group(1): m.group(2) for d in corpus.documents if (m := _CARD.match(d.text))}
    split_of = {q.qid.split("/")[0]: q.split for q in corpus.questions}
    # Catalogue photos: objects alternate between the probe's train and held-out halves (sorted ids).
    objects = sorted(o for o in kind_of if f"photo:{o}" in corpus.image_row)
    photo_rows = {"train": objects[0::2], "eval": objects[1::2]}
    # End keyframes: the placed object's kind (from the run log and its card) and the neighbour answer.
    placed: dict[str, list] = {"train": [], "dev": []}
    for d in corpus.documents:
        run = d.doc_id.split(":", 1)[1] if d.doc_id.startswith("log:") else None
        m = _PICKED.search(d.text) if run else None
        if m and split_of.get(run) in placed and f"kf:{run}:1" in corpus.image_row:
            placed[split_of[run]].append((f"kf:{run}:1", kind_of[m.group(1)]))
    neighbour = {s: [(q.gold[1], q.answer) for q in corpus.split(s) if q.qtype == "neighbour_category"]
                 for s in ("train", "dev")}
    tasks = {"catalogue photo -> its kind": ([(f"photo:{o}", kind_of[o]) for o in photo_rows["train"]],
                                             [(f"photo:{o}", kind_of[o]) for o in photo_rows["eval"]]),
             "end keyframe -> kind of the placed object": (placed["train"], placed["dev"]),
             "end keyframe -> kind closest to the plate": (neighbour["train"], neighbour["dev"])}
    for name, (train_rows, eval_rows) in tasks.items():
        for g in LEVELS:
            x_tr = np.stack([kb.visual_tokens(i, g).reshape(-1) for i, _ in train_rows])
            x_ev = np.stack([kb.visual_tokens(i, g).reshape(-1) for i, _ in eval_rows])
            pred = linear_probe(x_tr, np.array([kinds.index(k) for _, k in train_rows]), x_ev, len(kinds))
            res = _acc([kinds[p] == k for p, (_, k) in zip(pred, eval_rows, strict=True)])
            out["probes"][f"{name}@{g}"] = {**res, "n_train": len(train_rows)}

    expected = []
    for q in (q for q in dev if q.qtype == "neighbour_category"):
        m = _OTHERS.search(corpus.doc_by_id[q.gold[0]].text)
        others = [kind_of[o.strip()] for o in m.group(1).split(",")] if m else []
        expected.append(others.count(q.answer) / len(others) if others else 0.0)
    out["text_only_expected_acc"] = float(np.mean(expected))
    out["majority_kind_acc"] = max(_acc([q.answer == k for q in dev if q.qtype == "neighbour_category"])["acc"]
                                   for k in kinds)
    return out


def table(res: dict) -> str:
    """Markdown tables of :func:`run_diagnostic`'s result."""
    def cell(r: dict) -> str:
        return f"{100 * r['acc']:.0f} [{100 * r['ci95'][0]:.0f}, {100 * r['ci95'][1]:.0f}] ({r['correct']}/{r['n']})"

    qtypes = list(dict.fromkeys(k.split("@")[0] for k in res["reader"]))
    lines = ["| trained reader, gold-linked images | " + " | ".join(f"grid {g}x{g}" for g in LEVELS) + " |",
             "|---|" + "---|" * len(LEVELS)]
    lines += [f"| {t} | " + " | ".join(cell(res["reader"][f"{t}@{g}"]) for g in LEVELS) + " |" for t in qtypes]
    names = list(dict.fromkeys(k.split("@")[0] for k in res["probes"]))
    lines += ["", "| linear probe on the visual tokens (train -> eval) | " + " | ".join(f"grid {g}x{g}" for g in LEVELS)
              + " |", "|---|" + "---|" * len(LEVELS)]
    lines += [f"| {n} (n_train {res['probes'][f'{n}@1']['n_train']}) | "
              + " | ".join(cell(res["probes"][f"{n}@{g}"]) for g in LEVELS) + " |" for n in names]
    lines += ["", f"Text only (uniform over the kinds of the other objects the run log lists): expected "
              f"{100 * res['text_only_expected_acc']:.0f} %; majority kind: {100 * res['majority_kind_acc']:.0f} %."]
    return "\n".join(lines) + "\n"


def build_parser() -> ArgumentParser:
    """CLI of the diagnostic."""
    p = ArgumentParser(prog="python -m sim_benchmarks.studies.vimrag.neighbour", description=__doc__.splitlines()[0])
    p.add_argument("--out", writes="folder", required=True, help="results folder (results.json, table.md)")
    p.add_argument("--corpus-seed", type=int, default=0)
    p.add_argument("--reader-seed", type=int, default=0)
    return p


@main_guard
def main(argv: list[str] | None = None) -> int:
    """Run the diagnostic and write its tables."""
    from envs.atomic_io import write_json_atomic
    from sim_benchmarks.results_folder import check_out_dir

    args = build_parser().parse_args(argv)
    out = check_out_dir(args.out)
    torch.set_num_threads(1)
    res = run_diagnostic(args.corpus_seed, args.reader_seed)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "results.json", res)
    text = table(res)
    (out / "table.md").write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
