"""Probing a streaming run at a saved checkpoint gives what the trainer reports for a run that ended there."""

import json
import shutil

from sim_benchmarks.studies.streaming import checkpoint_probe as cp
from sim_benchmarks.training.streaming import train


def test_probe_of_a_checkpoint_equals_the_summary_of_a_run_that_stopped_there(tmp_path):
    # ε held at its final value, so the schedule does not depend on the run's length: a run of exactly the
    # checkpoint's step count is the same run, stopped there
    opts = {"exploration_fraction": 0.0, "checkpoint_every": 100}
    train("minatar:breakout", "stream_q", 400, 0, tmp_path / "long", options=opts)
    row = cp.probe(tmp_path / "long")
    step = row["step"]
    assert 100 <= step < 400 + 1000 and row["checkpoint"] == "checkpoint.pt"
    short = train("minatar:breakout", "stream_q", step, 0, tmp_path / "short", options=opts)
    assert row["representation"] == short["representation"]
    assert row["return_last100"] == short["return_last100"] and row["episodes"] == short["episodes"]
    shutil.copy(tmp_path / "long" / "checkpoint.pt", tmp_path / "long" / f"checkpoint_{step}.pt")
    assert cp.probe(tmp_path / "long", at_step=step - 1)["checkpoint"] == f"checkpoint_{step}.pt"
    # at the run's last step (mid-episode, never a checkpoint) the probe reports the trainer's own measurement
    end = cp.probe(tmp_path / "long", at_step=400)
    summary = json.loads((tmp_path / "long" / "summary.json").read_text())
    assert end["checkpoint"] == "summary.json" and end["step"] == 400
    assert end["representation"] == summary["representation"] and end["return_last100"] == summary["return_last100"]
    assert end["episodes"] == summary["episodes"] and end["return_last100_episode_ci95"] is not None


def test_missing_checkpoints_exit_2_with_one_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    assert cp.main(["--run", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no checkpoint.pt" in err[0]
    (tmp_path / "run" / "checkpoint_50.pt").write_bytes(b"")
    assert cp.main(["--run", str(tmp_path / "run"), "--at-step", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "copies at: 50" in err[0]
    assert cp.main(["--run", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
