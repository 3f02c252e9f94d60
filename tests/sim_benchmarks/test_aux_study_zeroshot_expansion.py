"""Smoke run of the zeroshot_expansion study (--quick): the results contract and its checks are filled in."""

import json

import pytest

from sim_benchmarks.studies.aux import methods
from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.results import VERDICTS


@pytest.mark.slow
def test_zeroshot_expansion_quick_run_writes_results(tmp_path):
    assert "zeroshot_expansion" in methods()
    assert main(["zeroshot_expansion", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema"] == "embodia.aux/2" and data["method"] == "zeroshot_expansion"
    assert data["seeds"] == [0] and len(data["per_seed"]) == 1
    assert data["verdict"] in VERDICTS and data["summary"]
    assert data["value"] == data["value"]  # not NaN


def test_unseen_split_takes_one_design_per_cell_and_keeps_its_siblings_seen():
    import numpy as np

    from sim_benchmarks.studies.aux.object_designs import design_classes
    from sim_benchmarks.studies.aux.zeroshot_expansion import unseen_split

    classes = design_classes()
    for seed in range(3):
        unseen = unseen_split(classes, np.random.default_rng(seed))
        cells = [classes[u][:2] for u in unseen]
        assert len(unseen) == 16 and len(set(cells)) == 16  # one unseen design in every (category, colour) cell
        seen = [c for i, c in enumerate(classes) if i not in set(unseen.tolist())]
        for u in unseen:
            category, colour, pattern = classes[u]
            # Its two pattern siblings are seen (the similar classes), and its pattern occurs with its category
            # and with its colour among the seen designs.
            assert sum(s[:2] == (category, colour) for s in seen) == 2
            assert any(s[0] == category and s[2] == pattern for s in seen)
            assert any(s[1] == colour and s[2] == pattern for s in seen)


def _row(seed, shared, granular, probe, sim_shared, sim_granular):
    row = {"seed": seed, "oracle/H": probe}
    for name, h, sim in (("shared", shared, sim_shared), ("granular", granular, sim_granular),
                         ("granular_unit", shared, sim_shared)):
        row.update({f"{name}/H": h, f"{name}/S": h, f"{name}/U": h, f"{name}/H_gamma0": h,
                    f"{name}/unseen_confusion_similar": sim, f"{name}/unseen_confusion_distinct": 0.0})
    row.update({"oracle/S": probe, "oracle/U": probe, "oracle/H_gamma0": probe})
    return row


def test_summarise_judges_against_the_noise_margin_and_guards_the_ceiling():
    from sim_benchmarks.studies.aux.zeroshot_expansion import summarise

    # Room to improve (probe 97, shared ~80) and a clear gain: yes on both parts.
    rows = [_row(s, 80 + s % 2, 90 + s % 2, 97, 20 + s % 2, 5 + s % 2) for s in range(5)]
    result = summarise(rows)
    assert result.verdict == "yes" and result.value == 10.0 and result.headroom.gap > result.margin
    # Same gain but the shared map already sits at the probe's score: a ceiling, not a verdict.
    rows = [_row(s, 96 + s % 2, 99 + s % 2 / 2, 96.5, 20 + s % 2, 5 + s % 2) for s in range(5)]
    result = summarise(rows)
    assert result.parts["GZSL harmonic mean above the shared map"] == "inconclusive"
    # A loss beyond the margin is a no.
    rows = [_row(s, 80 + s % 2, 70 + s % 2, 97, 20 + s % 2, 30 + s % 2) for s in range(5)]
    assert summarise(rows).verdict == "no"
