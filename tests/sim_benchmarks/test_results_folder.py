"""Results folders: the writer lock, --out checks, and append-only logs read back after a kill (torn tail) or
damage (corrupt line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.errors import ConfigError
from sim_benchmarks.results_folder import LOCK_NAME, FolderLock, check_out_dir
from sim_benchmarks.store import ResultsStore, read_records
from sim_benchmarks.train_log import TrainLog, cut_torn_tail, read_jsonl

_records = st.lists(st.dictionaries(st.sampled_from(["step", "loss", "task", "note"]),
                                    st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=6)),
                                    min_size=1), min_size=1, max_size=8)


@settings(max_examples=80, deadline=None)
@given(_records, st.data())
def test_a_log_cut_anywhere_reads_back_its_complete_records(records, data):
    import tempfile
    from pathlib import Path

    lines = [json.dumps(r, sort_keys=True).encode() + b"\n" for r in records]
    blob = b"".join(lines)
    cut = data.draw(st.integers(0, len(blob)))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "metrics.jsonl"
        path.write_bytes(blob[:cut])
        complete = sum(1 for k in range(len(lines)) if len(b"".join(lines[: k + 1])) <= cut)
        assert read_jsonl(path) == records[:complete]  # a kill mid-write loses only the record being written
        cut_torn_tail(path)
        with open(path, "ab") as fh:
            fh.write(lines[-1])
        assert read_jsonl(path) == [*records[:complete], records[-1]]


@settings(max_examples=60, deadline=None)
@given(_records, st.data(), st.sampled_from([b"{oops", b"[1, 2]", b"\xff\xfe", b"42", b'"text"', b"nul\x00l"]))
def test_a_corrupt_line_is_named_by_file_and_line(records, data, garbage):
    import tempfile
    from pathlib import Path

    lines = [json.dumps(r).encode() + b"\n" for r in records]
    at = data.draw(st.integers(0, len(lines)))
    lines.insert(at, garbage + b"\n")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "episodes.jsonl"
        path.write_bytes(b"".join(lines))
        with pytest.raises(ConfigError, match=f"episodes.jsonl:{at + 1}: corrupt record"):
            read_jsonl(path)


def test_episode_records_need_their_key_fields(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_text('{"task": "a", "policy": "p", "episode": 0}\n{"task": "a", "policy": "p"}\n')
    with pytest.raises(ConfigError, match=r"episodes.jsonl:2: .*task, policy, episode"):
        read_records(path)


def test_train_log_resume_cuts_a_torn_tail_and_refuses_corruption(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"st')
    log = TrainLog(tmp_path, resume=True)
    log.append({"step": 3})
    assert [r["step"] for r in log.records()] == [1, 2, 3]
    log.truncate_after(2)
    assert [r["step"] for r in log.records()] == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]  # no temporary file left
    log.close()
    path.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(ConfigError, match="metrics.jsonl:2"):
        TrainLog(tmp_path, resume=True)
    assert path.read_text() == '{"step": 1}\nnot json\n{"step": 3}\n'  # refused before changing anything


def test_folder_lock_is_exclusive_and_names_the_holder(tmp_path):
    folder = tmp_path / "new" / "run"
    with FolderLock(folder) as lock:
        assert (folder / LOCK_NAME).read_text() == f"{os.getpid()}\n"
        with pytest.raises(ConfigError, match=f"in use by another run \\(pid {os.getpid()}\\)"):
            FolderLock(folder).acquire()  # flock is per open file: a second open in this process conflicts too
        code = ("import sys; from sim_benchmarks.results_folder import FolderLock\n"
                "try:\n    FolderLock(sys.argv[1]).acquire()\nexcept Exception as e:\n    print(e)")
        other = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True,
                               timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        assert f"pid {os.getpid()}" in other.stdout, other
        assert lock.created_dir
    with FolderLock(folder):  # released: the next writer gets it
        pass


def test_a_lock_that_wrote_nothing_is_undone(tmp_path):
    folder = tmp_path / "fresh"
    lock = FolderLock(folder).acquire()
    lock.release_and_undo()
    assert not folder.exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(ConfigError), FolderLock(existing):
        raise ConfigError("a user error inside the run")
    assert list(existing.iterdir()) == []


def test_check_out_dir_reads_only(tmp_path):
    (tmp_path / "f").write_text("x")
    assert check_out_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()
    for bad, needle in ((tmp_path / "f", "is a file"), (tmp_path / "f" / "x", "is a file")):
        with pytest.raises(ConfigError, match=needle):
            check_out_dir(bad)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="dangling"):
        check_out_dir(tmp_path / "dangling")


def test_results_store_refuses_before_writing(tmp_path):
    config = {"env": "x", "episodes": 1}
    store = ResultsStore(tmp_path / "r", config, resume=False)
    store.append({"task": "t", "policy": "p", "episode": 0})
    with pytest.raises(ConfigError, match="in use by another run"):
        ResultsStore(tmp_path / "r", config, resume=True)
    store.close()
    with open(tmp_path / "r" / "episodes.jsonl", "a") as fh:
        fh.write('{"task": "t", "policy": "p", "epis')  # a torn write
    resumed = ResultsStore(tmp_path / "r", config, resume=True)
    assert resumed.done_keys() == {("t", "p", 0)}
    resumed.append({"task": "t", "policy": "p", "episode": 1})
    assert [r["episode"] for r in resumed.records()] == [0, 1]
    resumed.close()
    with pytest.raises(ConfigError, match="different settings"):
        ResultsStore(tmp_path / "r", {**config, "episodes": 2}, resume=True)
    empty = ResultsStore(tmp_path / "e", config, resume=False)
    empty.discard_if_empty()
    assert not (tmp_path / "e").exists()
