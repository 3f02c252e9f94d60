"""The VimRAG budget study's report over several reader/planner seeds, and where a planner of each reader is cached."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from sim_benchmarks.studies.vimrag.budget import MODES, main, table


def _result(per_seed: dict[int, dict[str, list[int]]], budgets=(16,)) -> dict:
    """A results.json-shaped dict: ``per_seed[seed][policy]`` = that policy's 0/1 answers at every budget."""
    runs = {str(s): {f"{name}@{b}": {"correct": rows[name]} for name in MODES for b in budgets}
            for s, rows in per_seed.items()}
    return {"questions": 4, "split": "test", "budgets": list(budgets), "seeds": list(per_seed), "runs": runs}


def _cell(md: str, row_start: str) -> str:
    line = next(line for line in md.splitlines() if line.startswith(row_start))
    return line.split("|")[2].strip()


def test_several_seeds_report_each_seed_and_their_mean() -> None:
    base = {"linear_rag": [0, 0, 0, 0], "uniform_budget": [1, 0, 0, 0], "oracle_evidence": [1, 1, 1, 1]}
    result = _result({0: {"vimrag": [1, 1, 0, 0], **base}, 1: {"vimrag": [1, 1, 1, 1], **base}})
    md = table(result)
    # Accuracy: mean over seeds with the range; vimrag 50 % and 100 %.
    assert _cell(md, "| vimrag |") == "75.0 (50.0–100.0)"
    assert _cell(md, "| vimrag − uniform_budget, seed 0 (points)").startswith("+25.0 [")
    assert _cell(md, "| vimrag − uniform_budget, seed 1 (points)").startswith("+75.0 [")
    assert _cell(md, "| vimrag − uniform_budget, mean of 2 seeds (points)").startswith("+50.0 [")
    assert _cell(md, "| vimrag − linear_rag, mean of 2 seeds (points)").startswith("+75.0 [")


def test_one_seed_reports_wilson_intervals() -> None:
    rows = {"vimrag": [1, 1, 0, 0], "linear_rag": [0] * 4, "uniform_budget": [1, 0, 0, 0],
            "oracle_evidence": [1] * 4}
    md = table(_result({0: rows}))
    assert _cell(md, "| vimrag |").startswith("50.0 [")
    assert _cell(md, "| vimrag − uniform_budget (points)").startswith("+25.0 [")
    assert "seed 0" not in md


def test_a_planner_is_cached_per_reader_seed() -> None:
    from agents.vimrag.stack import planner_path

    default = planner_path(SimpleNamespace(folder=Path("/c"), reader_seed=0), "ggpo", 0)
    other = planner_path(SimpleNamespace(folder=Path("/c"), reader_seed=1), "ggpo", 0)
    assert default.name == "planner_v2_ggpo_seed0.pt" and other != default


@pytest.mark.parametrize("seeds", ["a", "1,,x", "-1"])
def test_bad_seeds_exit_2_with_one_line_and_write_nothing(seeds, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["--seeds", seeds, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seeds" in err[0]
    assert not out.exists()
