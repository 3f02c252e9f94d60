"""The prior-fitted checkpoint folder: a saved model reloads identically, a corrupt file fails its sha256 check with a
message that says so, the shipped checkpoint verifies, and the training command refuses bad flags."""

import json

import numpy as np
import pytest

from envs.errors import ConfigError
from launch.train_prior_fitted import main as train_main
from policies.aux.structured.prior_fitted import build_model, predict_proba
from policies.vla.checkpoint_files import sha256_file
from sim_benchmarks.studies.aux.prior_fitted_checkpoint import (
    DEFAULT_CHECKPOINT,
    load_checkpoint,
    read_manifest,
    save_checkpoint,
)

CONFIG = {"d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 64}


def saved(tmp_path):
    model = build_model(CONFIG, seed=4)
    save_checkpoint(model, tmp_path, CONFIG, {"seed": 4})
    return model


def test_a_saved_checkpoint_reloads_to_the_same_predictions(tmp_path):
    model = saved(tmp_path)
    rng = np.random.default_rng(0)
    xtr, ytr, xte = rng.standard_normal((20, 5)), rng.integers(0, 3, 20), rng.standard_normal((7, 5))
    loaded = load_checkpoint(tmp_path)
    np.testing.assert_array_equal(predict_proba(loaded, xtr, ytr, xte, 3), predict_proba(model, xtr, ytr, xte, 3))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert (tmp_path / "model.pt.sha256").read_text().split()[0] == manifest["sha256"]


def test_saving_the_same_weights_twice_gives_the_same_bytes(tmp_path):
    saved(tmp_path / "a")
    saved(tmp_path / "b")
    assert sha256_file(tmp_path / "a" / "model.pt") == sha256_file(tmp_path / "b" / "model.pt")


def test_a_corrupt_weights_file_fails_the_sha256_check(tmp_path):
    saved(tmp_path)
    path = tmp_path / "model.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"fail the sha256 check \(file [0-9a-f]{12}…, manifest [0-9a-f]{12}…\): "
                                          r"corrupt or replaced; retrain with python -m launch.train_prior_fitted"):
        load_checkpoint(tmp_path)


def test_missing_or_foreign_checkpoints_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="has no manifest.json"):
        load_checkpoint(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "something/else"}))
    with pytest.raises(ConfigError, match="expected 'embodia.prior_fitted_tab/1'"):
        load_checkpoint(tmp_path)


def test_the_shipped_checkpoint_verifies_and_records_how_it_was_made():
    manifest = read_manifest(DEFAULT_CHECKPOINT)
    assert manifest["training"]["command"].startswith("python -m launch.train_prior_fitted ")
    assert isinstance(manifest["training"]["seed"], int)
    assert (DEFAULT_CHECKPOINT / "model.pt").stat().st_size < 2_000_000
    model = load_checkpoint(DEFAULT_CHECKPOINT)
    assert not any(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("argv,needle", [(["--steps", "0"], "--steps must be in 1..10000000, got 0"),
                                         (["--d-model", "30"], "--d-model must be a multiple of 4"),
                                         (["--lr", "0"], "--lr must be in 1e-12..10, got 0.0"),
                                         (["--lr", "inf"], "--lr must be a finite number"),
                                         (["--d-model", "4000000"], "--d-model must be in 4..4096")])
def test_the_training_command_refuses_bad_flags(tmp_path, capsys, argv, needle):
    assert train_main(["--out", str(tmp_path / "ck"), *argv]) == 2
    assert needle in capsys.readouterr().err


def test_init_continues_a_checkpoint_and_records_it(tmp_path):
    model = saved(tmp_path / "first")
    first = read_manifest(tmp_path / "first")
    assert train_main(["--out", str(tmp_path / "next"), "--init", str(tmp_path / "first"), "--steps", "2",
                       "--batch", "2", "--n-test", "5", "--seed", "9", "--eval-tasks", "2"]) == 0
    manifest = read_manifest(tmp_path / "next")
    # the architecture comes from the checkpoint, not the flags
    assert {k: manifest["config"][k] for k in first["config"]} == first["config"]
    assert manifest["training"]["init"]["sha256"] == first["sha256"]
    assert manifest["training"]["prior_config"]["n_test"] == 5
    after = load_checkpoint(tmp_path / "next").state_dict()
    before = model.state_dict()
    # Two small steps from the saved weights: moved, but far closer to them than to a fresh initialisation.
    fresh = build_model(CONFIG, seed=9).state_dict()
    moved = sum(float((after[k] - before[k]).abs().sum()) for k in before)
    assert 0 < moved < sum(float((fresh[k] - before[k]).abs().sum()) for k in before) / 10


def test_init_refuses_a_folder_without_a_checkpoint(tmp_path, capsys):
    assert train_main(["--out", str(tmp_path / "ck"), "--init", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert "has no manifest.json" in err and len(err.strip().splitlines()) == 1


def test_two_models_evaluated_with_one_seed_see_the_same_tasks_task_by_task():
    from launch.train_prior_fitted import evaluate_on_prior

    a, b = build_model(CONFIG, seed=4), build_model(CONFIG, seed=5)
    ea, eb = evaluate_on_prior(a, 4, 3, per_task=True), evaluate_on_prior(b, 4, 3, per_task=True)
    # the baselines do not depend on the model: identical per task when the tasks are the same
    assert ea["per_task"]["logistic"] == eb["per_task"]["logistic"] and len(ea["per_task"]["pfn"]) == 4
    assert ea["per_task"]["pfn"] != eb["per_task"]["pfn"]
    assert np.mean(ea["per_task"]["pfn"]) == pytest.approx(ea["accuracy"]["pfn"][0])
    assert "per_task" not in evaluate_on_prior(a, 2, 3)
