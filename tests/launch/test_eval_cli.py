import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args, cwd):
    env = {**os.environ, "CI": "true"}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("args,needle", [
    (["--env", "nope"], "'nope'"),
    (["--env", "classic_control", "--episodes", "-3"], "-3"),
    (["--env", "classic_control", "--policy", "nope"], "'nope'"),
    (["--env", "classic_control/nope"], "'nope'"),
    (["--env", "classic_control", "--executor", "threads"], "'threads'"),
    (["--env", "classic_control", "--episodes", "abc"], "'abc'"),
    # found only when a worker builds the policy, after the results folder was opened: it is removed again
    (["--env", "generic_simpler/fractal_pick", "--policy", "scripted_expert", "--episodes", "1",
      "--policy-option", "expert_descent=zigzag"], "'zigzag'"),
    # a misspelt option key would otherwise run the default silently
    (["--env", "personalized_simpler", "--policy", "vap", "--policy-option", "vap_candiates=10"], "'vap_candiates'"),
    (["--env", "classic_control", "--policy-option", "window=5"], "'window'"),
])
def test_bad_input_exits_2_with_one_line_and_no_results(tmp_path, args, needle):
    out = tmp_path / "res"
    proc = _run("launch.eval", *args, "--out", str(out), cwd=ROOT)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr
    assert "valid" in lines[0] or "positive" in lines[0] or "must be" in lines[0]  # names what is valid
    assert not out.exists()


def test_list_names_every_suite_task_and_policy():
    from sim_benchmarks import registry

    proc = _run("launch.eval", "--list", cwd=ROOT)
    assert proc.returncode == 0
    for name, suite in registry.suites().items():
        assert name in proc.stdout
        for task in suite.tasks:
            assert f"{name}/{task}" in proc.stdout
    for name in registry.policies():
        assert f"  {name}:" in proc.stdout


def test_killed_run_resumes_to_the_same_summary(tmp_path):
    common = ["--env", "classic_control", "--policy", "balancer,random", "--episodes", "12", "--seed", "5",
              "--env-option", "max_steps=3000"]
    full = tmp_path / "full"
    assert _run("launch.eval", *common, "--out", str(full), cwd=ROOT).returncode == 0

    part = tmp_path / "part"
    proc = subprocess.Popen([sys.executable, "-m", "launch.eval", *common, "--out", str(part)], cwd=ROOT,
                            env={**os.environ, "CI": "true"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    episodes = part / "episodes.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if episodes.exists() and len(episodes.read_text().splitlines()) >= 4:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = len(episodes.read_text().splitlines())
    assert 4 <= killed_at < 24, "the run should have been killed half-way"
    assert not (part / "summary.json").exists()

    resumed = _run("launch.eval", *common, "--out", str(part), "--resume", cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr
    records = [json.loads(line) for line in episodes.read_text().splitlines()]
    keys = [(r["task"], r["policy"], r["episode"]) for r in records]
    assert len(keys) == len(set(keys)) == 24
    a, b = (json.loads((d / "summary.json").read_text()) for d in (full, part))
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_resume_with_other_settings_is_refused(tmp_path):
    out = tmp_path / "r"
    assert _run("launch.eval", "--env", "classic_control", "--episodes", "2", "--out", str(out), cwd=ROOT
                ).returncode == 0
    proc = _run("launch.eval", "--env", "classic_control", "--episodes", "3", "--out", str(out), "--resume", cwd=ROOT)
    assert proc.returncode == 2 and "episodes" in proc.stderr
    again = _run("launch.eval", "--env", "classic_control", "--episodes", "2", "--out", str(out), cwd=ROOT)
    assert again.returncode == 2 and "--resume" in again.stderr


def test_outputs_follow_the_results_contract(tmp_path):
    out = tmp_path / "c"
    proc = _run("launch.eval", "--env", "classic_control", "--episodes", "3", "--out", str(out), "--video", "1",
                cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "embodia.summary/1" and summary["benchmark"] == "classic_control"
    for entry in summary["policies"].values():
        assert {"episodes", "success_rate", "success_ci95", "correct_object_rate", "wrong_object_rate",
                "per_task"} <= set(entry)
        assert set(entry["per_task"]["cartpole"]) >= {"episodes", "success_rate", "correct_object_rate"}
    record = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    assert {"benchmark", "task", "policy", "seed", "episode", "success", "correct_object", "wrong_object", "steps",
            "wall_s"} <= set(record)
    assert (out / "leaderboard.md").read_text().startswith("| policy")
    html = (out / "leaderboard.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html
    assert (out / "leaderboard.png").stat().st_size > 1000
    assert len(list((out / "videos").glob("*.mp4"))) == 2  # first episode of each policy


def test_leaderboard_merges_folders(tmp_path):
    for name, seed in (("a", "1"), ("b", "2")):
        assert _run("launch.eval", "--env", "classic_control", "--episodes", "2", "--seed", seed, "--out",
                    str(tmp_path / name), cwd=ROOT).returncode == 0
    proc = _run("launch.leaderboard", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m"),
                cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    board = (tmp_path / "m" / "leaderboard.md").read_text()
    assert board.count("| balancer") == 2 and "seed(s) 1, 2" in board
    bad = _run("launch.leaderboard", str(tmp_path / "missing"), cwd=ROOT)
    assert bad.returncode == 2 and "summary.json" in bad.stderr


def test_console_script_dispatches_to_launch_modules():
    proc = _run("launch", "eval", "--list", cwd=ROOT)
    assert proc.returncode == 0 and "classic_control" in proc.stdout
    bad = _run("launch", "nope", cwd=ROOT)
    assert bad.returncode == 2 and "valid:" in bad.stderr
