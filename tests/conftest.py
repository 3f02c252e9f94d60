"""Shared fixtures: one tiny generated VimRAG corpus (10 runs) with its encodings and a 5-step reader, used by the
vimrag tests and the VimRAG launch file's run."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def tiny_stack(tmp_path_factory):
    """``(knowledge base, tools, reader, corpus folder)``; the reader is also saved where the suite's stack looks."""
    from envs.rag.corpus import generate_corpus, save_corpus
    from policies.vimrag.knowledge_base import load_knowledge_base
    from policies.vimrag.reader import VisualReader, reader_path, train_reader
    from policies.vimrag.tools import RetrievalTools

    folder = tmp_path_factory.mktemp("corpus")
    save_corpus(generate_corpus(seed=3, n_runs=10, n_calibration=2, n_stock=2), folder)
    kb = load_knowledge_base(folder=folder)
    net = train_reader(kb, seed=0, steps=5, batch=8)
    torch.save(net.state_dict(), reader_path(folder, 0))  # so launch.eval on this folder loads it, not trains one
    return kb, RetrievalTools(kb), VisualReader(kb, net), folder
