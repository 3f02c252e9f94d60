"""Bad input for every entry point: exit 2, one stderr line naming the bad thing, no traceback, nothing written.

Each probe calls the module's ``main`` in-process (the same code the console runs) inside a folder that holds a
regular file, a finished results folder, a corrupt one and so on; the whole folder is snapshotted before and after.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

import launch.__main__ as embodia
from launch import eval as eval_cli
from launch import (
    leaderboard,
    run,
    serve,
    study,
    train,
    train_attributes,
    train_embedder,
    train_localiser,
    train_prior_fitted,
    train_soft_prompt,
    train_vimrag,
    train_vla,
)
from sim_benchmarks.results_folder import FolderLock

ROOT = Path(__file__).resolve().parents[2]


def call(main: Callable[[list[str]], int], argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``main(argv)`` as the console would see them."""
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse usage errors
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def snapshot(root: Path) -> dict[str, tuple[bool, int, int]]:
    """Every path under ``root`` with (is folder, size, mtime): equal snapshots mean nothing was written."""
    return {str(p.relative_to(root)): (p.is_dir(), p.stat().st_size if p.is_file() else 0, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished two-episode classic_control results folder (written once for the module)."""
    out = tmp_path_factory.mktemp("finished") / "res"
    assert eval_cli.main(["--env", "classic_control", "--episodes", "2", "--out", str(out)]) == 0
    return out


@pytest.fixture()
def world(tmp_path, finished, monkeypatch) -> Path:
    """A working folder with the things probes point at (see ``argv`` placeholders in PROBES)."""
    monkeypatch.setenv("CI", "true")
    w = tmp_path / "w"
    w.mkdir()
    (w / "file").write_text("not a folder\n")
    shutil.copytree(finished, w / "results")
    shutil.copytree(finished, w / "corrupt_config")
    (w / "corrupt_config" / "config.json").write_text('{"env": "classic_control", ')
    shutil.copytree(finished, w / "corrupt_middle")
    lines = (w / "corrupt_middle" / "episodes.jsonl").read_text().splitlines(keepends=True)
    (w / "corrupt_middle" / "episodes.jsonl").write_text(lines[0] + "{garbage\n" + "".join(lines[1:]))
    (w / "empty").mkdir()
    (w / "train_run").mkdir()
    (w / "train_run" / "metrics.jsonl").write_text('{"step": 2, "loss": 1.0}\n{"step": 4, "loss": 0.9}\n')
    (w / "train_corrupt").mkdir()
    (w / "train_corrupt" / "metrics.jsonl").write_text('{"step": 2}\n[1, 2]\n{"step": 6}\n{"step": 8')
    summary = json.loads((finished / "summary.json").read_text())
    for name, text in {
        "sum_not_json": "{nope", "sum_binary": "\x00\xff\xfe garbage", "sum_list": "[1, 2]",
        "sum_schema": json.dumps({**summary, "schema": "other/9"}),
        "sum_no_policies": json.dumps({k: v for k, v in summary.items() if k != "policies"}),
        "sum_bad_rate": json.dumps({**summary, "policies": {"p": {**summary["policies"]["random"],
                                                                 "success_rate": "high"}}}),
        "sum_no_per_task": json.dumps({**summary, "policies": {"p": {k: v for k, v in
                                                                     summary["policies"]["random"].items()
                                                                     if k != "per_task"}}}),
        "sum_bad_ci": json.dumps({**summary, "policies": {"p": {**summary["policies"]["random"],
                                                               "success_ci95": [0.1]}}}),
    }.items():
        (w / name).mkdir()
        (w / name / "summary.json").write_bytes(text.encode("utf-8", "surrogateescape") if name != "sum_binary"
                                                 else b"\x00\xff\xfe garbage")
    (w / "bad_ckpt").mkdir()
    (w / "bad_ckpt" / "manifest.json").write_text("{not json")
    (w / "trunc_ckpt").mkdir()  # the shipped checkpoint with its weights cut short
    shutil.copy(ROOT / "checkpoints" / "generic_vla" / "manifest.json", w / "trunc_ckpt")
    (w / "trunc_ckpt" / "head.pt").write_bytes((ROOT / "checkpoints" / "generic_vla" / "head.pt").read_bytes()[:4096])
    return w


def _launch(w: Path, name: str, text: str) -> str:
    path = w / name
    path.write_text(text)
    return str(path)


def _cycle(w: Path) -> str:
    _launch(w, "b.launch.xml", '<launch><include file="a.launch.xml"/></launch>')
    return _launch(w, "a.launch.xml", '<launch><include file="b.launch.xml"/></launch>')


def _eval_file(expr: str) -> Callable[[Path], list[str]]:
    # The expression is one double-quoted argument, as the ROS 2 grammar requires (&quot; inside the XML attribute).
    return lambda w: [_launch(w, "e.launch.xml",
                              f'<launch>\n  <let name="x" value="$(eval &quot;{expr}&quot;)"/>\n</launch>')]


# (entry point, argv builder given the working folder, text the one stderr line must contain)
PROBES: list[tuple[str, Callable[[Path], list[str]], str]] = [
    # ---- launch.eval: names, counts, options
    ("eval", lambda w: ["--env", "nope", "--out", f"{w}/o"], "'nope'"),
    ("eval", lambda w: ["--env", "games/nope", "--out", f"{w}/o"], "'nope'"),
    ("eval", lambda w: ["--env", "games", "--policy", "nope", "--out", f"{w}/o"], "'nope'"),
    ("eval", lambda w: ["--env", "games", "--policy", "hedge,hedge", "--out", f"{w}/o"], "twice"),
    ("eval", lambda w: ["--env", "games", "--episodes", "1000000000000", "--out", f"{w}/o"], "at most"),
    ("eval", lambda w: ["--env", "games", "--episodes", "0", "--out", f"{w}/o"], "--episodes"),
    ("eval", lambda w: ["--env", "games", "--episodes", "1e12", "--out", f"{w}/o"], "'1e12'"),
    ("eval", lambda w: ["--env", "games", "--workers", "100000", "--out", f"{w}/o"], "--workers"),
    ("eval", lambda w: ["--env", "games", "--video", "-1", "--out", f"{w}/o"], "--video"),
    ("eval", lambda w: ["--env", "games", "--executor", "threads", "--out", f"{w}/o"], "'threads'"),
    ("eval", lambda w: ["--env", "games", "--no-such-flag"], "--no-such-flag"),
    ("eval", lambda w: ["--env", "games", "--env-option", "bogus=1", "--out", f"{w}/o"], "'bogus'"),
    ("eval", lambda w: ["--env", "games", "--env-option", "rounds=abc", "--out", f"{w}/o"], "rounds"),
    ("eval", lambda w: ["--env", "games", "--env-option", "noequals", "--out", f"{w}/o"], "key=value"),
    ("eval", lambda w: ["--env", "classic_control", "--env-option", "max_steps=abc", "--out", f"{w}/o"],
     "max_steps must be an integer"),
    ("eval", lambda w: ["--env", "games", "--policy-option", "nope=1", "--out", f"{w}/o"], "'nope'"),
    ("eval", lambda w: ["--env", "games", "--policy", "windowed_robust", "--policy-option", "window=abc", "--out",
                        f"{w}/o"], "window"),
    # the second policy's checkpoint is corrupt: found before the first policy's episodes are written
    ("eval", lambda w: ["--env", "generic_simpler/fractal_pick", "--policy", "random,generic", "--episodes", "1",
                        "--policy-option", f"vla_checkpoint={w}/trunc_ckpt", "--out", f"{w}/o"], "sha256"),
    # the vimrag reader options are checked before the corpus is loaded
    ("eval", lambda w: ["--env", "vimrag", "--policy-option", "reader=hf", "--out", f"{w}/o"], "needs reader_path"),
    ("eval", lambda w: ["--env", "vimrag", "--policy-option", "reader=hf", "--policy-option",
                        f"reader_path={w}/missing", "--out", f"{w}/o"], "is not a folder"),
    ("eval", lambda w: ["--env", "vimrag", "--policy-option", "reader=openai", "--policy-option",
                        "reader_url=localhost:8000", "--out", f"{w}/o"], "must be an http(s) URL"),
    ("eval", lambda w: ["--env", "vimrag", "--policy-option", "reader_url=http://x", "--out", f"{w}/o"],
     "need reader=openai"),
    # ---- launch.eval: the results folder
    ("eval", lambda w: ["--env", "games", "--out", f"{w}/file"], "is a file"),
    ("eval", lambda w: ["--env", "games", "--out", f"{w}/file/sub"], "is a file"),
    ("eval", lambda w: ["--env", "games", "--out", "/proc/embodia-probe"], "/proc/embodia-probe"),
    ("eval", lambda w: ["--env", "classic_control", "--episodes", "2", "--out", f"{w}/results"], "already holds"),
    ("eval", lambda w: ["--env", "classic_control", "--episodes", "3", "--out", f"{w}/results", "--resume"],
     "different settings"),
    ("eval", lambda w: ["--env", "classic_control", "--episodes", "2", "--out", f"{w}/empty", "--resume"],
     "--resume"),
    ("eval", lambda w: ["--env", "classic_control", "--episodes", "2", "--out", f"{w}/corrupt_config", "--resume"],
     "config.json' is corrupt"),
    ("eval", lambda w: ["--env", "classic_control", "--episodes", "2", "--out", f"{w}/corrupt_middle", "--resume"],
     "episodes.jsonl:2"),
    # ---- launch.train
    ("train", lambda w: [], "--env is required"),
    ("train", lambda w: ["--env", "games:nope", "--out", f"{w}/o"], "'games:nope'"),
    ("train", lambda w: ["--env", "nowhere:x", "--out", f"{w}/o"], "'nowhere:x'"),
    ("train", lambda w: ["--env", "games:rps", "--agent", "nope", "--out", f"{w}/o"], "'nope'"),
    ("train", lambda w: ["--env", "games:rps", "--steps", "0", "--out", f"{w}/o"], "--steps"),
    ("train", lambda w: ["--env", "games:rps", "--steps", "many", "--out", f"{w}/o"], "'many'"),
    ("train", lambda w: ["--env", "games:rps", "--option", "noequals", "--out", f"{w}/o"], "key=value"),
    ("train", lambda w: ["--env", "games:rps", "--out", f"{w}/file"], "is a file"),
    ("train", lambda w: ["--env", "games:rps", "--out", f"{w}/file/sub"], "is a file"),
    ("train", lambda w: ["--env", "games:rps", "--out", f"{w}/empty", "--resume"], "--resume"),
    ("train", lambda w: ["--env", "games:rps", "--out", f"{w}/train_run"], "already holds"),
    ("train", lambda w: ["--env", "games:rps", "--out", f"{w}/train_corrupt", "--resume"], "metrics.jsonl:2"),
    # ---- the VLA trainers (every option is checked before any scene or demo is collected)
    ("train_vla", lambda w: ["--out", f"{w}/file"], "is a file"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--demos", "0"], "--demos"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--backbone", "nope"], "'nope'"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--tasks", "nope"], "'nope'"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--init", f"{w}/bad_ckpt"], "manifest"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--checkpoint-out", f"{w}/file"], "is a file"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--demo-cache", f"{w}/file", "--eval-episodes", "0"], "demo cache"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--suite", "nope"], "'nope'"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--suite", "personalized_vlabench", "--tasks", "fractal_pick"],
     "'fractal_pick'"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--suite", "personalized_vlabench", "--split", "test"], "--split"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--memory", "3"], "--memory"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--noise", "-1"], "--noise"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--look-randomisation", "0.5"], "--look-randomisation"),
    ("train_vla", lambda w: ["--out", f"{w}/o", "--suite", "personalized_vlabench", "--look-randomisation", "2"],
     "--look-randomisation"),
    ("train_embedder", lambda w: ["--out", f"{w}/file"], "is a file"),
    ("train_soft_prompt", lambda w: ["--out", f"{w}/file"], "is a file"),
    ("train_vimrag", lambda w: ["--out", f"{w}/file"], "is a file"),
    ("train_vimrag", lambda w: ["--out", f"{w}/o", "--credit", "nope"], "unknown --credit 'nope'"),
    ("train_vimrag", lambda w: ["--out", f"{w}/o", "--corpus-dir", f"{w}/empty"], "holds no corpus.json"),
    ("serve", lambda w: ["nosuch", "--db", f"{w}/x.db"], "unknown service 'nosuch'"),
    ("serve", lambda w: ["travel", "--db", f"{w}/file"], "is not a SQLite database"),
    ("serve", lambda w: ["travel", "--db", f"{w}/x.db", "--error-rate", "2"], "--error-rate must be in 0..1"),
    ("serve", lambda w: ["travel"], "required: --db"),
    ("train_embedder", lambda w: ["--out", f"{w}/o", "--episodes", "0"], "--episodes"),
    ("train_prior_fitted", lambda w: ["--out", f"{w}/file"], "is a file"),
    ("train_prior_fitted", lambda w: ["--out", f"{w}/o", "--steps", "0"], "--steps"),
    ("train_attributes", lambda w: ["--out", f"{w}/file"], "is a file"),
    ("train_attributes", lambda w: ["--out", f"{w}/o", "--scenes", "0"], "--scenes"),
    ("train_attributes", lambda w: ["--out", f"{w}/o", "--split", "nope"], "'nope'"),
    ("train_attributes", lambda w: ["--out", f"{w}/o", "--attach", f"{w}/bad_ckpt"], "manifest"),
    ("train_attributes", lambda w: [], "--out"),
    ("train_localiser", lambda w: ["--out", f"{w}/file"], "is a file"),
    ("train_localiser", lambda w: ["--out", f"{w}/o", "--width", "7"], "--width"),
    ("train_localiser", lambda w: ["--out", f"{w}/o", "--checkpoint", f"{w}/bad_ckpt"], "manifest"),
    ("train_localiser", lambda w: ["--out", f"{w}/o", "--checkpoint", f"{w}/missing"], "missing"),
    # ---- launch.leaderboard: folders and summaries
    ("study", lambda w: ["nope"], "unknown study 'nope'; valid: aux"),
    ("study", lambda w: [], "unknown study ''"),
    ("study", lambda w: ["aux", "nope", "--out", f"{w}/o"], "unknown aux method 'nope'"),
    ("study", lambda w: ["aux", "dmanet", "--seeds", "x", "--out", f"{w}/o"], "--seeds"),
    ("leaderboard", lambda w: [f"{w}/missing"], "not a results folder"),
    ("leaderboard", lambda w: [f"{w}/empty"], "no summary.json"),
    ("leaderboard", lambda w: [f"{w}/file"], "not a results folder"),
    ("leaderboard", lambda w: [f"{w}/sum_not_json"], "not valid JSON"),
    ("leaderboard", lambda w: [f"{w}/sum_binary"], "not valid JSON"),
    ("leaderboard", lambda w: [f"{w}/sum_list"], "JSON object"),
    ("leaderboard", lambda w: [f"{w}/sum_schema"], "schema"),
    ("leaderboard", lambda w: [f"{w}/sum_no_policies"], "policies"),
    ("leaderboard", lambda w: [f"{w}/sum_bad_rate"], "success_rate"),
    ("leaderboard", lambda w: [f"{w}/sum_no_per_task"], "per_task"),
    ("leaderboard", lambda w: [f"{w}/sum_bad_ci"], "success_ci95"),
    ("leaderboard", lambda w: [f"{w}/results", f"{w}/sum_bad_rate", "--out", f"{w}/merged"], "success_rate"),
    ("leaderboard", lambda w: [f"{w}/results", "--out", f"{w}/file"], "is a file"),
    # ---- launch.run: launch files
    ("run", lambda w: [f"{w}/missing.launch.xml"], "not found"),
    ("run", lambda w: [f"{w}/file", "x=1"], "name:=value"),
    ("run", lambda w: [_cycle(w)], "include cycle"),
    ("run", lambda w: [_launch(w, "s.launch.xml", '<launch>\n<include file="s.launch.xml"/></launch>')],
     "s.launch.xml:2: include cycle"),
    ("run", _eval_file("1 / 0"), "e.launch.xml:2: $(eval 1 / 0): ZeroDivisionError"),
    ("run", _eval_file("1 + 'a'"), "TypeError"),
    ("run", _eval_file("99999999999 * 99999999999 * 99999999999"), "64 bits"),
    ("run", _eval_file("'a' * 1000000000"), "characters"),
    ("run", _eval_file("(" * 300 + "1" + ")" * 300), "e.launch.xml:2"),
    ("run", _eval_file("-" * 900 + "1"), "e.launch.xml:2"),
    ("run", _eval_file("1 + 2" + " + 1" * 300), "e.launch.xml:2"),
    ("run", _eval_file("x + 1"), "Name is not allowed"),
    ("run", _eval_file("(1).real"), "Attribute is not allowed"),
    ("run", _eval_file("__import__('os')"), "Call is not allowed"),
    ("run", _eval_file("[1, 2][0]"), "not allowed"),
    ("run", _eval_file("(lambda: 1)"), "Lambda is not allowed"),
    ("run", _eval_file("[c for c in 'ab']"), "not allowed"),
    ("run", _eval_file("f'{1}'"), "JoinedStr is not allowed"),
    ("run", _eval_file("1 +"), "not a valid expression"),
    ("run", lambda w: [_launch(w, "u.launch.xml", '<launch>\n<let name="x" value="$(eval \'1 + 2\'"/>\n</launch>')],
     "u.launch.xml:2: a space or ')' after a quoted argument"),
    ("run", lambda w: [_launch(w, "q.launch.xml", '<launch>\n<let name="x" value="$(eval \'1\' + 2)"/>\n</launch>')],
     "q.launch.xml:2: $(eval) takes 1..2 arguments, got 3"),
    ("run", lambda w: [_launch(w, "m.launch.xml", "<launch>\n  <arg default='1'/>\n</launch>")],
     "m.launch.xml:2: <arg> needs the attribute(s) name"),
    ("run", lambda w: [_launch(w, "m.launch.xml", "<launch>\n\n  <include/>\n</launch>")],
     "m.launch.xml:3: <include> needs the attribute(s) file"),
    ("run", lambda w: [_launch(w, "m.launch.xml", "<launch><node pkg='embodia'/></launch>")], "exec"),
    ("run", lambda w: [_launch(w, "m.launch.xml", "<launch><let name='a' value='1'><node/></let></launch>")],
     "may contain only nothing"),
    ("run", lambda w: [_launch(w, "m.launch.xml", "<launch><node pkg='embodia' exec='eval'><arg name='x'/>"
                                                  "</node></launch>")], "<node> may contain only <param>"),
    ("run", lambda w: [_launch(w, "m.launch.xml", "<launch>\n<node pkg='embodia' exec='eval'>\n</launch>")],
     "m.launch.xml:3: malformed XML"),
    ("run", lambda w: [_launch(w, "m.launch.xml", "")], "malformed XML"),
    ("run", lambda w: [_launch(w, "m.launch.xml", "<other/>")], "root element must be <launch>"),
    ("run", lambda w: [_launch(w, "y.launch.yaml", "launch:\n  - arg: [1, 2]\n")], "y.launch.yaml:2"),
    ("run", lambda w: [_launch(w, "y.launch.yaml", "launch:\n  - arg: {name: a, default: [1, 2]}\n")],
     "attribute 'default'"),
    ("run", lambda w: [_launch(w, "y.launch.yaml", "launch:\n  - node: {pkg: embodia, exec: eval, param: [5]}\n")],
     "each param is a mapping"),
    ("run", lambda w: [_launch(w, "y.launch.yaml", "launch: {arg: 1}\n")], "one key 'launch' holding a list"),
    ("run", lambda w: [_launch(w, "y.launch.yaml", "launch:\n  - arg: {name: a\n")], "malformed YAML"),
    ("run", lambda w: [_launch(w, "y.launch.yaml", "launch:\n  - arg: !!python/object:os.system {}\n")],
     "y.launch.yaml:2"),  # composed, never constructed: the tag cannot run anything
    ("run", lambda w: [_launch(w, "y.launch.yaml", "launch:\n  - arg: {name: !!python/name:os.system ''}\n")],
     "malformed YAML"),
    ("run", lambda w: [str(_binary(w, "b.launch.yaml"))], "not a UTF-8 text file"),
    ("run", lambda w: [str(_binary(w, "b.launch.xml"))], "malformed XML"),
    # ---- the embodia console script
    ("__main__", lambda w: [], "usage: embodia"),
    ("__main__", lambda w: ["nope"], "'nope'"),
    ("__main__", lambda w: ["eval", "--env", "nope"], "'nope'"),
]
MAINS = {"eval": eval_cli.main, "train": train.main, "train_vla": train_vla.main,
         "train_attributes": train_attributes.main, "train_localiser": train_localiser.main,
         "train_embedder": train_embedder.main, "train_soft_prompt": train_soft_prompt.main,
         "train_vimrag": train_vimrag.main, "serve": serve.main,
         "train_prior_fitted": train_prior_fitted.main,
         "leaderboard": leaderboard.main, "run": run.main, "study": study.main, "__main__": embodia.main}


def _binary(w: Path, name: str) -> Path:
    path = w / name
    path.write_bytes(bytes(range(256)) * 4)
    return path


@pytest.mark.parametrize("entry,argv,needle", PROBES, ids=[f"{p[0]}-{i}" for i, p in enumerate(PROBES)])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(world, capsys, entry, argv, needle):
    args = argv(world)
    before = snapshot(world)
    rc, out, err = call(MAINS[entry], args, capsys)
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert needle in lines[0], lines[0]
    assert snapshot(world) == before, "a rejected run changed the folder"
    print(f"{entry}: {lines[0]}")  # shown by pytest -rP: the messages quoted in docs/reliability.md


def test_every_entry_point_is_probed():
    from launch.cli import commands

    assert set(commands()) | {"__main__"} == {p[0] for p in PROBES}


def test_a_locked_results_folder_names_its_holder(world, capsys):
    with FolderLock(world / "results"):
        before = snapshot(world)
        for main, argv in ((eval_cli.main, ["--env", "classic_control", "--episodes", "2", "--out",
                                            f"{world}/results", "--resume"]),
                           (train.main, ["--env", "games:rps", "--out", f"{world}/results"]),
                           (leaderboard.main, [f"{world}/results"])):
            rc, _, err = call(main, argv, capsys)
            assert rc == 2 and f"in use by another run (pid {os.getpid()})" in err, err
            assert len(err.strip().splitlines()) == 1
        assert snapshot(world) == before


def test_nested_parentheses_in_eval_are_expanded_fully(tmp_path):
    from launch.launch_file import load_launch_file

    f = tmp_path / "n.launch.xml"
    f.write_text('<launch><arg name="n" default="4"/>'
                 '<node pkg="embodia" exec="eval" args="--episodes $(eval \'((1 + 2) * ($(var n) - 1)) // 1\')"/>'
                 '</launch>')
    (node,) = load_launch_file(f)
    assert node.argv == ["--episodes", "9"]


def test_bugs_keep_their_traceback(capsys):
    from sim_benchmarks.cli import main_guard

    @main_guard
    def broken(argv: list[str]) -> int:
        return {}["missing"]

    with pytest.raises(KeyError):
        broken([])

    @main_guard
    def unreadable(argv: list[str]) -> int:
        open("/nonexistent-embodia/x")  # noqa: SIM115  (a path error: the user's, one line)
        return 0

    assert unreadable([]) == 2
    assert capsys.readouterr().err.strip() == "error: No such file or directory: '/nonexistent-embodia/x'"


def _png_header(width: int, height: int) -> bytes:
    # A PNG whose IHDR declares width x height (8-bit greyscale) followed by a tiny IDAT: decoding would need the
    # whole image, reading the header does not.
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(64))) + chunk(b"IEND", b""))


def test_user_texture_is_capped_before_decoding(tmp_path):
    from PIL import Image

    from envs.errors import ConfigError
    from envs.manipulation.objects import MAX_TEXTURE_PIXELS, MAX_TEXTURE_SIDE, TEXTURE_SIZE, load_user_texture

    paths = []
    for name, (width, height) in {"big": (15000, 15000), "wide": (MAX_TEXTURE_SIDE + 1, 8),
                                  "over": (4097, 4096)}.items():
        paths.append(tmp_path / f"{name}.png")
        paths[-1].write_bytes(_png_header(width, height))  # only the header: the cap must not need the pixels
    for path in paths:
        with pytest.raises(ConfigError, match=f"cap of {MAX_TEXTURE_PIXELS} pixels"):
            load_user_texture(path)
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    with pytest.raises(ConfigError, match="cannot read personal_texture"):
        load_user_texture(junk)
    ok = tmp_path / "ok.png"
    Image.new("RGB", (300, 200), (10, 200, 30)).save(ok)
    tex = load_user_texture(ok)
    assert tex.shape == (*TEXTURE_SIZE, 3) and tuple(tex[0, 0]) == (10, 200, 30)


@pytest.mark.parametrize("argv,needle", [
    (["launch.train_vla", "--out", "/dev/null"], "is a file"),
    (["launch.train_attributes", "--out", "/dev/null"], "is a file"),
    (["launch.train_localiser", "--out", "/dev/null"], "is a file"),
    (["launch"], "usage: embodia"),
])
def test_no_banner_before_the_one_line(argv, needle):
    """As a new process (pybullet prints its build banner from C on import): nothing on stdout, one stderr line."""
    proc = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr, proc.stderr
