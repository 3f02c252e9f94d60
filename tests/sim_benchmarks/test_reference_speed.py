"""The side-by-side reference timing study: its bad-input path, ratio summary, page section and step clock."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from sim_benchmarks.studies.streaming import reference_speed as rs


def _checkout(root: Path, scripts: tuple[str, ...]) -> Path:
    for rel in scripts:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# placeholder\n")
    return root


def _page(tmp_path: Path) -> Path:
    page = tmp_path / "streaming.md"
    page.write_text("# Results\n\nintro\n\n## Details\n\nmore\n")
    return page


def test_missing_checkout_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys):
    page, out = _page(tmp_path), tmp_path / "out"
    before = page.read_text()
    drl = _checkout(tmp_path / "drl", rs.CHECKOUTS["streaming_drl"][1])
    missing = tmp_path / "no_such_checkout"
    rc = rs.main(["--streaming-drl", str(drl), "--stream-rep-rl", str(missing), "--out", str(out),
                  "--page", str(page)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and "--stream-rep-rl" in err[0] and str(missing) in err[0]
    assert not out.exists() and page.read_text() == before


def test_launch_study_reports_a_missing_checkout_in_one_line(tmp_path):
    missing = tmp_path / "gone"
    proc = subprocess.run([sys.executable, "-m", "launch.study", "streaming.reference_speed", "--streaming-drl",
                           str(missing), "--stream-rep-rl", str(missing), "--out", str(tmp_path / "o"), "--page", ""],
                          capture_output=True, text=True, timeout=120, cwd=Path(rs.__file__).parents[3])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--streaming-drl" in lines[0] and str(missing) in lines[0]
    assert not (tmp_path / "o").exists()


def test_checkout_without_one_script_names_that_script(tmp_path, capsys):
    drl = _checkout(tmp_path / "drl", ("stream_q_minatar.py",))  # stream_q_atari.py missing
    rep = _checkout(tmp_path / "rep", rs.CHECKOUTS["stream_rep_rl"][1])
    rc = rs.main(["--streaming-drl", str(drl), "--stream-rep-rl", str(rep), "--out", str(tmp_path / "out"),
                  "--page", ""])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "stream_q_atari.py" in err[0]
    assert not (tmp_path / "out").exists()


def test_absent_flag_and_bad_interpreter_exit_2(tmp_path, capsys):
    drl = _checkout(tmp_path / "drl", rs.CHECKOUTS["streaming_drl"][1])
    rep = _checkout(tmp_path / "rep", rs.CHECKOUTS["stream_rep_rl"][1])
    assert rs.main(["--streaming-drl", str(drl), "--page", ""]) == 2
    assert "--stream-rep-rl is required" in capsys.readouterr().err
    bad_py = tmp_path / "nope" / "python"
    assert rs.main(["--streaming-drl", str(drl), "--stream-rep-rl", str(rep), "--jax-python", str(bad_py),
                    "--page", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad_py) in err[0]
    assert rs.main(["--streaming-drl", str(drl), "--stream-rep-rl", str(rep), "--suites", "octax",
                    "--page", ""]) == 2
    assert "octax" in capsys.readouterr().err
    assert rs.main(["--streaming-drl", str(drl), "--stream-rep-rl", str(rep), "--suites", "minatar",
                    "--only", "spr_minatar_numba,q_atari_numba_nature", "--page", "", "--out",
                    str(tmp_path / "out")]) == 2  # an Atari entry while only MinAtar is timed
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "q_atari_numba_nature" in err[0] and "spr_minatar_numba" in err[0]
    assert not (tmp_path / "out").exists()


def test_summarize_takes_ratios_within_rounds():
    rates = {"fast": [200.0, 300.0, 100.0], "ref": [100.0, 100.0, 50.0], "alone": [5.0, 6.0, 7.0]}
    s = rs.summarize(rates, (("fast", "ref"), ("fast", "absent")))
    assert s["entries"]["fast"] == {"median": 200.0, "min": 100.0, "max": 300.0, "rounds": [200.0, 300.0, 100.0]}
    (ratio,) = s["ratios"]  # the pair with an untimed side is left out
    assert ratio["rounds"] == [2.0, 3.0, 2.0]
    assert (ratio["median"], ratio["min"], ratio["max"]) == (2.0, 2.0, 3.0)
    logs = [math.log(2.0), math.log(3.0), math.log(2.0)]
    m = sum(logs) / 3
    assert math.isclose(ratio["geomean"], math.exp(m))  # (2 · 3 · 2)^(1/3)
    # t interval on the logs with 2 degrees of freedom: mean ± 4.303 · sd / √3, then back through exp
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / 2)
    half = 4.302653 * sd / math.sqrt(3)
    assert math.isclose(ratio["ci95"][0], math.exp(m - half), rel_tol=1e-5)
    assert math.isclose(ratio["ci95"][1], math.exp(m + half), rel_tol=1e-5)
    assert ratio["ci95"][0] > 0
    # the ratio of medians (200 / 100) need not equal the median of per-round ratios; the latter is reported
    assert rs.summarize({"a": [1.0, 4.0, 9.0], "b": [1.0, 1.0, 9.0]}, (("a", "b"),))["ratios"][0]["median"] == 1.0


def _result() -> dict:
    rates = {e.key: [100.0 + i, 110.0 + i, 90.0 + i] for i, e in enumerate(rs.ENTRIES)}
    return {"summary": rs.summarize(rates), "finished_utc": "2026-12-05 07:30 UTC", "machine": "x86_64 Linux",
            "cpus": 2, "loadavg_start": (5.0, 5.0, 5.0), "loadavg_end": (6.0, 6.0, 6.0),
            "args": {"rounds": 3, "seed": 0, "minatar_steps": 5000, "minatar_warmup": 1000, "atari_steps": 1000,
                     "atari_warmup": 200}, "command": "python -m launch.study streaming.reference_speed ...",
            "references": {k: {"commit": f"{k}-commit", "versions": {"python": "3.11.7", "torch": "2.13.0"}}
                           for k in rs.CHECKOUTS},
            "embodia_versions": {"python": "3.11.7", "numba": "0.68.0"}}


def test_section_names_commits_versions_load_and_every_ratio():
    text = rs.render_section(_result())
    assert text.startswith(rs.SECTION + "\n")
    assert "streaming_drl-commit" in text and "stream_rep_rl-commit" in text and "numba 0.68.0" in text
    assert "machine was loaded" in text and "load average 5.0" in text
    ratio_rows = [ln for ln in text.splitlines() if "÷" in ln]
    assert len(ratio_rows) == len(rs.PAIRS)
    assert all(ln.count("|") == 6 for ln in ratio_rows)
    assert "What the SPR ratio compares" in text and "line 980" in text  # parameters and update rate beside it
    result = _result()
    result["runs"] = {"spr_minatar_numba": [{"parameters": 284_963}], "ref_spr_minatar_jax": [{"parameters": 41_971}]}
    text = rs.render_section(result)
    assert "Embodia trains 284,963 parameters (Q network + SPR heads), the reference prints 41,971" in text


def test_write_section_inserts_before_details_then_replaces_in_place(tmp_path):
    page = _page(tmp_path)
    rs.write_section(page, rs.SECTION + "\n\nfirst\n")
    text = page.read_text()
    assert text.index(rs.SECTION) < text.index("## Details") and "first" in text
    rs.write_section(page, rs.SECTION + "\n\nsecond\n")
    text = page.read_text()
    assert text.count(rs.SECTION) == 1 and "second" in text and "first" not in text
    assert text.endswith("## Details\n\nmore\n") and text.startswith("# Results\n\nintro\n")


def _runner():
    spec = importlib.util.spec_from_file_location("reference_runner_under_test", rs.RUNNER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_step_clock_times_exactly_the_steps_after_warmup(monkeypatch):
    runner = _runner()
    now = iter(float(t) for t in range(100))
    monkeypatch.setattr(runner.time, "perf_counter", lambda: next(now))
    clock = runner.StepClock(warmup=3, steps=4)
    started = []
    clock.on_start = lambda: started.append(clock.calls)
    for _ in range(3 + 4):
        clock.tick()
    with pytest.raises(RuntimeError, match="fewer than 8"):
        clock.rate()  # the window closes at the start of call warmup + steps + 1
    clock.tick()
    assert started == [4] and clock.rate() == 4 / (1.0 - 0.0)
    assert set(runner.SCRIPTS) >= {"stream_q_minatar", "stream_q_atari", "streamq", "streamq_spr_ortho"}


def test_phase_clock_counts_nested_phases_once(monkeypatch):
    now = iter([0.0, 1.0, 3.0, 6.0, 10.0])
    monkeypatch.setattr(rs, "cpu_clock", lambda: next(now))
    clock = rs.PhaseClock()
    inner = clock.wrap("forward", lambda: None)

    def outer_body():
        inner()  # enters at 1.0, leaves at 3.0

    clock.wrap("env", outer_body)()  # enters at 0.0, leaves at 6.0
    assert clock.totals["env"] == 4.0 and clock.totals["forward"] == 2.0


@pytest.mark.slow
def test_breakdown_splits_a_real_step_into_the_phases():
    entry = next(e for e in rs.ENTRIES if e.key == "q_minatar_torch")
    out = rs.breakdown(entry, steps=30, warmup=5)
    assert set(out) == {*rs.PHASES, "total", "parameters"}
    assert out["parameters"] == 132_179  # the Stream-x MinAtar network on Breakout's 3 actions
    assert all(out[k] > 0 for k in ("env", "preprocessing", "forward", "backward", "traces + ObGD"))
    assert out["SPR heads"] == 0.0
    assert math.isclose(sum(out[k] for k in rs.PHASES), out["total"], rel_tol=1e-9)


@pytest.mark.slow
def test_breakdown_of_the_fused_numba_step_counts_it_as_one_phase():
    entry = next(e for e in rs.ENTRIES if e.key == "q_minatar_numba")
    out = rs.breakdown(entry, steps=30, warmup=5)
    assert out["fused Q step"] > 0 and out["env"] > 0
    assert out["backward"] == out["traces + ObGD"] == out["SPR heads"] == 0.0  # all inside the one call
    assert math.isclose(sum(out[k] for k in rs.PHASES), out["total"], rel_tol=1e-9)


def test_embodia_worker_process_runs_one_thread_in_every_pool(monkeypatch):
    # the study's own worker process, started as the study starts it, from a parent environment that asks for
    # nothing: the runner's variables alone must size every pool at import, before any cap
    for var in [*rs.ONE_THREAD, "OMP_NUM_THREADS"]:
        monkeypatch.delenv(var, raising=False)
    entry = next(e for e in rs.ENTRIES if e.key == "spr_minatar_numba")
    row = rs.run_embodia_process(entry, steps=20, warmup=10)
    for pools in (row["thread_pools_at_import"], row["thread_pools"]):
        by_api = {p["api"]: p["threads"] for p in pools}
        assert {"blas", "torch", "numba"} <= set(by_api), pools
        assert all(p["threads"] == (0 if p["api"] == "numba" else 1) for p in pools), pools  # numba: serial
    assert row["threads_alive"] >= 1 and row["threads_ran"] >= 1
    rs.check_process(entry.key, row)  # the study's own check passes on it
    assert rs.run_embodia_process(entry, steps=20, warmup=10, breakdown_only=True)["breakdown"]["SPR heads"] > 0


def test_reference_runner_reports_its_pools_after_a_start_with_the_study_environment():
    code = ("import json, sys, numpy, torch\nsys.path.insert(0, sys.argv[1])\nimport _reference_runner as r\n"
            "print(json.dumps({'pools': r.library_thread_pools(), 'threads': r.thread_cpu_seconds()}))")
    env = {k: v for k, v in rs.child_env().items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code, str(rs.RUNNER.parent)], capture_output=True, text=True,
                         check=True, env=env)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    by_api = {p["api"]: p["threads"] for p in got["pools"]}
    assert by_api.get("blas") == 1 and by_api.get("torch") == 1, got["pools"]
    assert all(p["threads"] == 1 for p in got["pools"]), got["pools"]
    assert len(got["threads"]) >= 1 and all(t >= 0 for t in got["threads"].values())


def test_check_process_fails_a_wide_pool_or_more_than_one_core_busy():
    one = {"api": "blas", "library": "openblas", "file": "libopenblas.so", "threads": 1}
    xla = {"api": "jax", "library": "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false", "file": "", "threads": None}
    rs.check_process("ok", {"thread_pools": [one, xla], "cpu_per_wall": 0.99, "threads_ran": 2})
    with pytest.raises(RuntimeError, match="ref: asked for 1 thread.*openblas libopenblas.so 2 threads"):
        rs.check_process("ref", {"thread_pools": [{**one, "threads": 2}], "cpu_per_wall": 0.9})
    with pytest.raises(RuntimeError, match="jax_ref: .*1.35 cores busy .*3 of its threads"):
        rs.check_process("jax_ref", {"thread_pools": [xla], "cpu_per_wall": 1.35, "threads_ran": 3})
    runner = _runner()
    assert runner.threads_ran({1: 0.0, 2: 5.0}, {1: 2.0, 2: 5.01, 3: 0.5}, wall=4.0) == 2  # 2.0 s and 0.5 s ≥ 0.2 s


def test_render_rewrites_the_section_from_a_saved_run_and_refuses_a_bad_file(tmp_path, capsys):
    result = _result()
    runs = {e.key: [{"steps_per_second": 100.0 * (i + 1) * (r + 1), "cpu_per_wall": 0.5} for r in range(2)]
            for i, e in enumerate(rs.ENTRIES)}
    result.update(runs=runs, cpu_per_wall={k: 0.5 for k in runs}, loadavg_runs=[3.0, 9.0, 4.0])
    saved, page = tmp_path / "reference_speed.json", _page(tmp_path)
    saved.write_text(json.dumps(result))
    assert rs.main(["--render", str(saved), "--page", str(page)]) == 0
    text = page.read_text()
    assert rs.SECTION in text and "ratio of CPU-steps/s" in text
    cpu_rows = text.split("ratio of CPU-steps/s")[1].splitlines()
    # every process at 0.5 cores busy: CPU-steps/s are twice the wall rates, so the CPU ratios equal the wall ones
    q, jax = (rs.ENTRIES.index(next(e for e in rs.ENTRIES if e.key == k)) + 1 for k in ("q_minatar_numba",
                                                                                          "ref_q_minatar_jax"))
    assert any(f"**{q / jax:.2f}×**" in ln for ln in cpu_rows)
    # each reference's CPU-steps/s per round, and the load average as the runs ended
    per_round = text.split("CPU-steps/s of every implementation in each round")[1].split("\n\n")[1].splitlines()
    assert "| stream-rep-rl `streamq.py` (JAX) | " + f"{200 * jax:,.0f} | {400 * jax:,.0f} |" in per_round
    assert len(per_round) == 2 + len(rs.ENTRIES)
    assert "3.0–9.0 (median 4.0) as the 3 timed runs ended" in text
    capsys.readouterr()
    (tmp_path / "bad.json").write_text("{not json")
    assert rs.main(["--render", str(tmp_path / "bad.json"), "--page", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json" in err[0]
