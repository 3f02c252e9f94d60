"""The toolpro suite end to end over real MCP stdio servers: success, round trips, traffic, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launch.eval import main as eval_main

ROOT = Path(__file__).resolve().parents[3]


def test_eval_runs_all_policies_and_records_traffic(tmp_path):
    rc = eval_main(["--env", "toolpro/ship_paid_4", "--episodes", "1", "--out", str(tmp_path),
                    "--env-option", "rtt_ms=10", "--env-option", f"db_dir={tmp_path / 'db'}"])
    assert rc == 0
    recs = {r["policy"]: r for r in map(json.loads, (tmp_path / "episodes.jsonl").read_text().splitlines())}
    assert set(recs) == {"toolpro", "stepwise", "program_only"}
    assert all(r["success"] and r["state_diff"] == 0 for r in recs.values())
    assert recs["stepwise"]["round_trips"] == recs["stepwise"]["calls"] == 5
    assert recs["program_only"]["round_trips"] == 1 and recs["program_only"]["calls"] == 5
    assert recs["program_only"]["mode"] == "program" and recs["stepwise"]["mode"] == "stepwise"


def test_cli_bad_task_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "launch.eval", "--env", "toolpro/no_such_task"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "no_such_task" in out.stderr and "ship_paid_4" in out.stderr


def test_cli_bad_env_option_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "launch.eval", "--env", "toolpro/ship_paid_4", "--env-option",
                          "rtt_ms=-5"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "rtt_ms" in out.stderr


def test_eval_with_a_constructed_program_records_the_constructor(tmp_path):
    rc = eval_main(["--env", "toolpro/comment_ticket_7", "--policy", "program_only", "--episodes", "1", "--out",
                    str(tmp_path), "--policy-option", "constructor=random", "--env-option", "rtt_ms=0",
                    "--env-option", f"db_dir={tmp_path / 'db'}"])
    assert rc == 0
    rec = json.loads((tmp_path / "episodes.jsonl").read_text().splitlines()[0])
    assert rec["constructor"] == "random" and rec["construct_s"] > 0 and rec["mode"] in ("program", "stepwise")
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["policy_options"] == {"constructor": "random"}


def test_cli_bad_constructor_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "launch.eval", "--env", "toolpro/ship_paid_4", "--policy-option",
                          "constructor=gpt4"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "gpt4" in out.stderr and "smollm2" in out.stderr
