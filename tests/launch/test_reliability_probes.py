"""Probes of the newer entry points (studies, trainers, the vimrag/toolpro/VLABench options, caches, checkpoints).

Each command probe calls a module's ``main`` in-process with one bad value and asserts exit 2, one stderr line with
no traceback, and a folder left exactly as it was; each cache or checkpoint probe asserts a one-line ConfigError
naming the file. ``docs/reliability.md`` lists them by cause.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from test_bad_input import call, snapshot  # the same probe helpers as the older entry points' (same folder)

from envs.errors import ConfigError
from sim_benchmarks.results_folder import FolderLock


def _main(module: str):
    return importlib.import_module(module).main


EVAL = "launch.eval"
VIMRAG = ["--env", "vimrag", "--policy", "vimrag", "--episodes", "1"]
TOOLPRO = ["--env", "toolpro/ship_paid_1", "--policy", "stepwise", "--episodes", "1"]
PVLA = ["--env", "personalized_vlabench", "--policy", "generic", "--episodes", "1"]
VLA = ["--demos", "1", "--epochs", "1"]

# (module, argv given the world folder w, a word the one stderr line must hold)
PROBES = [
    # SQLite paths given as options
    (EVAL, lambda w: [*VIMRAG, "--policy-option", f"checkpoint_db={w}/nope/c.db"], "does not exist"),
    (EVAL, lambda w: [*VIMRAG, "--policy-option", f"checkpoint_db={w}/folder"], "is a folder"),
    (EVAL, lambda w: [*VIMRAG, "--policy-option", f"checkpoint_db={w}/file"], "not a SQLite database"),
    (EVAL, lambda w: [*TOOLPRO, "--env-option", f"db_dir={w}/db_with_folder"], "is a folder"),
    (EVAL, lambda w: [*TOOLPRO, "--env-option", f"db_dir={w}/db_with_text"], "not a SQLite database"),
    (EVAL, lambda w: [*TOOLPRO, "--env-option", f"db_dir={w}/file"], "is a file"),
    # reader_url that is not a URL, an infinite timeout
    *((EVAL, (lambda u: lambda w: [*VIMRAG, "--policy-option", "reader=openai", "--policy-option",
                                   f"reader_url={u}"])(url), "reader_url")
      for url in ("http://127.0.0.1:abc/v1", "http://exa mple/v1", "http://[::1/v1")),
    (EVAL, lambda w: [*VIMRAG, "--policy-option", "reader_timeout_s=inf"], "reader_timeout_s"),
    # negative seeds
    (EVAL, lambda w: [*VIMRAG, "--env-option", "corpus_seed=-1"], "corpus_seed must be >= 0"),
    (EVAL, lambda w: [*TOOLPRO, "--env-option", "fault_seed=-1"], "fault_seed must be >= 0"),
    ("launch.train", lambda w: ["--env", "games:rps", "--seed", "-1"], "--seed must be >= 0"),
    ("launch.study", lambda w: ["toolpro.sweep", "--seed", "-1", "--out", f"{w}/o"], "--seed must be >= 0"),
    ("launch.train_vla", lambda w: ["--out", f"{w}/o", "--seed", "-1"], "--seed must be >= 0"),
    # ranges that ran, or ran out of memory
    ("launch.study", lambda w: ["aux", "theseus", "--seeds", "0-100000000000000", "--quick", "--out", f"{w}/o"],
     "--seeds must name 1 to 100"),
    ("launch.train_prior_fitted", lambda w: ["--out", f"{w}/o", "--d-model", "4000000"], "--d-model must be in"),
    ("launch.train_prior_fitted", lambda w: ["--out", f"{w}/o", "--lr", "inf"], "--lr must be a finite number"),
    (EVAL, lambda w: [*TOOLPRO, "--env-option", "rtt_ms=inf"], "rtt_ms"),
    (EVAL, lambda w: [*TOOLPRO, "--env-option", "rtt_ms=1e300"], "rtt_ms must be in 0..5000"),
    (EVAL, lambda w: [*TOOLPRO, "--env-option", "timeout_rate=1", "--env-option", "timeout_s=-1"], "timeout_s"),
    (EVAL, lambda w: [*PVLA, "--policy-option", "vla_checkpoint="], "vla_checkpoint is empty"),
    *(("launch.train_vla", (lambda a: lambda w: ["--out", f"{w}/o", *VLA, *a])(args), args[0])
      for args in (["--lr", "nan"], ["--lr", "-1"], ["--lr", "inf"], ["--minutes", "nan"], ["--xy-weight", "nan"],
                   ["--noise", "nan"], ["--patience", "-5"], ["--eval-episodes", "-3"], ["--dagger-demos", "-1"],
                   ["--batch-size", "100000000000"])),
    ("launch.study", lambda w: ["streaming.streaming_speed", "--agents", "nope", "--out", f"{w}/o"], "nope"),
    ("launch.study", lambda w: ["streaming.streaming_speed", "--steps", "0", "--out", f"{w}/o"], "--steps"),
    ("launch.study", lambda w: ["streaming.streaming_learning", "--steps", "0", "--out", f"{w}/o"], "--steps"),
    ("launch.study", lambda w: ["streaming.streaming_learning", "--workers", "0", "--out", f"{w}/o"], "--workers"),
    ("launch.study", lambda w: ["streaming.streaming_learning", "--option", "bogus=1", "--out", f"{w}/o"], "bogus"),
    ("launch.study", lambda w: ["streaming.spr_backends", "--env", "minatar:breakout", "--out", f"{w}/o"],
     "valid suites: atari, octax"),
    ("launch.study", lambda w: ["streaming.spr_backends", "--rounds", "0", "--out", f"{w}/o"], "--rounds"),
    ("launch.study", lambda w: ["streaming.spr_backends", "--env-option", "bogus=1", "--out", f"{w}/o"], "bogus"),
    ("launch.study", lambda w: ["toolpro.sweep", "--rtt", "nan", "--out", f"{w}/o"], "--rtt"),
    ("launch.study", lambda w: ["toolpro.sweep", "--name", "a/b", "--out", f"{w}/o"], "--name"),
    # corrupt files a study reads back; a report with nothing to report
    ("launch.study", lambda w: ["vimrag.ggpo_curves", "--report", "--out", f"{w}/garbage_curves"], "curves.json"),
    ("launch.study", lambda w: ["vimrag.ggpo_curves", "--report", "--out", f"{w}/o"], "--report needs"),
    # --out unwritable: found before the work
    ("launch.study", lambda w: ["aux", "theseus", "--quick", "--out", "/proc/embodia/x"], "/proc"),
    ("launch.train_prior_fitted", lambda w: ["--out", "/proc/embodia/x"], "/proc"),
    ("launch.train_embedder", lambda w: ["--out", "/proc/embodia/x"], "/proc"),
    # a usage error goes to stderr
    ("launch.study", lambda w: ["aux"], "name an aux method"),
]


@pytest.fixture()
def world(tmp_path, monkeypatch) -> Path:
    """A folder with a file, a folder, toolpro db folders holding a non-database, and a garbage curves.json."""
    w = tmp_path / "w"
    w.mkdir()
    (w / "file").write_text("not a database\n")
    (w / "folder").mkdir()
    (w / "db_with_folder" / "travel.db").mkdir(parents=True)
    (w / "db_with_text").mkdir()
    (w / "db_with_text" / "orders.db").write_text("hello\n")
    (w / "garbage_curves").mkdir()
    (w / "garbage_curves" / "curves.json").write_text("{not json")
    monkeypatch.chdir(w)
    return w


@pytest.mark.parametrize("module,argv,needle", PROBES, ids=[f"{p[0].split('.')[-1]}-{i}" for i, p in enumerate(PROBES)])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(world, capsys, module, argv, needle):
    args = argv(world)
    before = snapshot(world)
    rc, out, err = call(_main(module), args, capsys)
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert needle in lines[0], lines[0]
    assert snapshot(world) == before, "a rejected run changed the folder"


def test_a_vap_base_of_another_suite_is_refused():
    from sim_benchmarks.registry import PolicyContext
    from sim_benchmarks.suites.vap_policies import _base

    for base in ("vimrag", "balancer"):
        ctx = PolicyContext(suite="personalized_vlabench", task="t", policy="vap", seed=0, env=None,
                            options={"vap_base": base})
        with pytest.raises(ConfigError, match=f"unknown vap_base policy for personalized_vlabench '{base}'"):
            _base(ctx)


def test_corrupt_caches_are_named(tmp_path, monkeypatch):
    from envs.cache_files import read_npz
    from envs.rag.corpus import load_corpus_files

    (tmp_path / "corpus.json").write_text("[]")
    with pytest.raises(ConfigError, match="malformed vimrag corpus"):
        load_corpus_files(tmp_path)
    for name, data in (("truncated.npz", b"PK\x03\x04trunc"), ("garbage.npz", b"\x00" * 64)):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ConfigError, match=f"features cache '.*{name}' is corrupt"):
            read_npz(tmp_path / name, "features cache", ("doc_emb",))
    np.savez(tmp_path / "other.npz", x=np.zeros(2))
    with pytest.raises(ConfigError, match="no doc_emb"):
        read_npz(tmp_path / "other.npz", "features cache", ("doc_emb",))


@pytest.mark.parametrize("damage", ["weights", "config"])
def test_a_corrupt_smollm2_cache_is_named(tmp_path, monkeypatch, damage):
    from perception import smollm2

    monkeypatch.setenv("EMBODIA_CACHE", str(tmp_path))
    folder = smollm2.cache_folder()
    folder.mkdir(parents=True)
    tiny = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 32}  # small: the weights fail first
    (folder / "config.json").write_text("{bad json" if damage == "config" else json.dumps(tiny))
    (folder / "weights.pt").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ConfigError, match="SmolLM2 cache folder .* is corrupt"):
        smollm2.load_smollm2.__wrapped__()


def test_an_instance_embedder_with_a_wrong_sha256_line_is_refused(tmp_path):
    from perception.instance_embedder import HeadConfig, build_head, load_head, save_head

    config = HeadConfig()
    save_head(build_head(config), tmp_path, config, {})
    load_head(tmp_path)  # verifies
    (tmp_path / "head.pt.sha256").write_text("0" * 64 + "  head.pt\n")
    with pytest.raises(ConfigError, match="head.pt.sha256' does not match"):
        load_head(tmp_path)


def test_non_finite_weights_are_never_saved(tmp_path):
    from envs.weights import write_weights

    state = {"w": torch.tensor([1.0, float("nan")])}
    with pytest.raises(ConfigError, match="w holds non-finite values"):
        write_weights({"state_dict": state}, tmp_path / "m.pt", "weights")
    assert not any(tmp_path.iterdir())


def test_prior_fitted_trainer_refuses_to_save_diverged_weights(tmp_path):
    from policies.aux.structured.prior_fitted import build_model
    from sim_benchmarks.studies.aux.prior_fitted_checkpoint import save_checkpoint

    config = {"d_model": 8, "n_layers": 1, "d_ff": 16}
    model = build_model(config)
    with torch.no_grad():
        next(model.parameters()).fill_(float("inf"))
    with pytest.raises(ConfigError, match="non-finite"):
        save_checkpoint(model, tmp_path / "ck", config, {})
    assert not (tmp_path / "ck" / "model.pt").exists()


def test_the_lock_is_taken_before_the_folder_is_judged(tmp_path):
    """The loser of two writers is told the folder is in use, not what it half sees of the winner's files."""
    from sim_benchmarks.store import ResultsStore

    out = tmp_path / "run"
    with FolderLock(out):
        (out / "config.json").write_text("{}")
        (out / "episodes.jsonl").write_text("")  # the winner's log, still empty
        with pytest.raises(ConfigError, match=rf"in use by another run \(pid {os.getpid()}\)"):
            ResultsStore(out, {"a": 1}, resume=False)


def test_a_run_failing_before_its_first_record_leaves_nothing(tmp_path, monkeypatch):
    from sim_benchmarks import evaluation

    class Broken:
        def map(self, jobs):
            raise RuntimeError("a worker died")
            yield

    monkeypatch.setattr(evaluation, "make_executor", lambda *a, **k: Broken())
    cfg = evaluation.EvalConfig(env="games/rps_cyclic", policies=["hedge"], episodes=1, out=tmp_path / "run")
    with pytest.raises(RuntimeError):
        evaluation.run_evaluation(cfg)
    assert not (tmp_path / "run").exists()  # a fresh rerun is not refused


def test_a_failing_writer_in_a_folder_it_made_leaves_nothing(tmp_path):
    out = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError), FolderLock(out):
        (out / "metrics.jsonl").touch()
        raise RuntimeError("diverged")
    assert not (tmp_path / "a").exists() and list(tmp_path.iterdir()) == []
