"""The LangGraph agent end to end on a tiny generated corpus, with a fake chat model as planner."""

from __future__ import annotations

import sqlite3

import pytest
import torch

from agents.vimrag.agent import VimragAgent
from agents.vimrag.memory import DagMemory
from agents.vimrag.planner import ChatPlanner
from envs.errors import ConfigError
from envs.rag.corpus import answer_vocabulary, load_corpus

pytestmark = pytest.mark.slow
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def stack(tiny_stack):
    return tiny_stack  # tests/conftest.py


def fake_model(replies: list[str]):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    return GenericFakeChatModel(messages=iter([AIMessage(content=r) for r in replies]))


def test_corpus_is_deterministic_and_has_gold_evidence(stack) -> None:
    kb, _, _, folder = stack
    again = load_corpus(folder=folder)
    assert [q.qid for q in again.questions] == [q.qid for q in kb.corpus.questions]
    for q in kb.corpus.questions:
        assert q.answer in answer_vocabulary()
        for g in q.gold:
            kb.corpus.item(g)  # every gold id exists
    assert {q.qtype for q in kb.corpus.questions} >= {"placed_colour", "neighbour_category", "placed_pattern"}


def test_graph_runs_end_to_end_with_a_fake_chat_model(stack) -> None:
    kb, tools, reader, _ = stack
    q = next(q for q in kb.corpus.questions if q.qtype == "placed_colour")
    planner = ChatPlanner(fake_model(["I will search_text first.", "follow_links", "read", "answer now"]),
                          tools.payload)
    agent = VimragAgent(tools, reader, planner, mode="graph", budget=53)
    final = agent.build_graph().invoke(agent.start(q.qid, q.text))
    assert final["history"] == ["search_text", "follow_links", "read", "answer"]
    memory = final["memory"]
    memory.check()
    assert memory.find(f"log:{q.qid.split('/')[0]}") is not None  # hybrid search found the run's log
    assert memory.find(q.gold[1]) is not None  # and following it brought the end keyframe
    assert final["answer"] in answer_vocabulary()
    assert 0 < final["visual_tokens"] <= 53
    assert final["text_tokens"] > 0
    # Same steps through the fast rollout path give the same answer and memory.
    planner2 = ChatPlanner(fake_model(["search_text", "follow_links", "read", "answer"]), tools.payload)
    fast = VimragAgent(tools, reader, planner2, mode="graph", budget=53).rollout(q.qid, q.text)
    assert fast["answer"] == final["answer"] and fast["memory"] == memory


def test_sqlite_checkpointer_resumes_an_interrupted_run(stack, tmp_path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    kb, tools, reader, _ = stack
    q = kb.corpus.questions[0]
    db = str(tmp_path / "ckpt.sqlite")
    agent = VimragAgent(tools, reader, ChatPlanner(fake_model(["search_text", "follow_links", "read", "answer"]),
                                                   tools.payload), mode="uniform", budget=32)
    config = {"configurable": {"thread_id": q.qid}}
    with sqlite3.connect(db, check_same_thread=False) as conn:
        graph = agent.build_graph(SqliteSaver(conn), interrupt_before=["read"])  # stops like a killed run
        part = graph.invoke(agent.start(q.qid, q.text), config)
        assert part["history"] == ["search_text", "follow_links", "read"] and part["answer"] == ""
    with sqlite3.connect(db, check_same_thread=False) as conn:  # a new process would reopen the file
        graph = agent.build_graph(SqliteSaver(conn))
        done = graph.invoke(None, config)
    assert done["history"] == ["search_text", "follow_links", "read", "answer"]
    assert done["answer"] in answer_vocabulary() and done["visual_tokens"] <= 32


def test_bad_budget_and_mode_are_config_errors(stack) -> None:
    kb, tools, reader, _ = stack
    with pytest.raises(ConfigError, match="positive integer"):
        VimragAgent(tools, reader, None, budget=0)
    with pytest.raises(ConfigError, match="unknown vimrag memory mode 'tree'"):
        VimragAgent(tools, reader, None, mode="tree")


def test_malformed_corpus_is_a_config_error(tmp_path) -> None:
    (tmp_path / "corpus.json").write_text("{not json")
    with pytest.raises(ConfigError, match="malformed vimrag corpus"):
        load_corpus(folder=tmp_path)
    with pytest.raises(ConfigError, match="no vimrag corpus"):
        load_corpus(folder=tmp_path / "missing")


def test_a_second_read_with_the_budget_spent_does_not_override_the_first(stack) -> None:
    kb, tools, reader, _ = stack
    q = next(q for q in kb.corpus.questions if q.qtype == "placed_colour")
    script = ["search_text", "follow_links", "read", "read", "answer"]

    class RelyOnGold:  # the 5-step reader's relevance is near uniform over the six linked images: below the bar
        def __getattr__(self, name):
            return getattr(reader, name)

        def relevance(self, q_emb, context, image_ids):
            return {i: float(i == q.gold[1]) for i in image_ids}

    # Without the reserve the graph allocator spends the whole (1-token) budget on the first read; the second
    # finds nothing left and reads no image.
    agent = VimragAgent(tools, RelyOnGold(), ChatPlanner(fake_model(script), tools.payload), mode="graph", budget=1,
                        reserve=False)
    final = agent.rollout(q.qid, q.text)
    memory = final["memory"]
    memory.check()
    first, second = memory.of_kind("hypothesis")
    assert final["visual_tokens"] == 1
    assert any(memory.nodes[p].kind == "image" for p in first.parents)  # the first reading saw evidence
    assert not any(memory.nodes[p].kind == "image" for p in second.parents)  # the second saw nothing
    answer = memory.latest("answer")
    assert answer.parents == (first.node_id,) and final["answer"] == first.ref


class ByteTokenizer:
    """A byte-level stand-in for a chat tokenizer (the real SmolLM2 tokenizer exists only after its first load)."""

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def apply_chat_template(self, messages, add_generation_prompt: bool, return_tensors: str):
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        text += "<assistant>" if add_generation_prompt else ""
        return torch.tensor([self.encode(text)])

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": self.encode(text)}


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16384)
    return LlamaForCausalLM(cfg).eval()


