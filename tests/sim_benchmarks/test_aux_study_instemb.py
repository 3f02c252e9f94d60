"""The InstEmb study's synthetic data (held-out attribute pairs, prompts, answers) and a smoke run."""

import json

import pytest

from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.instemb import (
    BOS,
    EOS,
    INSTRUCTIONS,
    JUDGED,
    A,
    Tasks,
    all_answers,
    all_objects,
    answer_text,
    split_objects,
)


def test_split_holds_out_one_colour_category_pair_per_colour_and_category():
    train, test = split_objects(7)
    assert len(train) + len(test) == len(all_objects()) and not set(train) & set(test)
    held = {(o[1], o[0]) for o in test}
    assert len(held) == 4
    assert len({c for c, _ in held}) == 4 and len({k for _, k in held}) == 4  # a permutation
    assert not held & {(o[1], o[0]) for o in train}
    assert split_objects(7) == (train, test) and split_objects(8) != (train, test)


def test_judged_answers_span_several_tokens_and_never_occur_in_training():
    # The judged instructions are the ones with room: their answers for test objects are documents no training
    # object produces, while every other instruction's test answers also occur in training (the ceiling).
    train, test = split_objects(3)
    seen = {answer_text(o, i) for o in train for i in INSTRUCTIONS}
    assert set(JUDGED) == {"pair", "describe"}
    for ins in INSTRUCTIONS:
        answers = {answer_text(o, ins) for o in test}
        if ins in JUDGED:
            assert not answers & seen and all(len(a.split()) >= 2 for a in answers)
        else:
            assert answers <= seen


def test_prompts_documents_and_answers():
    tasks = Tasks()
    obj = ("mug", "red", "striped", "small", "shelf")
    assert answer_text(obj, "colour") == "red"
    assert answer_text(obj, "place") == "on the shelf"
    assert answer_text(obj, "describe") == "small red striped mug"
    p = tasks.prompt(obj, "colour", 0, 1)
    assert p[0] == BOS and p[-1] == A and tasks.vocab["red"] in p and tasks.vocab["colour"] in p
    assert tasks.document("red striped") == [BOS, tasks.vocab["red"], tasks.vocab["striped"], EOS]
    assert answer_text(obj, "pair") == "red mug"
    # Distinct answers: 4 colours + 4 categories + 3 patterns + 3 sizes + 4 places + 12 looks + 144 descriptions
    # + 16 (colour, category) pairs.
    assert len(all_answers()) == 190 == len(tasks.answer_index)
    assert {answer_text(obj, i) for i in INSTRUCTIONS} <= set(all_answers())


@pytest.mark.slow
def test_instemb_quick_run_writes_results(tmp_path, capsys):
    assert main(["instemb", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["method"] == "instemb" and data["synthetic"] is True
    row = data["per_seed"][0]
    for key in ("r1_mean", "r1_last", "r1_instemb", "r1_instemb_lookahead_anchor", "r1_regen", "lm_exact_answer"):
        assert 0.0 <= row[key] <= 100.0
    assert row["latency_ms_last"] > 0 and row["latency_ms_regen"] > 0
    assert row["test_queries"] == 60 and row["corpus"] == 190
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive") and data["headroom"]["best"] >= 0
    assert data["verdict"] == "inconclusive"  # one seed: no spread over seeds to judge against
    assert set(data["parts"]) == {"Recall@1 above last-token InfoNCE on multi-token answers for held-out pairs",
                                  "faster than generate-then-re-encode (no decoding)"}
    assert "instemb:" in capsys.readouterr().out
