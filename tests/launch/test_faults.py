"""Faults: SIGKILL at a random moment then ``--resume`` (launch.eval, launch.train), and two writers on one folder.

Every episode (eval) and every logged update (train) must end up recorded exactly once. ``EMBODIA_FAULT_TRIALS``
(default 1) repeats each trial with the next seed and ``EMBODIA_FAULT_SUITE`` picks the evaluation (games, toolpro
or vimrag); docs/reliability.md quotes runs with more trials.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRIALS = int(os.environ.get("EMBODIA_FAULT_TRIALS", "1"))
ENV = {**os.environ, "CI": "true", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}

# The eval the faults hit, chosen by EMBODIA_FAULT_SUITE: games (default; 18 tasks x 2 policies x 2 episodes of 200
# rounds = 72 short episodes), toolpro (36 workflow tasks x 1 episode of the stepwise agent over MCP, rtt 20 ms) or
# vimrag (5 question types x 2 policies x 10 questions, the shipped reader and planner).
EVALS = {
    "games": (["--env", "games", "--policy", "hedge,best_response", "--episodes", "2", "--env-option", "rounds=200",
               "--seed", "3"], 72),
    "toolpro": (["--env", "toolpro", "--policy", "stepwise", "--episodes", "1", "--workers", "1", "--seed", "3"], 36),
    "vimrag": (["--env", "vimrag", "--policy", "vimrag,linear_rag", "--episodes", "10", "--workers", "1", "--seed",
                "3"], 100),
}
EVAL, EVAL_EPISODES = EVALS[os.environ.get("EMBODIA_FAULT_SUITE", "games")]
# A tiny next-token transformer: 40 steps, one metrics record (and checkpoint) every 2 steps.
TRAIN = ["--env", "games:rps", "--steps", "40", "--seed", "1", "--option", "log_every=2", "--option",
         "eval_episodes=1", "--option", "sequences=50", "--option", "d_model=8", "--option", "n_layers=1",
         "--option", "batch=8", "--option", "context=4"]
TRAIN_STEPS = list(range(2, 41, 2))


def _start(module: str, args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _run(module: str, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=600)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _kill_at_random(proc: subprocess.Popen, log: Path, total: int, rng: random.Random) -> int:
    """SIGKILL ``proc`` once ``log`` holds a random number of lines (0..total-1) plus a random few ms."""
    target = rng.randrange(total)
    deadline = time.time() + 300
    while _lines(log) < target and proc.poll() is None and time.time() < deadline:
        time.sleep(0.003)
    time.sleep(rng.uniform(0, 0.05))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return _lines(log)


def _resume(module: str, args: list[str], out: Path, started: Path) -> subprocess.CompletedProcess:
    # Killed before its first write there is nothing to resume: the user starts again, as the error says.
    return _run(module, [*args, "--out", str(out), *(["--resume"] if started.exists() else [])])


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(TRIALS))
def test_eval_killed_at_a_random_moment_resumes_every_episode_once(tmp_path, trial):
    rng = random.Random(1000 + trial)
    out = tmp_path / "run"
    killed_at = _kill_at_random(_start("launch.eval", [*EVAL, "--out", str(out)]), out / "episodes.jsonl",
                                EVAL_EPISODES, rng)
    done = _resume("launch.eval", EVAL, out, out / "config.json")
    assert done.returncode == 0, done.stderr
    keys = [(r["task"], r["policy"], r["episode"]) for r in map(json.loads, (out / "episodes.jsonl").open())]
    assert len(keys) == len(set(keys)) == EVAL_EPISODES, f"killed at {killed_at}: lost or duplicated episodes"
    summary = json.loads((out / "summary.json").read_text())
    assert sum(p["episodes"] for p in summary["policies"].values()) == EVAL_EPISODES


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(TRIALS))
def test_train_killed_at_a_random_moment_resumes_every_update_once(tmp_path, trial):
    rng = random.Random(2000 + trial)
    out = tmp_path / "train"
    killed_at = _kill_at_random(_start("launch.train", [*TRAIN, "--out", str(out)]), out / "metrics.jsonl",
                                len(TRAIN_STEPS), rng)
    done = _resume("launch.train", TRAIN, out, out / "metrics.jsonl")
    assert done.returncode == 0, done.stderr
    steps = [r["step"] for r in map(json.loads, (out / "metrics.jsonl").open())]
    assert steps == TRAIN_STEPS, f"killed at {killed_at} records: updates lost or repeated"


def _hold_lock_holder(lock: Path, procs: tuple[subprocess.Popen, ...]) -> subprocess.Popen:
    """The process among ``procs`` that holds ``lock``, stopped with SIGSTOP as soon as it has written its pid.

    A stopped process keeps its lock, so whatever starts or checks next meets a held folder: the overlap of two
    writers is certain however slow or fast the machine is (the holder is continued with SIGCONT afterwards)."""
    pids = {p.pid: p for p in procs}
    deadline = time.time() + 300
    while time.time() < deadline:
        text = lock.read_text().strip() if lock.exists() else ""
        if text.isdigit() and int(text) in pids:
            holder = pids[int(text)]
            holder.send_signal(signal.SIGSTOP)
            return holder
        if all(p.poll() is not None for p in procs):
            raise AssertionError(f"both writers ended before one was seen holding the lock: {procs[0].returncode}, "
                                 f"{procs[1].returncode}")
        time.sleep(0.002)
    raise AssertionError("no writer took the lock within 300 s")


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(TRIALS))
def test_two_writers_on_one_folder_one_is_refused(tmp_path, trial):
    out = tmp_path / "shared"
    procs = tuple(_start("launch.eval", [*EVAL, "--out", str(out)]) for _ in range(2))
    winner = _hold_lock_holder(out / ".lock", procs)
    loser = procs[1 - procs.index(winner)]
    refused = loser.communicate(timeout=600)[1].strip().splitlines()  # refused while the winner is stopped
    winner.send_signal(signal.SIGCONT)
    err = winner.communicate(timeout=600)[1]
    assert (winner.returncode, loser.returncode) == (0, 2), err
    assert refused == [f"error: --out {str(out)!r} is in use by another run (pid {winner.pid}); wait for it to end "
                       f"or pass another --out"], refused
    keys = [(r["task"], r["policy"], r["episode"]) for r in map(json.loads, (out / "episodes.jsonl").open())]
    assert len(keys) == len(set(keys)) == EVAL_EPISODES

    # A resume started while the run is still writing is refused at once and names the writer.
    again = tmp_path / "again"
    writer = _start("launch.eval", [*EVAL, "--out", str(again)])
    while _lines(again / "episodes.jsonl") < 1 and writer.poll() is None:
        time.sleep(0.005)
    writer.send_signal(signal.SIGSTOP)  # held mid-run: the resume below certainly overlaps it
    late = _run("launch.eval", [*EVAL, "--out", str(again), "--resume"])
    writer.send_signal(signal.SIGCONT)
    writer.communicate(timeout=600)
    assert writer.returncode == 0
    assert late.returncode == 2 and late.stderr.strip() == (
        f"error: --out {str(again)!r} is in use by another run (pid {writer.pid}); wait for it to end or pass "
        f"another --out"), late.stderr
    keys = [(r["task"], r["policy"], r["episode"]) for r in map(json.loads, (again / "episodes.jsonl").open())]
    assert len(keys) == len(set(keys)) == EVAL_EPISODES
