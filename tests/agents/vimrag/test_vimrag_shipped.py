"""Evaluation never trains VimRAG's parts: it loads them (shipped, sha256-verified, or a corpus folder's own) or exits
2 naming ``launch.train_vimrag``, which trains them with a manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agents.vimrag import shipped
from envs.errors import ConfigError
from envs.paths import sha256_file

pytestmark = pytest.mark.slow


def _bare_copy(folder: Path, dest: Path) -> Path:
    """The corpus and its encodings without any trained part."""
    dest.mkdir()
    for name in ("corpus.json", "pixels.npz", "features.npz"):
        shutil.copy(folder / name, dest / name)
    return dest


def _eval(folder: Path, out: Path) -> int:
    from launch import eval as eval_cli

    return eval_cli.main(["--env", "vimrag/placed_colour", "--env-option", f"corpus_dir={folder}", "--policy",
                          "vimrag", "--episodes", "1", "--workers", "1", "--out", str(out)])


def test_eval_without_trained_parts_exits_2_naming_the_command(tiny_stack, tmp_path, capsys) -> None:
    folder = _bare_copy(tiny_stack[3], tmp_path / "corpus")
    assert _eval(folder, tmp_path / "run") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no trained vimrag reader" in err[0]
    assert f"python -m launch.train_vimrag --corpus-dir {folder}" in err[0]
    assert not list(folder.glob("reader_*")) and not list(folder.glob("planner_*"))  # nothing trained
    assert not (tmp_path / "run").exists()


def test_train_command_writes_parts_and_manifest_then_eval_loads_them(tiny_stack, tmp_path, capsys) -> None:
    from launch import train_vimrag

    folder = _bare_copy(tiny_stack[3], tmp_path / "corpus")
    assert train_vimrag.main(["--corpus-dir", str(folder), "--reader-steps", "3", "--planner-episodes", "64"]) == 0
    err = capsys.readouterr().err
    assert "reader steps: 3/3" in err and "planner episodes: 256/256" in err  # progress even when not a terminal
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["format"] == shipped.FORMAT and manifest["corpus_dir"] == str(folder)
    assert set(manifest["files"]) == {"reader_seed0.pt", "planner_v2_ggpo_seed0.pt"}
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == sha256_file(folder / name)
    assert manifest["command"].startswith("python -m launch.train_vimrag --corpus-dir")
    assert _eval(folder, tmp_path / "run") == 0
    record = json.loads((tmp_path / "run" / "episodes.jsonl").read_text().splitlines()[0])
    assert record["policy"] == "vimrag"


def test_a_shipped_part_is_verified_against_its_manifest(tmp_path) -> None:
    from envs.rag.corpus import CORPUS_VERSION

    part = tmp_path / "reader_seed0.pt"
    part.write_bytes(b"weights")
    manifest = {"format": shipped.FORMAT, "corpus_version": CORPUS_VERSION, "corpus_seed": 0,
                "files": {part.name: {"sha256": sha256_file(part)}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert shipped.shipped_part(part.name, 0, tmp_path) == part
    assert shipped.shipped_part(part.name, 1, tmp_path) is None  # another corpus seed: not shipped
    assert shipped.shipped_part("planner_v2_ggpo_seed0.pt", 0, tmp_path) is None
    part.write_bytes(b"weightz")
    with pytest.raises(ConfigError, match="does not match the sha256 in its manifest"):
        shipped.shipped_part(part.name, 0, tmp_path)
    part.unlink()
    with pytest.raises(ConfigError, match="listed in its manifest but missing"):
        shipped.shipped_part(part.name, 0, tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(ConfigError, match="malformed vimrag manifest"):
        shipped.shipped_part(part.name, 0, tmp_path)


def test_the_shipped_parts_are_listed_with_their_sha256() -> None:
    manifest = shipped.read_manifest()
    if manifest is None:
        pytest.skip("no vimrag parts shipped in this checkout")
    for name, entry in manifest["files"].items():
        assert shipped.shipped_part(name, manifest["corpus_seed"]) == shipped.SHIPPED / name
        assert entry["bytes"] < 5_000_000  # small enough to ship
