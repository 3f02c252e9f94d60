"""The visual reader: answers a question from the visual tokens it is given (and the image captions).

No VLM weights exist offline, so the reader is a small model trained on the train split. For every image it is
handed it attends over that image's ``g*g`` visual tokens with the question as query and proposes an answer; a
relevance head scores the image from its caption (kind, whether its identifier appears in the question or the
text evidence) and the token level; the answer is the relevance-weighted mixture of the per-image proposals plus
a question-only guess (what is left when no image carries the answer). Visual tokens counted by the agent are
exactly the rows fed to the attention.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from envs.atomic_io import atomic_path
from envs.cache_files import load_or_build
from envs.errors import ConfigError
from envs.rag.corpus import IMAGE_KINDS, Question, answer_vocabulary, fitting_half, sample_by_type
from perception.vimrag.visual_tokens import GRID_LEVELS
from policies.vimrag.knowledge_base import KnowledgeBase, id_tokens

LEVELS = tuple(g for g in GRID_LEVELS if g > 0)  # (1, 2, 4, 7)
_POS_OFFSET = {g: sum(h * h for h in LEVELS if h < g) for g in LEVELS}
MAX_TOKENS = 49


@dataclass(frozen=True)
class Reading:
    """The reader's output: answer, its probability, the per-image relevance weights, tokens consumed."""

    answer: str
    confidence: float
    relevance: dict[str, float]
    visual_tokens: int


