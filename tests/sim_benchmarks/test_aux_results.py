"""The aux verdict vocabulary, the CLI's method names, and the README / pages agreeing with the results files."""

import re
from pathlib import Path

import pytest

from sim_benchmarks.studies.aux import methods
from sim_benchmarks.studies.aux.__main__ import canonical_name, main
from sim_benchmarks.studies.aux.readme_table import PAGES, load_results, page_verdict_line, readme_row
from sim_benchmarks.studies.aux.results import (
    VERDICTS,
    Headroom,
    StudyResult,
    ceiling_guard,
    combine,
    judge,
    noise_margin,
)

ROOT = Path(__file__).resolve().parents[2]


def result(**kw):
    base = dict(method="m", claim="c", metric="x", value=1.0, ci95=(0.5, 1.5), passed=None, summary="s",
                synthetic=True, data="d", seeds=[0, 1])
    return StudyResult(**{**base, **kw})


def test_verdict_vocabulary_has_partly_and_inconclusive():
    assert VERDICTS == ("yes", "partly", "no", "inconclusive")
    r = result(verdict="partly", parts={"a": "yes", "b": "no"}, margin=0.2, margin_why="2 SE",
               headroom=Headroom(best=10.0, baseline=7.0, what="oracle"))
    data = r.to_json()
    assert data["verdict"] == "partly" and data["parts"] == {"a": "yes", "b": "no"} and data["passed"] is False
    assert data["margin"] == 0.2 and data["margin_why"] == "2 SE"
    assert data["headroom"] == {"best": 10.0, "baseline": 7.0, "what": "oracle", "higher_is_better": True, "gap": 3.0}
    assert result(passed=True).verdict == "yes" and result(passed=None).verdict == "inconclusive"
    with pytest.raises(ValueError, match="verdict"):
        result(verdict="reproduced")
    with pytest.raises(ValueError, match="partly"):
        result(verdict="partly", parts={"a": "no"})


def test_judge_combine_and_the_ceiling_guard():
    assert judge(0.6, 2.0, 0.5) == "yes" and judge(-1.0, 0.4, 0.5) == "no" and judge(0.1, 0.9, 0.5) == "inconclusive"
    assert judge(-0.4, 1.0, 0.5, "non_inferiority") == "yes" and judge(-2.0, -0.6, 0.5, "non_inferiority") == "no"
    assert judge(-0.2, 0.3, 0.5, "equivalence") == "yes" and judge(0.6, 0.9, 0.5, "equivalence") == "no"
    assert judge(0.2, 0.7, 0.5, "equivalence") == "inconclusive"
    assert combine({"a": "yes", "b": "yes"}) == "yes" and combine({"a": "yes", "b": "no"}) == "partly"
    assert combine({"a": "no", "b": "inconclusive"}) == "inconclusive" and combine({"a": "no"}) == "no"
    assert noise_margin([1.0, 3.0]) == pytest.approx(2.0)  # 2 * std(ddof=1) / sqrt(2)
    # A baseline closer to the task's best score than the margin cannot be beaten by the margin: no verdict.
    at_ceiling = Headroom(best=99.16, baseline=98.90, what="no eviction")
    assert ceiling_guard("no", at_ceiling, margin=1.0) == "inconclusive"
    assert ceiling_guard("no", Headroom(best=0.0, baseline=2.0, what="oracle", higher_is_better=False), 1.0) == "no"


def test_method_names_with_or_without_underscores():
    registry = methods()
    assert canonical_name("manifoldkv", registry) == "manifold_kv"
    assert canonical_name("Pseudo-Mallows", registry) == "pseudo_mallows"
    assert canonical_name("nosuch", registry) is None


def test_unknown_method_exits_2_with_one_line(capsys):
    assert main(["nosuch", "--quick"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nosuch" in err[0] and "manifold_kv" in err[0]


def test_merge_needs_results_files_and_a_method_that_supports_it(tmp_path, capsys):
    assert main(["manifold_kv", "--merge", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no results.json" in capsys.readouterr().err
    assert main(["llr", "--merge", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "not supported" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_readme_rows_and_page_verdicts_agree_with_the_results_files():
    results = load_results(ROOT)
    assert results, "no committed results files under docs/results/aux"
    readme = (ROOT / "README.md").read_text()
    table = [line for line in readme.splitlines() if line.startswith("| ")]
    for method, data in results.items():
        assert data["verdict"] in VERDICTS and data["method"] == method
        assert readme_row(data) in table, f"README row for {method} differs from docs/results/aux/{method}.json"
        page = (ROOT / PAGES[method]).read_text()
        assert page_verdict_line(data) in page, f"{PAGES[method]} does not carry {method}'s verdict line"
        # Every verdict line on the page names a word of the vocabulary.
    for page in set(PAGES.values()):
        for word in re.findall(r"\*\*Verdict: (\w+)", (ROOT / page).read_text()):
            assert word in VERDICTS, f"{page} uses verdict {word!r}"
