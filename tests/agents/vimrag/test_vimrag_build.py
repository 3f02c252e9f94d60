"""Building the corpus and its encodings in parallel gives the same bytes as building them in one process."""

from __future__ import annotations

import fcntl
import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.slow


def test_rendering_in_two_processes_gives_the_same_corpus(tiny_stack) -> None:
    from envs.rag.corpus import generate_corpus

    serial = tiny_stack[0].corpus  # tests/conftest.py: the same arguments, rendered in this process
    parallel = generate_corpus(seed=3, n_runs=10, n_calibration=2, n_stock=2, processes=2)
    assert parallel.pixels.dtype == np.uint8 and parallel.pixels.shape == serial.pixels.shape
    assert np.array_equal(parallel.pixels, serial.pixels)
    assert parallel.documents == serial.documents and parallel.images == serial.images
    assert parallel.questions == serial.questions


def test_encodings_built_in_parts_equal_one_process_and_leave_one_file(tiny_stack, tmp_path) -> None:
    from envs.rag.corpus import load_corpus
    from policies.vimrag.knowledge_base import FEATURE_PARTS, _encode, _part, load_knowledge_base

    for name in ("corpus.json", "pixels.npz"):
        shutil.copy(tiny_stack[3] / name, tmp_path / name)
    corpus = load_corpus(folder=tmp_path)
    # Another process is building the image part: this one takes the text part and does not wait for the other.
    with open(tmp_path / ".features.image.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert _part(corpus, tmp_path, "image", wait=False) is None
        text = _part(corpus, tmp_path, "text", wait=False)
    assert text is not None and (tmp_path / "features.text.npz").exists()
    assert not (tmp_path / "features.image.npz").exists()
    kb = load_knowledge_base(folder=tmp_path)  # builds the image part, reuses the text part, merges
    assert sorted(p.name for p in tmp_path.glob("features*.npz")) == ["features.npz"]
    whole = _encode(corpus)
    with np.load(tmp_path / "features.npz") as merged:
        assert sorted(merged.files) == sorted(whole)
        for key, value in whole.items():
            assert np.array_equal(merged[key], value), key
    assert np.array_equal(kb.levels[7], tiny_stack[0].levels[7]) and np.array_equal(kb.doc_emb, tiny_stack[0].doc_emb)
    assert set(FEATURE_PARTS) == {"text", "image"}