def _cell_features() -> np.ndarray:
    """Where each token sits: for every (level g, cell k) row of the position table, Fourier features of the
    cell centre (x, y in [0, 1]) and the cell size 1/g. Shared by all levels, so a place learnt at one resolution
    is the same place at another."""
    rows = []
    for g in LEVELS:
        for k in range(g * g):
            cx, cy = (k % g + 0.5) / g, (k // g + 0.5) / g
            feats = [1.0 / g]
            for f in (1, 2, 4):
                feats += [np.sin(np.pi * f * cx), np.cos(np.pi * f * cx),
                          np.sin(np.pi * f * cy), np.cos(np.pi * f * cy)]
            rows.append(feats)
    return np.asarray(rows, np.float32)


class ReaderNet(nn.Module):
    """Per-image multi-head token attention + relevance-weighted answer mixture (see module docstring)."""

    def __init__(self, token_dim: int, n_answers: int, hidden: int = 96, q_dim: int = 384, heads: int = 4) -> None:
        super().__init__()
        if hidden % heads:
            raise ConfigError(f"reader hidden size {hidden} must be a multiple of its {heads} heads")
        self.heads = heads
        # Question sentence embeddings of this corpus are close to one another (same templates); standardised per
        # dimension (statistics of the train questions, set by train_reader) the words that differ stand out.
        self.register_buffer("q_mean", torch.zeros(q_dim))
        self.register_buffer("q_std", torch.ones(q_dim))
        self.q = nn.Sequential(nn.Linear(q_dim, hidden), nn.Tanh())
        self.tok = nn.Linear(token_dim, hidden)
        self.register_buffer("cells", torch.from_numpy(_cell_features()), persistent=False)
        self.pos = nn.Linear(self.cells.shape[1], hidden)
        self.level = nn.Embedding(len(LEVELS), hidden)
        self.key = nn.Linear(hidden, hidden, bias=False)
        self.query = nn.Linear(hidden, hidden, bias=False)
        # A position-only attention term besides the content one: "the object in the back-left slot" is a place
        # to look at, whatever the tokens there hold.
        self.pos_key = nn.Linear(self.cells.shape[1], hidden, bias=False)
        self.pos_query = nn.Linear(hidden, hidden, bias=False)
        self.answer = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_answers))
        side = len(IMAGE_KINDS) + 1 + len(LEVELS)
        self.relevance = nn.Sequential(nn.Linear(hidden + side, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.blind = nn.Linear(hidden, n_answers + 1)  # question-only answer logits + its relevance logit

    def forward(self, q: torch.Tensor, tokens: torch.Tensor, token_mask: torch.Tensor, pos: torch.Tensor,
                level: torch.Tensor, side: torch.Tensor, image_mask: torch.Tensor,
                per_image_out: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities over answers, B x A (with ``per_image_out`` also each image's own proposal,
        B x M x A). Shapes: tokens B x M x T x D, masks B x M x T / B x M."""
        qh = self._question(q)  # B x H
        x = self.tok(tokens) + self.pos(self.cells[pos]) + self.level(level)[:, :, None, :]
        b, m, t, h = x.shape
        d = h // self.heads
        keys = self.key(x).view(b, m, t, self.heads, d)
        att = torch.einsum("bmtnd,bnd->bmtn", keys, self.query(qh).view(b, self.heads, d)) / d ** 0.5
        where = self.pos_key(self.cells[pos]).view(b, m, t, self.heads, d)
        att = att + torch.einsum("bmtnd,bnd->bmtn", where, self.pos_query(qh).view(b, self.heads, d)) / d ** 0.5
        att = att.masked_fill(~token_mask[..., None], -1e9).softmax(2)  # each head over the image's tokens
        v = torch.einsum("bmtn,bmtnd->bmnd", att, x.view(b, m, t, self.heads, d)).reshape(b, m, h)
        qm = qh[:, None, :].expand_as(v)
        per_image = self.answer(torch.cat([v, qm, v * qm], -1)).log_softmax(-1)  # B x M x A
        rel = self.relevance(torch.cat([qm, side], -1)).squeeze(-1).masked_fill(~image_mask, -1e9)
        blind = self.blind(qh)
        weights = torch.cat([blind[:, -1:], rel], 1).log_softmax(-1)  # B x (1 + M)
        parts = torch.cat([blind[:, None, :-1].log_softmax(-1), per_image], 1)
        mixture = torch.logsumexp(weights[:, :, None] + parts, 1)
        return (mixture, per_image) if per_image_out else mixture

    def _question(self, q: torch.Tensor) -> torch.Tensor:
        return self.q((q - self.q_mean) / self.q_std)

    def relevance_weights(self, q: torch.Tensor, side: torch.Tensor, image_mask: torch.Tensor) -> torch.Tensor:
        """Text-side relevance of each image (no visual tokens), B x (1 + M), column 0 = the question-only guess."""
        qh = self._question(q)
        qm = qh[:, None, :].expand(side.shape[0], side.shape[1], qh.shape[-1])
        rel = self.relevance(torch.cat([qm, side], -1)).squeeze(-1).masked_fill(~image_mask, -1e9)
        return torch.cat([self.blind(qh)[:, -1:], rel], 1).softmax(-1)


class VisualReader:
    """Wraps :class:`ReaderNet` with the knowledge base: builds its inputs from (question, images, levels)."""

    def __init__(self, kb: KnowledgeBase, net: ReaderNet) -> None:
        self.kb = kb
        self.net = net.eval()
        self.answers = answer_vocabulary()
        # Per image: its kind's index and the identifiers its caption names (looked up on every read).
        self._kind = {im.image_id: IMAGE_KINDS.index(im.kind) for im in kb.corpus.images}
        self._ids = {im.image_id: id_tokens(im.caption) for im in kb.corpus.images}

    def _side(self, image_id: str, g: int, context: set[str]) -> np.ndarray:
        out = np.zeros(len(IMAGE_KINDS) + 1 + len(LEVELS), np.float32)
        out[self._kind[image_id]] = 1.0
        out[len(IMAGE_KINDS)] = float(bool(self._ids[image_id] & context))
        out[len(IMAGE_KINDS) + 1 + LEVELS.index(g)] = 1.0
        return out

    def batch(self, items: list[tuple[np.ndarray, set[str], list[tuple[str, int]]]]) -> dict[str, torch.Tensor]:
        """Collate (question embedding, context ids, [(image id, g>0)]) rows into padded tensors."""
        m = max(1, max(len(imgs) for _, _, imgs in items))
        b, d = len(items), self.kb.token_dim
        tokens = np.zeros((b, m, MAX_TOKENS, d), np.float32)
        tmask = np.zeros((b, m, MAX_TOKENS), bool)
        tmask[:, :, 0] = True  # padded images attend to one dummy token (masked out at image level)
        pos = np.zeros((b, m, MAX_TOKENS), np.int64)
        level = np.zeros((b, m), np.int64)
        side = np.zeros((b, m, len(IMAGE_KINDS) + 1 + len(LEVELS)), np.float32)
        imask = np.zeros((b, m), bool)
        for i, (_, context, imgs) in enumerate(items):
            for j, (image_id, g) in enumerate(imgs):
                n = g * g
                tokens[i, j, :n] = self.kb.visual_tokens(image_id, g)
                tmask[i, j, :n] = True
                pos[i, j, :n] = _POS_OFFSET[g] + np.arange(n)
                level[i, j] = LEVELS.index(g)
                side[i, j] = self._side(image_id, g, context)
                imask[i, j] = True
        q = np.stack([qe for qe, _, _ in items]).astype(np.float32)
        return {"q": torch.from_numpy(q), "tokens": torch.from_numpy(tokens), "token_mask": torch.from_numpy(tmask),
                "pos": torch.from_numpy(pos), "level": torch.from_numpy(level), "side": torch.from_numpy(side),
                "image_mask": torch.from_numpy(imask)}

    @torch.no_grad()
    def relevance(self, q_emb: np.ndarray, context: set[str], image_ids: list[str]) -> dict[str, float]:
        """How much the reader would rely on each image if it were read at full resolution (captions only)."""
        if not image_ids:
            return {}
        t = self.batch([(q_emb, context, [(i, LEVELS[-1]) for i in image_ids])])
        w = self.net.relevance_weights(t["q"], t["side"], t["image_mask"])[0, 1:].numpy()
        return {i: float(x) for i, x in zip(image_ids, w, strict=True)}

    @torch.no_grad()
    def read(self, q_emb: np.ndarray, context: set[str], images: list[tuple[str, int]], question: str = "",
             documents: Sequence[str] = ()) -> Reading:
        """Answer from the given images at their token levels (g == 0 entries are skipped: dropped images).

        ``question`` and ``documents`` (texts) are part of the reader interface for external VLMs; this reader
        has the question's embedding and the identifiers in ``context`` instead and ignores them."""
        kept = [(i, g) for i, g in images if g > 0]
        t = self.batch([(q_emb, context, kept)])
        logp = self.net(**t)[0]
        k = int(logp.argmax())
        rel = {}
        if kept:
            w = self.net.relevance_weights(t["q"], t["side"], t["image_mask"])[0, 1:].numpy()
            rel = {i: float(x) for (i, _), x in zip(kept, w, strict=True)}
        return Reading(self.answers[k], float(logp[k].exp()), rel, sum(g * g for _, g in kept))


# ---------------------------------------------------------------------------------------------- training
def evidence_images(kb: KnowledgeBase, q: Question) -> tuple[list[str], set[str]]:
    """Images reachable from a question's gold documents (their links, two hops) and the ids those texts mention."""
    corpus = kb.corpus
    images, context = [], id_tokens(q.text)
    frontier = [g for g in q.gold if g in corpus.doc_by_id]
    seen = set(frontier)
    for _ in range(2):
        nxt = []
        for doc_id in frontier:
            context |= id_tokens(corpus.doc_by_id[doc_id].text)
            for link in corpus.doc_by_id[doc_id].links:
                if link in corpus.image_row and link not in images:
                    images.append(link)
                elif link in corpus.doc_by_id and link not in seen:
                    seen.add(link)
                    nxt.append(link)
        frontier = nxt
    return images, context


def _sample_context(kb: KnowledgeBase, q: Question, rng: np.random.Generator) -> tuple[set[str], list[tuple[str, int]]]:
    images, context = evidence_images(kb, q)
    gold = [g for g in q.gold if g in kb.corpus.image_row]
    chosen = [i for i in images if (i in gold and rng.random() < 0.9) or (i not in gold and rng.random() < 0.6)]
    n_distract = int(rng.integers(0, 5))
    pool = len(kb.corpus.images)
    for r in rng.choice(pool, size=n_distract, replace=False):
        image_id = kb.corpus.images[int(r)].image_id
        if image_id not in chosen:
            chosen.append(image_id)
    rng.shuffle(chosen)
    return context, [(i, LEVELS[int(rng.integers(len(LEVELS)))]) for i in chosen]


def train_reader(kb: KnowledgeBase, seed: int = 0, steps: int = 1600, batch: int = 64, lr: float = 2e-3,
                 gold_weight: float = 0.5, log=None) -> ReaderNet:
    """Train the reader on its half of the train runs (``fitting_half``; the planner's RL uses the other half),
    question types drawn equally often, with randomly sampled evidence sets and token levels. The loss is the
    answer's likelihood under the mixture plus ``gold_weight`` times its likelihood under each gold image's own
    proposal."""
    rng = np.random.default_rng(seed)
    train = fitting_half(kb.corpus.split("train"), "reader")
    answers = answer_vocabulary()
    with torch.random.fork_rng():
        torch.manual_seed(seed)  # only inside fork_rng: the caller's torch RNG state is untouched
        net = ReaderNet(kb.token_dim, len(answers))
    embs = torch.from_numpy(np.stack([kb.question_emb[q.qid] for q in train]).astype(np.float32))
    net.q_mean.copy_(embs.mean(0))
    net.q_std.copy_(embs.std(0) + 1e-3)
    reader = VisualReader(kb, net)
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    t0 = time.perf_counter()
    for step in range(steps):
        qs = sample_by_type(train, rng, batch)
        rows, targets, gold_rows = [], [], []
        for q in qs:
            context, imgs = _sample_context(kb, q, rng)
            rows.append((kb.question_emb[q.qid], context, imgs))
            targets.append(answers.index(q.answer))
            gold_rows.append([i in q.gold for i, _ in imgs])
        t = reader.batch(rows)
        mixture, per_image = net(**t, per_image_out=True)
        y = torch.tensor(targets)
        loss = -mixture[torch.arange(batch), y].mean()
        # Each gold image's own proposal is supervised too: without it the question-only guess can win the mixture
        # early and the image paths of a question type get too little gradient to ever learn to read it.
        gold = torch.zeros(per_image.shape[:2], dtype=torch.bool)
        for i, flags in enumerate(gold_rows):
            gold[i, :len(flags)] = torch.tensor(flags, dtype=torch.bool)
        if gold.any():
            loss = loss - gold_weight * per_image[gold, y[:, None].expand_as(gold)[gold]].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if log is not None and (step % 100 == 0 or step == steps - 1):
            log({"step": step, "loss": loss.item(), "elapsed_s": time.perf_counter() - t0})
    return net.eval()


def reader_path(kb_folder: Path, seed: int) -> Path:
    """Where the trained reader of a corpus folder is cached."""
    return Path(kb_folder) / f"reader_seed{int(seed)}.pt"


def load_reader(kb: KnowledgeBase, path: Path) -> VisualReader:
    """A reader saved at ``path`` (ConfigError naming the file when it cannot be loaded)."""
    net = ReaderNet(kb.token_dim, len(answer_vocabulary()))
    try:
        net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    except Exception as exc:
        raise ConfigError(f"cannot load the vimrag reader {str(path)!r}: {type(exc).__name__}: {exc}") from None
    return VisualReader(kb, net.eval())


def load_or_train_reader(kb: KnowledgeBase, folder: Path, seed: int = 0) -> VisualReader:
    """The cached reader for ``seed``, training (about a minute on one core) and caching it when missing."""
    path = reader_path(folder, seed)

    def build() -> VisualReader:
        net = train_reader(kb, seed)
        with atomic_path(path) as tmp:
            torch.save(net.state_dict(), tmp)
        return VisualReader(kb, net.eval())

    return load_or_build(Path(folder) / ".reader.lock", lambda: load_reader(kb, path) if path.exists() else None,
                         build)
