"""The VAP benchmark CLI: bad input is a one-line error, a tiny grounding run writes JSON + markdown."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sim_benchmarks.studies.vap import vap_benchmark


def test_bad_input_is_exit_status_2(capsys, tmp_path):
    assert vap_benchmark.main(["grounding", "--episodes", "0"]) == 2
    assert "--episodes must be a positive integer" in capsys.readouterr().err
    assert vap_benchmark.main(["grounding", "--episodes", "1", "--tasks", "fractal_fly_my"]) == 2
    err = capsys.readouterr().err
    assert "fractal_fly_my" in err and "fractal_pick_my" in err
    assert vap_benchmark.main(["ablation", "--eval-episodes", "-1", "--out", str(tmp_path)]) == 2
    assert "--eval-episodes must be >= 0" in capsys.readouterr().err
    out = str(tmp_path / "g")
    assert vap_benchmark.main(["grounding", "--episodes", "1", "--env-option", "image_size=abc", "--out", out]) == 2
    assert "image_size must be an integer, got 'abc'" in capsys.readouterr().err
    assert vap_benchmark.main(["grounding", "--episodes", "1", "--tasks", "bridge_pick_my", "--policy-option",
                               "vap_candidates=0", "--out", out]) == 2
    assert "vap_candidates must be an integer >= 1" in capsys.readouterr().err
    assert vap_benchmark.main(["speed", "--policy-option", "vap_style=glow", "--out", out]) == 2
    assert "glow" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written


class _Clock:
    """A fake ``time.perf_counter``: time passes only when :meth:`spend` says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


def test_speed_counts_a_wrapped_base_reset_as_reset_time(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(vap_benchmark.time, "perf_counter", clock)

    class Base:
        def reset(self, instruction, info):
            clock.spend(10.0)  # instruction encoding

        def act(self, obs):
            clock.spend(1.0)
            return 0

    class Wrapper:  # like VAP: resets its base with a rewritten instruction on the first step
        def __init__(self):
            self.base, self.started = Base(), False

        def reset(self, instruction, info):
            clock.spend(2.0)
            self.started = False

        def act(self, obs):
            if not self.started:
                self.started = True
                clock.spend(5.0)  # grounding
                self.base.reset("rewritten", {})
            return self.base.act(obs)

    class Env:
        def reset(self, seed):
            self.t = 0
            return {"instruction": "pick up my mug"}, {}

        def step(self, action):
            self.t += 1
            return {"instruction": "pick up my mug"}, 0.0, self.t >= 3, False, {}

    log: list[float] = []
    acts: list[float] = []
    wrapper = Wrapper()
    vap_benchmark._timed(wrapper.base, "reset", log)
    vap_benchmark._timed(wrapper.base, "act", acts)
    reset_s, times = vap_benchmark._episode_times(Env(), wrapper, 0, 10, log)
    assert times == [6.0, 1.0, 1.0]  # grounding + the base's act; the base's reset is not charged to act
    assert reset_s == 12.0 and log == [10.0]
    assert acts == [1.0, 1.0, 1.0]  # the paired figure: the base's own work on the very same steps
    reset_s, times = vap_benchmark._episode_times(Env(), Base(), 0, 10)
    assert (reset_s, times) == (10.0, [1.0, 1.0, 1.0])  # the bare base pays the same encoding in reset
    acts.clear()
    own: list[float] = []
    parts: dict[str, list[float]] = {"ground": []}

    def act(obs, inner=wrapper.act):
        if not wrapper.started:
            wrapper.ground()
        return inner(obs)

    wrapper.ground = lambda: clock.spend(0.5)
    vap_benchmark._timed(wrapper, "ground", parts["ground"])  # a component of the wrapper, timed per step
    wrapper.act = act
    step_parts: list[dict[str, float]] = []
    vap_benchmark._episode_times(Env(), wrapper, 0, 10, log, acts, own, parts, step_parts)
    assert own == [5.5, 0.0, 0.0]  # the wrapper's own work: its act minus the base's act and reset inside it
    assert step_parts == [{"ground": 0.5}, {"ground": 0.0}, {"ground": 0.0}]


def test_vap_suite_module_imports_no_heavy_packages():
    code = ("import sys, sim_benchmarks.suites.vap_policies; "
            "print(sorted(m for m in ('torch', 'cv2', 'scipy', 'pybullet') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_grounding_command_writes_results(tmp_path):
    rc = vap_benchmark.main(["grounding", "--episodes", "2", "--seed", "900", "--tasks", "bridge_pick_my",
                             "--env-option", "image_size=160", "--policy-option", "vap_candidates=3",
                             "--out", str(tmp_path)])
    assert rc == 0
    result = json.loads((tmp_path / "grounding.json").read_text())
    task = result["per_task"]["bridge_pick_my"]
    assert task["episodes"] == 2 and 0 <= task["correct"] <= 2
    assert 0.0 <= task["ci95"][0] <= task["accuracy"] <= task["ci95"][1] <= 1.0
    assert [r["seed"] for r in task["rows"]] == [900, 901]
    assert all(2 <= r["candidates"] <= 3 for r in task["rows"])
    assert "| bridge_pick_my |" in (tmp_path / "grounding.md").read_text()


@pytest.mark.slow
def test_ablation_grounding_rows_only(tmp_path):
    rc = vap_benchmark.main(["ablation", "--episodes", "1", "--seed", "901", "--tasks", "bridge_pick_my",
                             "--eval-episodes", "0", "--variants", "refs=5, all cues (default);all cues, 3 candidates",
                             "--out", str(tmp_path)])
    assert rc == 0
    result = json.loads((tmp_path / "ablation.json").read_text())
    assert sorted(result["grounding"]) == ["all cues, 3 candidates", "refs=5, all cues (default)"]
    assert result["styles"] is None  # --eval-episodes 0: no closed-loop style rows
    assert all(r["overall"]["episodes"] == 1 for r in result["grounding"].values())
    assert "not run (`--eval-episodes 0`)" in (tmp_path / "ablation.md").read_text()