def test_constrained_lm_planner_only_takes_valid_actions_and_scores_from_the_cache_exactly(stack) -> None:
    from agents.vimrag.planner import ACTIONS, ConstrainedLMPlanner

    kb, tools, reader, _ = stack
    model, tok = tiny_llama(), ByteTokenizer()
    planner = ConstrainedLMPlanner(model, tok, tools.payload)
    q = next(q for q in kb.corpus.questions if q.qtype == "placed_colour")
    final = VimragAgent(tools, reader, planner, mode="graph", budget=32, max_steps=4).rollout(q.qid, q.text)
    assert final["history"] and set(final["history"]) <= set(ACTIONS) and final["history"][-1] == "answer"
    assert all(set(s) <= set(ACTIONS) for s in planner.scores)
    # The cached continuation scores equal a plain forward over prompt + action (mean log-probability).
    system, user, valid = "pick one", "Question: what colour?", ["search_text", "read", "answer"]
    cached = planner.action_scores(system, user, valid)
    prompt = tok.apply_chat_template([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                     add_generation_prompt=True, return_tensors="pt")[0].tolist()
    for action in valid:
        cont = tok(action)["input_ids"]
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([prompt + cont])).logits[0].log_softmax(-1)
        plain = torch.stack([logp[len(prompt) - 1 + i, t] for i, t in enumerate(cont)]).mean()
        assert cached[action] == pytest.approx(float(plain), abs=1e-4)
    # With an empty memory only the searches and answering are valid.
    assert planner.choose(None, q.text, DagMemory(), [], 0, 4, []) in ("search_text", "search_images", "answer")


def test_reader_places_are_shared_across_grid_levels_and_its_question_statistics_are_its_own(stack) -> None:
    import numpy as np

    from envs.rag.corpus import fitting_half
    from policies.vimrag.reader import _POS_OFFSET, _cell_features

    cells = _cell_features()
    centre_1, centre_7 = cells[_POS_OFFSET[1]], cells[_POS_OFFSET[7] + 24]  # the middle cell of 1x1 and of 7x7
    assert np.allclose(centre_1[1:], centre_7[1:]) and centre_1[0] != centre_7[0]  # same place, other cell size
    left_7, right_7 = cells[_POS_OFFSET[7] + 21], cells[_POS_OFFSET[7] + 27]  # middle row, first and last column
    assert not np.allclose(left_7, right_7)
    kb, _, reader, _ = stack
    mine = fitting_half(kb.corpus.split("train"), "reader")
    expected = np.stack([kb.question_emb[q.qid] for q in mine]).mean(0)
    assert np.allclose(reader.net.q_mean.numpy(), expected, atol=1e-5)


def test_more_episodes_than_questions_exits_2_before_anything_runs(stack, tmp_path, capsys) -> None:
    from launch import eval as eval_cli

    kb, _, _, folder = stack
    available = min(len(kb.corpus.split("test", t)) for t in {q.qtype for q in kb.corpus.split("test")})
    out = tmp_path / "run"
    argv = ["--env", "vimrag", "--env-option", f"corpus_dir={folder}", "--policy", "vimrag",
            "--episodes", str(available + 1), "--workers", "1", "--out", str(out)]
    assert eval_cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"use --episodes <= {available}" in err and "Traceback" not in err
    assert not out.exists()  # nothing written, no question answered


def test_a_read_keeps_one_full_grid_however_much_it_reserves(stack) -> None:
    from agents.vimrag.allocator import FULL_GRID

    kb, tools, reader, _ = stack
    q = next(q for q in kb.corpus.questions if q.qtype == "placed_colour")
    script = ["search_text", "follow_links", "read", "answer"]  # other documents found stay unfollowed: open leads

    class RelyOnGold:
        def __getattr__(self, name):
            return getattr(reader, name)

        def relevance(self, q_emb, context, image_ids):
            return {i: float(i == q.gold[1]) for i in image_ids}

    def first_read_tokens(**kw) -> int:
        agent = VimragAgent(tools, RelyOnGold(), ChatPlanner(fake_model(script), tools.payload), mode="graph",
                            budget=64, **kw)
        return agent.rollout(q.qid, q.text)["visual_tokens"]

    # How planners are trained: the proportional reserve alone leaves the read less than a full grid to spend ...
    trained = first_read_tokens(read_floor=0)
    assert trained < FULL_GRID
    # ... while the agent answers with at least a full grid's worth available (64 - 49 = 15 reserved at most).
    assert trained < first_read_tokens() <= 64
