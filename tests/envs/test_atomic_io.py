import json

import numpy as np
import pytest
import torch
from PIL import Image

from envs.atomic_io import atomic_path, write_bytes_atomic, write_json_atomic, write_text_atomic
from envs.paths import data_cache, mesh_cache, model_cache, vulkan_dir


def test_writes_replace_the_file_whole(tmp_path):
    target = tmp_path / "summary.json"
    write_json_atomic(target, {"b": 1, "a": [1, 2]})
    assert target.read_text() == json.dumps({"a": [1, 2], "b": 1}, indent=2, sort_keys=True) + "\n"
    write_text_atomic(target, "x\n")
    assert target.read_text() == "x\n"
    write_bytes_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no staging left behind


def test_a_failed_write_leaves_the_old_file_and_nothing_else(tmp_path):
    target = tmp_path / "cache.npz"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["cache.npz"]


def test_writers_that_read_the_name_write_what_a_direct_write_would(tmp_path):
    # np.savez appends .npz to other names, PIL picks the format from the suffix, torch.save names its archive
    # after the file: the staged file carries the final name, so the bytes are those of a direct write.
    for name, write in [("a.npz", lambda p: np.savez(p, x=np.arange(3))),
                        ("t.png", lambda p: Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(p)),
                        ("w.pt", lambda p: torch.save({"w": torch.ones(2)}, p))]:
        (tmp_path / "direct").mkdir(exist_ok=True)
        write(tmp_path / "direct" / name)
        with atomic_path(tmp_path / name) as tmp:
            write(tmp)
        assert (tmp_path / name).read_bytes() == (tmp_path / "direct" / name).read_bytes(), name


def test_cache_locations_follow_their_variables(monkeypatch, tmp_path):
    for var, where in [("EMBODIA_CACHE", model_cache), ("EMBODIA_MESH_CACHE", mesh_cache),
                       ("EMBODIA_DATA_CACHE", data_cache), ("EMBODIA_VULKAN_DIR", vulkan_dir)]:
        monkeypatch.setenv(var, str(tmp_path / var))
        assert where() == tmp_path / var
        monkeypatch.delenv(var)
        assert where() != tmp_path / var

