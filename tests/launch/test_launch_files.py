"""Every shipped launch file loads in the ROS 2 frontend's grammar and runs through ``launch.run``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launch.ros2_grammar import GrammarError, check_file, parse_template

FILES = Path(__file__).resolve().parents[2] / "launch" / "files"
# Small overrides per file, so each workflow runs end to end in seconds; the out folder is appended.
RUNS = {
    "demo_cartpole.launch.yaml": ["episodes:=2"],
    "main_eval.launch.xml": ["env:=personalized_simpler/bridge_pick_my", "policy:=scripted_expert", "episodes:=1",
                             "workers:=1"],
    "eval_generic_simpler.launch.xml": ["task:=/bridge_pick", "policy:=scripted_expert", "episodes:=1",
                                        "workers:=1"],
    "eval_games.launch.yaml": ["task:=/rps_biased", "rounds:=50", "episodes:=1"],
    "train_streaming.launch.xml": ["steps:=300"],
    "streaming_learning_table.launch.xml": ["games:=breakout", "agents:=stream_q", "seeds:=1", "steps:=300",
                                            "workers:=1"],
    "eval_and_train.launch.xml": ["task:=/rps_biased", "episodes:=1", "rounds:=30", "steps:=300", "--parallel"],
    "next_token_claims.launch.xml": ["quick:=true", "no_transformer:=true", "seeds:=1"],
    "train_vla.launch.xml": ["demos:=2", "epochs:=1", "eval_episodes:=0", "tasks:=bridge_pick", "workers:=1"],
    "eval_vimrag.launch.xml": ["task:=/placed_colour", "policy:=vimrag,linear_rag", "episodes:=1", "workers:=1",
                               "corpus_dir:={tiny_corpus}"],
    "eval_toolpro.launch.xml": ["task:=/cancel_open_2", "policy:=toolpro,stepwise", "rtt_ms:=0"],
    "eval_vlabench.launch.xml": ["task:=/select_my_pick", "policy:=scripted_expert", "image_size:=64", "episodes:=1",
                                 "workers:=1"],
    "train_embedder.launch.xml": ["episodes:=1", "augmentations:=0", "steps:=5"],
    "aux_study.launch.yaml": ["method:=theseus", "seeds:=0", "quick:=true"],
}
SLOW = {"next_token_claims.launch.xml", "train_vla.launch.xml", "eval_vlabench.launch.xml",
        "train_embedder.launch.xml", "eval_vimrag.launch.xml"}
# What each workflow writes (default: summary.json or claims.json).
WRITES = {"train_embedder.launch.xml": "manifest.json", "aux_study.launch.yaml": "results.json"}


def test_every_launch_file_is_valid_ros2_and_has_a_run():
    files = sorted(p.name for p in FILES.iterdir() if p.suffix in (".xml", ".yaml"))
    assert files == sorted(RUNS)
    problems = [p for name in files for p in check_file(FILES / name)]
    assert problems == []


@pytest.mark.parametrize("text, words", [
    ("$(eval '$(var episodes)' != '')", "takes 1..2 arguments, got 3"),  # must be one quoted argument
    ("$(var  x)", "an argument"),
    ("$(var x", "')' closing"),
    ("cost $5", "'$' that does not start"),
    ("$(find x)", "unknown substitution"),
])
def test_grammar_rejects_what_ros2_rejects(text, words):
    with pytest.raises(GrammarError, match=words.replace("(", r"\(").replace(")", r"\)").replace("$", r"\$")):
        parse_template(text)


def test_grammar_accepts_quoted_nested_substitutions():
    (sub,) = parse_template("$(eval \"'$(var episodes)' != ''\")")
    assert sub.name == "eval" and len(sub.args) == 1


@pytest.fixture
def tiny_corpus(request, tmp_path) -> str:
    """The shared tiny VimRAG corpus (tests/conftest.py) with its reader and an untrained planner, for the VimRAG
    launch file only (other files never build it)."""
    if "{tiny_corpus}" not in " ".join(RUNS[request.node.callspec.params["name"]]):
        return ""
    import torch

    from agents.vimrag.planner import LearnedPlanner, PolicyNet
    from agents.vimrag.stack import PLANNER_VERSION

    folder = request.getfixturevalue("tiny_stack")[3]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        LearnedPlanner(PolicyNet()).save(folder / f"planner_v{PLANNER_VERSION}_ggpo_seed0.pt")
    return str(folder)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in RUNS])
def test_launch_file_runs(tmp_path, name, tiny_corpus):
    out = tmp_path / "out"
    overrides = [o.format(tiny_corpus=tiny_corpus) for o in RUNS[name]]
    cmd = [sys.executable, "-m", "launch.run", str(FILES / name), *overrides, f"out:={out}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={"CI": "true", "PATH": "/usr/bin:/bin",
                                                                                  "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    wanted = [WRITES[name]] if name in WRITES else ["summary.json", "claims.json"]
    written = sorted(p.name for w in wanted for p in out.rglob(w))
    assert written, f"{name} wrote no {' or '.join(wanted)} under {out}"
    if name == "eval_and_train.launch.xml":  # both side-by-side nodes finished their own results
        assert (out / "games" / "summary.json").is_file() and (out / "train_stream_q" / "summary.json").is_file()
        assert json.loads((out / "train_stream_q" / "summary.json").read_text())["steps"] == 300
